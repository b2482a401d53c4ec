package rules

import (
	"strconv"
	"time"
)

// ChinaTime is China Standard Time, UTC+8 all year (no daylight saving):
// the zone of a "day" for daily limits and of the frequency windows.
var ChinaTime = time.FixedZone("CST", 8*60*60)

// LimitKey is a counter a later stage increments in the database, under a
// unique constraint, for each message it accepts: at most Max per Key. The
// key is stable for the whole window, so two stages (or a replay) counting
// one window meet the same row; it holds the number for per-number limits
// and must never be logged.
type LimitKey struct {
	Key string
	Max int
	// Until is when the window ends; a counter row may be deleted after it.
	Until time.Time
}

// DailyKey returns app's daily-limit key for the day of now in ChinaTime:
// "daily:<app>:<YYYYMMDD>", Max = limit. ok is false when limit is 0 (no
// limit).
func DailyKey(app int64, limit int, now time.Time) (key LimitKey, ok bool) {
	if limit <= 0 {
		return LimitKey{}, false
	}
	t := now.In(ChinaTime)
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, ChinaTime)
	return LimitKey{Key: "daily:" + strconv.FormatInt(app, 10) + ":" + day.Format("20060102"), Max: limit,
		Until: day.AddDate(0, 0, 1)}, true
}

// FrequencyKeys returns the per-number keys of app's frequency rules at
// now: one per rule, "freq:<app>:<window seconds>:<window start unix>:<number>".
// Windows are fixed and aligned in ChinaTime (a 1-day window starts at
// midnight there, a 1-hour window on the hour), so a key is the same for
// every message of its window. Fixed windows are simple and stable to
// count under a unique key; the price is that up to 2×Max messages can
// fall within any Window-long span that straddles a boundary. Rules with
// a window under a second or a Max under one are ignored.
func FrequencyKeys(app int64, number string, rules []FrequencyRule, now time.Time) []LimitKey {
	const offset = 8 * 60 * 60
	out := make([]LimitKey, 0, len(rules))
	for _, r := range rules {
		w := int64(r.Window / time.Second)
		if w < 1 || r.Max < 1 {
			continue
		}
		local := now.Unix() + offset
		start := local - mod(local, w) - offset
		out = append(out, LimitKey{
			Key: "freq:" + strconv.FormatInt(app, 10) + ":" + strconv.FormatInt(w, 10) + ":" +
				strconv.FormatInt(start, 10) + ":" + number,
			Max:   r.Max,
			Until: time.Unix(start+w, 0).UTC(),
		})
	}
	return out
}

// mod is the non-negative remainder of a / b (b > 0).
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
