package flight_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
)

// now is the processing clock of every test decision; created is the
// CreatedAt/UpdatedAt of the fixture states.
var (
	now     = time.Date(2026, 3, 1, 1, 2, 3, 0, time.UTC)
	created = time.Date(2026, 2, 28, 10, 0, 0, 0, time.UTC)
)

const msgID = 42

// wall parses a SIS YYYYMMDDhhmmss wall clock the way the decoder holds it.
func wall(s string) time.Time {
	t, err := time.ParseInLocation("20060102150405", s, time.UTC)
	if err != nil {
		panic(err)
	}
	return t
}

func ptr[T any](v T) *T { return &v }

func schd(sub string, recs ...sisxml.Flight) *sisxml.Message {
	return &sisxml.Message{
		Meta: sisxml.Meta{SNDR: "AODB", SEQN: "1", DTTM: now, TYPE: "SCHD", STYP: sub},
		Kind: sisxml.KindSchd,
		Schd: &sisxml.Schedule{Subtype: sub, RCNT: len(recs), Flights: recs},
	}
}

func flop(sub string, f sisxml.Flight) *sisxml.Message {
	return &sisxml.Message{
		Meta: sisxml.Meta{SNDR: "AODB", SEQN: "2", DTTM: now, TYPE: "FLOP", STYP: sub},
		Kind: sisxml.KindFlop,
		Flop: &sisxml.FlightOp{Subtype: sub, Flight: f},
	}
}

func fdel(flid string) *sisxml.Message {
	return &sisxml.Message{
		Meta: sisxml.Meta{SNDR: "AODB", SEQN: "3", DTTM: now, TYPE: "FDEL", STYP: "DELE"},
		Kind: sisxml.KindFdel,
		Fdel: &sisxml.FlightDelete{FLID: flid},
	}
}

func msgFor(m *sisxml.Message) flight.Msg {
	return flight.Msg{ID: msgID, Kind: m.Meta.Kind(), Now: now}
}

// gate is a decoded resource ITEM with a code and a SEQU.
func gate(seq int, code string) sisxml.Resource {
	return sisxml.Resource{SEQU: sisxml.Val(seq), CODE: sisxml.Val(code)}
}

// res is the state resource gate(seq, code) converts to.
func res(seq int, code string) flight.Resource {
	return flight.Resource{SourceSeq: ptr(seq), Code: code}
}

// active is a stored ACTIVE flight of operating day 20260301 at version 3,
// with a base field, a gate and both routes, then mods applied.
func active(flid string, mods ...func(*flight.State)) *flight.State {
	s := &flight.State{
		FLID:         flid,
		Status:       flight.Active,
		Version:      3,
		OperationDay: "20260301",
		LastMsgID:    7,
		CreatedAt:    created,
		UpdatedAt:    created,
		FLNO:         "CA" + flid,
		AWCD:         "CA",
		SODT:         wall("20260301093000"),
		STAT:         "SCH",
	}
	s.Resources[flight.GATE] = []flight.Resource{res(1, "B12")}
	s.Routes[flight.ROUT] = []flight.RoutePoint{{SourceSeq: ptr(1), Airport: "PEK"}}
	s.Routes[flight.ERUT] = []flight.RoutePoint{{SourceSeq: ptr(1), Airport: "SHA"}}
	for _, m := range mods {
		m(s)
	}
	return s
}

func deleted(s *flight.State) { s.Status = flight.Deleted }
func noDay(s *flight.State)   { s.OperationDay = "" }
func childOf(maid string) func(*flight.State) {
	return func(s *flight.State) { s.MAID = maid }
}

func snapOf(states ...*flight.State) map[string]*flight.State {
	m := make(map[string]*flight.State, len(states))
	for _, s := range states {
		m[s.FLID] = s
	}
	return m
}

// decide runs Decide and requires success.
func decide(t *testing.T, snap map[string]*flight.State, m *sisxml.Message, set flight.Settings) *flight.Change {
	t.Helper()
	ch, err := flight.Decide(snap, m, msgFor(m), set)
	require.NoError(t, err)
	require.NotNil(t, ch)
	require.Len(t, ch.Notices, len(ch.Saved))
	for i, s := range ch.Saved {
		require.Equal(t, s.FLID, ch.Notices[i].FLID, "notice order = saved order")
		require.Equal(t, s.Version, ch.Notices[i].Version)
		require.Equal(t, now, s.UpdatedAt)
		require.EqualValues(t, msgID, s.LastMsgID)
		if i > 0 {
			require.Less(t, ch.Saved[i-1].FLID, s.FLID, "saved FLID ascending, each once")
		}
	}
	if ch.Skipped != "" {
		require.Empty(t, ch.Saved)
	}
	return ch
}

// saved returns the saved state and notice of flid (nil if not saved).
func saved(ch *flight.Change, flid string) (*flight.State, *flight.Notice) {
	for i, s := range ch.Saved {
		if s.FLID == flid {
			return s, &ch.Notices[i]
		}
	}
	return nil, nil
}

// savedIDs returns the FLIDs in ch.Saved.
func savedIDs(ch *flight.Change) []string {
	var ids []string
	for _, s := range ch.Saved {
		ids = append(ids, s.FLID)
	}
	return ids
}

// protocolErr requires err to be a *flight.ProtocolError and returns it.
func protocolErr(t *testing.T, err error) *flight.ProtocolError {
	t.Helper()
	var pe *flight.ProtocolError
	require.True(t, errors.As(err, &pe), "want *ProtocolError, have %v", err)
	return pe
}

// zone loads a time zone (tzdata is embedded by the package).
func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}
