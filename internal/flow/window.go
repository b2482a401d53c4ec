package flow

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrWindowSpec is wrapped by every ParseWindow error.
var ErrWindowSpec = errors.New("flow: bad window spec")

// Window is a set of weekly transfer windows in one IANA time zone (seed 004
// §13.3). Its spec is clauses separated by ";", each "DAYS RANGES":
//
//	Mon-Fri 22:00-06:00; Sat,Sun 00:00-24:00
//
// DAYS is a comma list of days (Mon Tue Wed Thu Fri Sat Sun, any case) and
// day ranges (Mon-Fri; a range may wrap: Fri-Mon); it may be left out for
// every day. RANGES is a comma list of HH:MM-HH:MM wall-clock ranges, start
// inclusive, end exclusive; 24:00 is allowed as an end; an end at or before
// the start crosses midnight into the next day (22:00-06:00 opened on Friday
// closes on Saturday 06:00). An empty spec is always open.
//
// Wall times are turned into instants in the zone on each date, so windows
// follow DST: a 22:00-06:00 night is 7 hours long across a spring-forward and
// 9 across a fall-back in Europe/Oslo. A boundary that falls in a
// spring-forward gap moves forward by the gap (02:30 opens at 03:30); one in
// a fall-back repeat is its first occurrence. (time.Date leaves both cases
// unspecified, and in practice answers differently per zone.)
//
// A Window is immutable and safe for concurrent use.
type Window struct {
	spec   string
	loc    *time.Location
	always bool
	days   [7][]dayRange // by time.Weekday
}

// dayRange is minutes after the local midnight of the date it opens on; end
// may pass 1440 when the range crosses midnight.
type dayRange struct{ start, end int }

// span is an open interval [start, end) in absolute time.
type span struct{ start, end time.Time }

var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// ParseWindow parses spec (see Window) for the zone loc (nil is UTC). An
// error wraps ErrWindowSpec and names the token it could not read.
func ParseWindow(spec string, loc *time.Location) (*Window, error) {
	if loc == nil {
		loc = time.UTC
	}
	w := &Window{spec: spec, loc: loc}
	if strings.TrimSpace(spec) == "" {
		w.always = true
		return w, nil
	}
	// A trailing ";" is harmless; any other empty clause is a mistake.
	body := strings.TrimSuffix(strings.TrimSpace(spec), ";")
	for i, clause := range strings.Split(body, ";") {
		fields := strings.Fields(clause)
		var days []time.Weekday
		var ranges string
		switch len(fields) {
		case 0:
			return nil, fmt.Errorf("%w: clause %d is empty", ErrWindowSpec, i+1)
		case 1:
			ranges = fields[0]
			days = []time.Weekday{0, 1, 2, 3, 4, 5, 6}
		case 2:
			var err error
			if days, err = parseDays(fields[0]); err != nil {
				return nil, fmt.Errorf("%w: clause %d: %w", ErrWindowSpec, i+1, err)
			}
			ranges = fields[1]
		default:
			return nil, fmt.Errorf("%w: clause %d: unexpected %q (want DAYS HH:MM-HH:MM)", ErrWindowSpec, i+1, fields[2])
		}
		for _, tok := range strings.Split(ranges, ",") {
			r, err := parseRange(tok)
			if err != nil {
				return nil, fmt.Errorf("%w: clause %d: %w", ErrWindowSpec, i+1, err)
			}
			for _, d := range days {
				w.days[d] = append(w.days[d], r)
			}
		}
	}
	return w, nil
}

func parseDays(s string) ([]time.Weekday, error) {
	var out []time.Weekday
	for _, tok := range strings.Split(s, ",") {
		from, to, isRange := strings.Cut(tok, "-")
		a, ok := weekdays[strings.ToLower(from)]
		if !ok {
			return nil, fmt.Errorf("unknown day %q in %q", from, tok)
		}
		b := a
		if isRange {
			if b, ok = weekdays[strings.ToLower(to)]; !ok {
				return nil, fmt.Errorf("unknown day %q in %q", to, tok)
			}
		}
		for d := a; ; d = (d + 1) % 7 {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
			if d == b {
				break
			}
		}
	}
	return out, nil
}

func parseRange(tok string) (dayRange, error) {
	from, to, ok := strings.Cut(tok, "-")
	if !ok {
		return dayRange{}, fmt.Errorf("bad time range %q (want HH:MM-HH:MM)", tok)
	}
	start, err := parseClock(from, false)
	if err != nil {
		return dayRange{}, fmt.Errorf("bad start %q in %q: %w", from, tok, err)
	}
	end, err := parseClock(to, true)
	if err != nil {
		return dayRange{}, fmt.Errorf("bad end %q in %q: %w", to, tok, err)
	}
	if end == start {
		return dayRange{}, fmt.Errorf("empty time range %q (for a whole day write 00:00-24:00)", tok)
	}
	if end < start {
		end += 24 * 60
	}
	return dayRange{start: start, end: end}, nil
}

