package flow_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/flow"
)

func load(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func parse(t *testing.T, spec string, loc *time.Location) *flow.Window {
	t.Helper()
	w, err := flow.ParseWindow(spec, loc)
	require.NoError(t, err)
	return w
}

func TestWindowOpenAndNextChange(t *testing.T) {
	t.Parallel()
	oslo := load(t, "Europe/Oslo")
	w := parse(t, "Mon-Fri 22:00-06:00; Sat,Sun 00:00-24:00", oslo)
	at := func(day, hh, mm int) time.Time { return time.Date(2026, 6, day, hh, mm, 0, 0, oslo) } // 2026-06-01 is a Monday
	for _, c := range []struct {
		t    time.Time
		open bool
		next time.Time
	}{
		{at(1, 0, 30), false, at(1, 22, 0)}, // Monday night: Sunday's window ended at midnight
		{at(1, 21, 59), false, at(1, 22, 0)},
		{at(1, 22, 0), true, at(2, 6, 0)},
		{at(2, 5, 59), true, at(2, 6, 0)},
		{at(2, 6, 0), false, at(2, 22, 0)},
		{at(5, 23, 0), true, at(8, 0, 0)}, // Friday night runs into the weekend, to Monday 00:00
		{at(6, 6, 0), true, at(8, 0, 0)},
		{at(7, 23, 59), true, at(8, 0, 0)},
		{at(8, 0, 0), false, at(8, 22, 0)},
	} {
		require.Equal(t, c.open, w.Open(c.t), "Open(%s)", c.t)
		require.Equal(t, c.next, w.NextChange(c.t), "NextChange(%s)", c.t)
	}
	// A week: five 8-hour nights less Friday's, which merges into 48 weekend
	// hours: Mon 22:00 .. Fri 06:00 is 4×8, Fri 22:00 .. Mon 00:00 is 50.
	require.Equal(t, (4*8+50)*time.Hour, w.OpenDuration(at(1, 0, 0), at(8, 0, 0)))
	require.Equal(t, 2*time.Hour, w.OpenDuration(at(1, 20, 0), at(2, 0, 0)))
	require.Zero(t, w.OpenDuration(at(2, 0, 0), at(1, 0, 0)))
	require.Equal(t, "Mon-Fri 22:00-06:00; Sat,Sun 00:00-24:00", w.String())
	require.Equal(t, oslo, w.Location())
}

func TestWindowAlwaysAndEveryDay(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"", "  ", "00:00-24:00", "Mon-Sun 00:00-12:00,12:00-24:00"} {
		w := parse(t, spec, nil)
		require.True(t, w.Open(t0), "%q", spec)
		require.True(t, w.NextChange(t0).IsZero(), "%q never changes", spec)
		require.Equal(t, 72*time.Hour, w.OpenDuration(t0, t0.Add(72*time.Hour)), "%q", spec)
	}
	require.True(t, parse(t, "", nil).Always())
	w := parse(t, "Sun-Tue 10:00-11:00;", time.UTC) // a range may wrap; a trailing ";" is fine
	require.Equal(t, 3*time.Hour, w.OpenDuration(t0, t0.Add(7*24*time.Hour)))
}

