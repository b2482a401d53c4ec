package simulate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
)

// TestModelCompare: the check can fail — a changed field, a missing or extra
// flight, a wrong collection order each show — and ignores what it must.
func TestModelCompare(t *testing.T) {
	t.Parallel()
	model := defaultPlan.Model()
	states := func() []*flight.State { return model.States() }
	find := func(list []*flight.State, ok func(*flight.State) bool) *flight.State {
		for _, s := range list {
			if ok(s) {
				return s
			}
		}
		t.Fatal("no such flight in the model")
		return nil
	}
	one := func(t *testing.T, diffs []string, flid string, parts ...string) {
		t.Helper()
		require.Len(t, diffs, 1, "%v", diffs)
		require.Contains(t, diffs[0], "FLID "+flid)
		for _, p := range parts {
			require.Contains(t, diffs[0], p)
		}
	}

	t.Run("equal", func(t *testing.T) {
		t.Parallel()
		actual := states()
		require.Len(t, actual, model.Flights())
		require.Empty(t, model.Compare(actual))
	})
	t.Run("ignores bookkeeping, zones and nil vs empty", func(t *testing.T) {
		t.Parallel()
		actual := states()
		cst := time.FixedZone("CST", 8*3600)
		for i, s := range actual {
			s.Version, s.LastMsgID, s.CreatedAt, s.UpdatedAt = int64(i+7), int64(i*3), time.Now(), time.Now()
			if !s.SODT.IsZero() { // the same wall clock in another location
				y, mo, d := s.SODT.Date()
				h, mi, sec := s.SODT.Clock()
				s.SODT = time.Date(y, mo, d, h, mi, sec, 0, cst)
			}
			for k := range s.Resources {
				if s.Resources[k] == nil {
					s.Resources[k] = []flight.Resource{}
				}
			}
		}
		require.Empty(t, model.Compare(actual))
	})
	t.Run("changed field", func(t *testing.T) {
		t.Parallel()
		actual := states()
		s := find(actual, func(s *flight.State) bool { return s.Status == flight.Active && s.ACTY != "" })
		s.ACTY = "XXXX"
		one(t, model.Compare(actual), s.FLID, "ACTY", `"XXXX"`)
	})
	t.Run("changed status", func(t *testing.T) {
		t.Parallel()
		actual := states()
		s := find(actual, func(s *flight.State) bool { return s.Status == flight.Deleted })
		s.Status = flight.Active
		one(t, model.Compare(actual), s.FLID, "Status", "want DELETED, have ACTIVE")
	})
	t.Run("changed MAID", func(t *testing.T) {
		t.Parallel()
		actual := states()
		s := find(actual, func(s *flight.State) bool { return s.MAID != "" })
		s.MAID = ""
		one(t, model.Compare(actual), s.FLID, "MAID", "have NULL")
	})
	t.Run("missing flight", func(t *testing.T) {
		t.Parallel()
		actual := states()
		flid := actual[3].FLID
		actual = append(actual[:3], actual[4:]...)
		one(t, model.Compare(actual), flid, "missing")
	})
	t.Run("extra flight", func(t *testing.T) {
		t.Parallel()
		actual := append(states(), &flight.State{FLID: "X1", Status: flight.Active})
		one(t, model.Compare(actual), "X1", "extra flight")
	})
	t.Run("duplicate flight", func(t *testing.T) {
		t.Parallel()
		actual := states()
		actual = append(actual, actual[0])
		one(t, model.Compare(actual), actual[0].FLID, "twice")
	})
	t.Run("collection order", func(t *testing.T) {
		t.Parallel()
		actual := states()
		s := find(actual, func(s *flight.State) bool {
			r := s.Resources[flight.CKIC]
			return len(r) >= 2 && r[0] != r[1]
		})
		r := s.Resources[flight.CKIC]
		r[0], r[1] = r[1], r[0]
		one(t, model.Compare(actual), s.FLID, "CKIC")
	})
	t.Run("item field", func(t *testing.T) {
		t.Parallel()
		actual := states()
		s := find(actual, func(s *flight.State) bool { return len(s.Routes[flight.ROUT]) > 0 })
		s.Routes[flight.ROUT][0].SourceSeq = nil
		one(t, model.Compare(actual), s.FLID, "ROUT", "seq=NULL")
	})
	t.Run("service collection cleared", func(t *testing.T) {
		t.Parallel()
		actual := states()
		s := find(actual, func(s *flight.State) bool { return len(s.Services[flight.VIPF]) > 0 })
		s.Services[flight.VIPF] = nil
		one(t, model.Compare(actual), s.FLID, "VIPF", "have []")
	})
	t.Run("many", func(t *testing.T) {
		t.Parallel()
		actual := states()
		for _, s := range actual {
			s.TERM = "T9"
		}
		diffs := model.Compare(actual)
		require.Len(t, diffs, len(actual))
		require.True(t, strings.Contains(diffs[0], "TERM"))
	})
}
