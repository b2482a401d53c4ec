package flow_test

import (
	"testing"
	"time"

	"github.com/relayhq/relay/internal/flow"
)

// FuzzParseWindow: any spec is either refused with ErrWindowSpec or gives a
// window whose Open, NextChange and OpenDuration agree, in a DST zone.
func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{
		"", "Mon-Fri 22:00-06:00; Sat,Sun 00:00-24:00", "00:00-24:00", "Fri-Mon 23:59-00:01",
		"Sun 02:30-03:30", "mon,WED 10:00-11:00,12:00-13:00;", "Mon 24:00-01:00", ";;", "Tue 9:00-10:00",
	} {
		f.Add(s, int64(0))
	}
	oslo, err := time.LoadLocation("Europe/Oslo")
	if err != nil {
		f.Fatal(err)
	}
	base := time.Date(2026, 3, 27, 0, 0, 0, 0, oslo) // two days before spring-forward
	f.Fuzz(func(t *testing.T, spec string, offset int64) {
		w, err := flow.ParseWindow(spec, oslo)
		if err != nil {
			return
		}
		at := base.Add(time.Duration(offset % int64(10*24*time.Hour)))
		next := w.NextChange(at)
		if next.IsZero() {
			return
		}
		if !next.After(at) {
			t.Fatalf("%q: NextChange(%s) = %s, not after", spec, at, next)
		}
		if w.Open(at) == w.Open(next) {
			t.Fatalf("%q: Open does not change at NextChange(%s) = %s", spec, at, next)
		}
		if w.Open(at) == (w.OpenDuration(at, next) == 0) {
			t.Fatalf("%q: OpenDuration(%s, %s) = %s disagrees with Open", spec, at, next, w.OpenDuration(at, next))
		}
		if mid := at.Add(next.Sub(at) / 2); w.Open(mid) != w.Open(at) {
			t.Fatalf("%q: Open changes before NextChange(%s) = %s", spec, at, next)
		}
	})
}