// TestWindowDST: windows follow wall-clock time in the zone, so nights and
// days across a transition are an hour shorter or longer.
func TestWindowDST(t *testing.T) {
	t.Parallel()
	oslo := load(t, "Europe/Oslo")
	night := parse(t, "22:00-06:00", oslo)
	sunday := parse(t, "Sun 00:00-24:00", oslo)
	// 2026: clocks go forward on Sunday 29 March at 02:00, back on Sunday 25
	// October at 03:00.
	for _, c := range []struct {
		name       string
		day        int
		month      time.Month
		nightHours time.Duration
		dayHours   time.Duration
	}{
		{"spring-forward", 29, time.March, 7, 23},
		{"fall-back", 25, time.October, 9, 25},
		{"ordinary", 7, time.June, 8, 24},
	} {
		from := time.Date(2026, c.month, c.day-1, 12, 0, 0, 0, oslo)
		to := time.Date(2026, c.month, c.day, 12, 0, 0, 0, oslo)
		require.Equal(t, c.nightHours*time.Hour, night.OpenDuration(from, to), c.name)
		closes := night.NextChange(time.Date(2026, c.month, c.day-1, 23, 0, 0, 0, oslo))
		require.Equal(t, time.Date(2026, c.month, c.day, 6, 0, 0, 0, oslo), closes, c.name)

		dayFrom := time.Date(2026, c.month, c.day-1, 0, 0, 0, 0, oslo)
		dayTo := time.Date(2026, c.month, c.day+2, 0, 0, 0, 0, oslo)
		require.Equal(t, c.dayHours*time.Hour, sunday.OpenDuration(dayFrom, dayTo), c.name)
	}
	// New York: forward on 8 March, back on 1 November 2026. A boundary in
	// the spring-forward gap (02:30 does not exist) moves past the gap.
	ny := load(t, "America/New_York")
	gap := parse(t, "Sun 02:30-04:00", ny)
	open := gap.NextChange(time.Date(2026, 3, 7, 12, 0, 0, 0, ny))
	require.Equal(t, time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC), open.UTC(), "02:30 EST = 03:30 EDT")
	require.Equal(t, time.Date(2026, 3, 8, 8, 0, 0, 0, time.UTC), gap.NextChange(open).UTC(), "04:00 EDT")
	require.Equal(t, 30*time.Minute, gap.OpenDuration(open.Add(-time.Hour), open.Add(time.Hour)))
	// A boundary in the repeated hour of a fall-back night is its first
	// occurrence, in both zones (time.Date picks the first in New York and
	// the second in Oslo).
	require.Equal(t, 150*time.Minute, parse(t, "Sun 01:30-03:00", ny).OpenDuration(
		time.Date(2026, 11, 1, 0, 0, 0, 0, ny), time.Date(2026, 11, 2, 0, 0, 0, 0, ny)), "01:30 EDT to 03:00 EST")
	require.Equal(t, 2*time.Hour, parse(t, "Sun 02:30-03:30", oslo).OpenDuration(
		time.Date(2026, 10, 25, 0, 0, 0, 0, oslo), time.Date(2026, 10, 26, 0, 0, 0, 0, oslo)), "02:30 CEST to 03:30 CET")
	require.Equal(t, 30*time.Minute, parse(t, "Sun 02:30-04:00", oslo).OpenDuration(
		time.Date(2026, 3, 29, 0, 0, 0, 0, oslo), time.Date(2026, 3, 30, 0, 0, 0, 0, oslo)), "03:30 to 04:00 CEST")
}

func TestWindowParseErrorsNameTheToken(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"Mon-Fry 22:00-06:00":          `unknown day "Fry"`,
		"Sat,Sun 00:00-24:0":           `bad end "24:0" in "00:00-24:0"`,
		"Mon 10:00-10:00":              `empty time range "10:00-10:00"`,
		"Mon 25:00-26:00":              `bad start "25:00"`,
		"Mon 24:00-02:00":              `bad start "24:00"`,
		"Mon 10:00-11:00 every":        `unexpected "every"`,
		"Mon 10:00-11:00;;Tue 10-11":   "clause 2 is empty",
		"Mon 10:00-11:00; Tue 1000":    `clause 2: bad time range "1000"`,
		"Sat,Sun":                      `bad time range "Sat"`,
		"Mon 10:00-11:00, Tue 10-11":   `unexpected "Tue"`,
		"Mon 09:60-10:00":              `bad start "09:60"`,
		"Mon,Frei 10:00-11:00":         `unknown day "Frei" in "Frei"`,
		"Mon-Fri 22:00-06:00; Sa 1-2 ": `clause 2: unknown day "Sa"`,
	} {
		_, err := flow.ParseWindow(spec, time.UTC)
		require.ErrorIs(t, err, flow.ErrWindowSpec, spec)
		require.ErrorContains(t, err, want, spec)
	}
}

// TestWindowProperty cross-checks Open, NextChange and OpenDuration on random
// specs against a minute-by-minute walk through a fortnight around a DST
// change.
func TestWindowProperty(t *testing.T) {
	t.Parallel()
	oslo := load(t, "Europe/Oslo")
	days := []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
	hhmm := func(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var clauses []string
		for range 1 + rng.IntN(3) {
			a, b := rng.IntN(7), rng.IntN(7)
			start := 15 * rng.IntN(96)
			end := 15 * (1 + rng.IntN(96))
			if end == start {
				end = start + 15
			}
			clauses = append(clauses, fmt.Sprintf("%s-%s %s-%s", days[a], days[b], hhmm(start), hhmm(end)))
		}
		spec := strings.Join(clauses, "; ")
		w := parse(t, spec, oslo)
		from := time.Date(2026, 10, 18, 0, 0, 0, 0, oslo)
		to := from.Add(14 * 24 * time.Hour)
		var open time.Duration
		prev := w.Open(from)
		change := w.NextChange(from)
		for at := from; at.Before(to); at = at.Add(time.Minute) {
			o := w.Open(at)
			if o {
				open += time.Minute
			}
			if o != prev {
				require.Equal(t, at, change, "%s: Open changed at %s", spec, at)
				change = w.NextChange(at)
			}
			prev = o
		}
		require.Equal(t, open, w.OpenDuration(from, to), spec)
	}
}