func parseClock(s string, end bool) (int, error) {
	hh, mm, ok := strings.Cut(s, ":")
	if !ok || len(hh) != 2 || len(mm) != 2 {
		return 0, errors.New("want HH:MM")
	}
	h, err1 := strconv.Atoi(hh)
	m, err2 := strconv.Atoi(mm)
	if err1 != nil || err2 != nil || h < 0 || m < 0 || m > 59 || h > 24 || (h == 24 && (m != 0 || !end)) {
		return 0, errors.New("want HH:MM from 00:00 to 23:59 (24:00 only as an end)")
	}
	return h*60 + m, nil
}

// String returns the spec the window was parsed from.
func (w *Window) String() string { return w.spec }

// Location returns the window's time zone.
func (w *Window) Location() *time.Location { return w.loc }

// Always reports whether the window is always open (an empty spec).
func (w *Window) Always() bool { return w.always }

// spans returns the merged open spans that overlap [from, to), sorted.
func (w *Window) spans(from, to time.Time) []span {
	lf := from.In(w.loc)
	// Start a day early: yesterday's range may cross midnight into from.
	y, m, d := lf.Date()
	day := time.Date(y, m, d-1, 0, 0, 0, 0, w.loc)
	var out []span
	for i := 0; ; i++ {
		y, m, d := day.Date()
		date := time.Date(y, m, d+i, 12, 0, 0, 0, w.loc) // noon: never in a DST gap
		dy, dm, dd := date.Date()
		if time.Date(dy, dm, dd, 0, 0, 0, 0, w.loc).After(to) {
			break
		}
		for _, r := range w.days[date.Weekday()] {
			s := span{start: wallTime(dy, dm, dd, r.start, w.loc), end: wallTime(dy, dm, dd, r.end, w.loc)}
			if s.end.After(from) && s.start.Before(to) && s.end.After(s.start) {
				out = append(out, s)
			}
		}
	}
	slices.SortFunc(out, func(a, b span) int { return a.start.Compare(b.start) })
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && !s.start.After(merged[n-1].end) {
			if s.end.After(merged[n-1].end) {
				merged[n-1].end = s.end
			}
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// Open reports whether the window is open at t.
func (w *Window) Open(t time.Time) bool {
	if w.always {
		return true
	}
	for _, s := range w.spans(t, t.Add(time.Nanosecond)) {
		if !t.Before(s.start) && t.Before(s.end) {
			return true
		}
	}
	return false
}

// week is how far NextChange looks: a window open for a whole week is open
// always, one closed for a whole week never opens.
const week = 7 * 24 * time.Hour

// NextChange returns the first instant after t at which Open changes (the
// end of the open span t is in, or the start of the next one), or the zero
// time when it never changes (always open, or never open).
func (w *Window) NextChange(t time.Time) time.Time {
	if w.always {
		return time.Time{}
	}
	// The spans are merged across day boundaries, so one span reaching past a
	// week from t means the window never closes.
	horizon := t.Add(week + 2*24*time.Hour)
	for _, s := range w.spans(t, horizon) {
		switch {
		case s.start.After(t):
			return s.start
		case s.end.Sub(t) > week:
			return time.Time{}
		default:
			return s.end
		}
	}
	return time.Time{}
}

// OpenDuration returns how much of [from, to) the window is open: the
// transfer time available in that interval, for ETAs. It is 0 when to is not
// after from.
func (w *Window) OpenDuration(from, to time.Time) time.Duration {
	if !to.After(from) {
		return 0
	}
	if w.always {
		return to.Sub(from)
	}
	var total time.Duration
	for _, s := range w.spans(from, to) {
		total += minTime(s.end, to).Sub(maxTime(s.start, from))
	}
	return total
}

// wallTime returns the instant of the wall-clock time minutes after midnight
// of y-m-d in loc, deciding the cases time.Date leaves open the way cron and
// java.time do: a wall time in a spring-forward gap is moved forward by the
// gap (02:30 becomes 03:30), and a wall time a fall-back repeats is its
// first occurrence (the one in summer time). It assumes at most one zone
// transition within a day of the time, as in every real zone.
func wallTime(y int, m time.Month, d, minutes int, loc *time.Location) time.Time {
	wall := time.Date(y, m, d, 0, minutes, 0, 0, time.UTC)
	_, before := wall.Add(-24 * time.Hour).In(loc).Zone()
	_, after := wall.Add(24 * time.Hour).In(loc).Zone()
	var first time.Time
	for _, off := range []int{before, after} {
		t := wall.Add(-time.Duration(off) * time.Second)
		if _, o := t.In(loc).Zone(); o != off {
			continue // this offset is not in force at that instant
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	if first.IsZero() { // in a gap: read it with the offset before the gap
		first = wall.Add(-time.Duration(before) * time.Second)
	}
	return first.In(loc)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
