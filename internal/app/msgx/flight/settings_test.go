package flight_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
)

func TestSettingsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		set     flight.Settings
		wantErr string // substring; "" = valid
	}{
		{name: "zero value is all defaults", set: flight.Settings{}},
		{name: "keep", set: flight.Settings{AbsentField: flight.AbsentKeep}},
		{name: "clear", set: flight.Settings{AbsentField: flight.AbsentClear}},
		{name: "day cut just under a day", set: flight.Settings{DayCut: 24*time.Hour - time.Second}},
		{name: "unknown absent rule", set: flight.Settings{AbsentField: "drop"}, wantErr: "msgx.flight.absent-field (AbsentField)"},
		{name: "negative day cut", set: flight.Settings{DayCut: -time.Minute}, wantErr: "msgx.flight.day-cut (DayCut)"},
		{name: "day cut of a day", set: flight.Settings{DayCut: 24 * time.Hour}, wantErr: "msgx.flight.day-cut (DayCut)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.set.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestSettingsDefaults(t *testing.T) {
	t.Parallel()
	var s flight.Settings
	require.Equal(t, flight.AbsentKeep, s.Absent())
	require.Equal(t, "Asia/Shanghai", s.AirportLocation().String())
	require.Same(t, s.AirportLocation(), s.MessageLocation(), "message zone defaults to the airport zone")
	utc := flight.Settings{AirportZone: time.UTC}
	require.Same(t, time.UTC, utc.MessageLocation())
}

// seed 000 §11.2: OPERATION_DAY from SODT by the airport zone and day cut.
func TestOperationDay(t *testing.T) {
	t.Parallel()
	shanghai, newYork := zone(t, "Asia/Shanghai"), zone(t, "America/New_York")
	utcToShanghai4h := flight.Settings{MessageZone: time.UTC, AirportZone: shanghai, DayCut: 4 * time.Hour}
	tests := []struct {
		name string
		set  flight.Settings
		sodt string
		want string
	}{
		{name: "defaults: local midnight", set: flight.Settings{}, sodt: "20260301000000", want: "20260301"},
		{name: "defaults: last second of the day", set: flight.Settings{}, sodt: "20260301235959", want: "20260301"},
		{name: "cut 4h: 03:59 belongs to yesterday", set: flight.Settings{DayCut: 4 * time.Hour}, sodt: "20260302035959", want: "20260301"},
		{name: "cut 4h: 04:00 is today", set: flight.Settings{DayCut: 4 * time.Hour}, sodt: "20260302040000", want: "20260302"},
		{name: "UTC message, Shanghai airport: 15:59Z is 23:59 local", set: flight.Settings{MessageZone: time.UTC, AirportZone: shanghai}, sodt: "20260301155900", want: "20260301"},
		{name: "UTC message, Shanghai airport: 16:00Z is next local day", set: flight.Settings{MessageZone: time.UTC, AirportZone: shanghai}, sodt: "20260301160000", want: "20260302"},
		{name: "UTC message, Shanghai, cut 4h: 19:59Z is 03:59 local, previous day", set: utcToShanghai4h, sodt: "20260301195900", want: "20260301"},
		{name: "UTC message, Shanghai, cut 4h: 20:00Z is 04:00 local", set: utcToShanghai4h, sodt: "20260301200000", want: "20260302"},
		{name: "Shanghai message, UTC airport: 07:00 local is 23:00Z the day before", set: flight.Settings{MessageZone: shanghai, AirportZone: time.UTC}, sodt: "20260301070000", want: "20260228"},
		{name: "fixed zone", set: flight.Settings{AirportZone: time.FixedZone("X", -3*3600), MessageZone: time.UTC}, sodt: "20260301020000", want: "20260228"},
		// 2026-03-08 is a spring-forward day in New York: the cut is wall-clock
		// arithmetic, so 04:30 local is after a 4h cut although only 3h have
		// elapsed since midnight.
		{name: "DST day: cut is on the wall clock", set: flight.Settings{AirportZone: newYork, DayCut: 4 * time.Hour}, sodt: "20260308043000", want: "20260308"},
		{name: "DST day: before the cut", set: flight.Settings{AirportZone: newYork, DayCut: 4 * time.Hour}, sodt: "20260308035900", want: "20260307"},
		{name: "sodt location is ignored, its wall clock is read", set: flight.Settings{AirportZone: shanghai}, sodt: "", want: "20260301"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sodt := time.Date(2026, 3, 1, 0, 30, 0, 0, newYork) // wall 00:30 held in another zone
			if tt.sodt != "" {
				sodt = wall(tt.sodt)
			}
			require.Equal(t, tt.want, tt.set.OperationDay(sodt))
		})
	}
}
