package flight

import (
	"fmt"
	"sync"
	"time"
	_ "time/tzdata" // the default airport zone must load on hosts without a zoneinfo database
)

// AbsentRule says what an optional element that a SCHD DNLD/RESP record does
// not carry means for the flight's current value (seed 000 §12.1, Q13).
type AbsentRule string

const (
	// AbsentKeep keeps the current value: the seed's §12.1 design ("未携带的字段按合并规则保留").
	AbsentKeep AbsentRule = "keep"
	// AbsentClear clears it (scalars to NULL, collections to empty): the
	// SIS-conformant reading (SIS:3.16-note-4: an optional field the latest
	// plan does not send means AODB no longer has it).
	AbsentClear AbsentRule = "clear"
)

// Defaults of Settings.
const (
	// AbsentFieldDefault is the rule used when Settings.AbsentField is "".
	AbsentFieldDefault = AbsentKeep
	// AirportZoneDefault names the zone used when Settings.AirportZone is nil.
	AirportZoneDefault = "Asia/Shanghai"
	// DayCutDefault is Settings.DayCut's zero value: the operating day starts at local midnight.
	DayCutDefault time.Duration = 0
)

// Settings are the flight domain's parameters. The zero value is valid and
// means every default. Settings are read-only values, safe for concurrent use.
type Settings struct {
	// AbsentField is PARAM msgx.flight.absent-field: what an optional element
	// missing from a SCHD DNLD/RESP record means. "" means AbsentFieldDefault
	// (keep). It never applies to FLOP (which changes only what it carries) or
	// to ADFT (set-only), nor to FLID and the computed fields (STATE,
	// STATE_VERSION, OPERATION_DAY, LAST_MSG_ID, CREATED_AT, UPDATED_AT).
	AbsentField AbsentRule
	// AirportZone is msgx.flight.airport-zone, the zone whose calendar defines
	// OPERATION_DAY (seed 000 §11.2). nil means AirportZoneDefault
	// (Asia/Shanghai; a fixed UTC+8 "CST" if the zone cannot be loaded).
	AirportZone *time.Location
	// MessageZone is msgx.flight.message-zone, the zone SIS wall-clock times
	// are in. The decoder holds them in time.UTC without conversion
	// (docs/msgx/sis-xml.md §1); this says what that wall clock really means.
	// nil means the same as AirportZone.
	MessageZone *time.Location
	// DayCut is msgx.flight.day-cut, in [0, 24h): airport-local times before
	// the cut belong to the previous operating day (e.g. 4h: 03:59 belongs to
	// yesterday). Default DayCutDefault (0, local midnight).
	DayCut time.Duration
}

// defaultZone is loaded once; tzdata is embedded so the fallback is only a
// guard against a broken build.
var defaultZone = sync.OnceValue(func() *time.Location {
	if loc, err := time.LoadLocation(AirportZoneDefault); err == nil {
		return loc
	}
	return time.FixedZone("CST", 8*3600)
})

// Validate reports the first invalid setting, naming its PARAM.
func (s Settings) Validate() error {
	switch s.AbsentField {
	case "", AbsentKeep, AbsentClear:
	default:
		return fmt.Errorf("flight: settings: msgx.flight.absent-field (AbsentField) %q: want %q or %q",
			s.AbsentField, AbsentKeep, AbsentClear)
	}
	if s.DayCut < 0 || s.DayCut >= 24*time.Hour {
		return fmt.Errorf("flight: settings: msgx.flight.day-cut (DayCut) %s: want within [0, 24h)", s.DayCut)
	}
	return nil
}

// Absent returns the effective AbsentField rule (AbsentFieldDefault for "").
func (s Settings) Absent() AbsentRule {
	if s.AbsentField == "" {
		return AbsentFieldDefault
	}
	return s.AbsentField
}

// AirportLocation returns the effective airport zone (AirportZoneDefault for nil).
func (s Settings) AirportLocation() *time.Location {
	if s.AirportZone == nil {
		return defaultZone()
	}
	return s.AirportZone
}

// MessageLocation returns the effective zone of SIS wall-clock times (AirportLocation() for nil).
func (s Settings) MessageLocation() *time.Location {
	if s.MessageZone == nil {
		return s.AirportLocation()
	}
	return s.MessageZone
}

// OperationDay returns the OPERATION_DAY (YYYYMMDD) of a scheduled operation
// time (seed 000 §11.2). sodt is a SIS wall clock as decoded: its location is
// ignored and its wall clock is read in MessageLocation(); that instant is
// converted to AirportLocation(), DayCut is subtracted from the airport-local
// wall clock (wall-clock arithmetic, so a DST change that day does not move
// the cut), and the date is taken. sodt must be a value (non-zero).
func (s Settings) OperationDay(sodt time.Time) string {
	y, mo, d := sodt.Date()
	h, mi, sec := sodt.Clock()
	local := time.Date(y, mo, d, h, mi, sec, sodt.Nanosecond(), s.MessageLocation()).In(s.AirportLocation())
	y, mo, d = local.Date()
	h, mi, sec = local.Clock()
	wall := time.Date(y, mo, d, h, mi, sec, local.Nanosecond(), time.UTC).Add(-s.DayCut)
	return wall.Format("20060102")
}
