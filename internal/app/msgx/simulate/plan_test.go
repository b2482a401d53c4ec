package simulate_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/msgx/simulate"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relaytype"
)

// defaultPlan is the default plan (seed 1), generated once: several tests
// read it and a Plan is immutable.
var defaultPlan = simulate.NewPlan(simulate.Options{Seed: 1})

func TestNewPlanDeterministic(t *testing.T) {
	t.Parallel()
	o := simulate.Options{Flights: 200, Seed: 42}
	a, b := simulate.NewPlan(o), simulate.NewPlan(o)
	require.Equal(t, a.Messages(), b.Messages())
	require.Equal(t, a.Model().States(), b.Model().States())
	require.Equal(t, a.Counts(), b.Counts())

	o.Seed = 43
	c := simulate.NewPlan(o)
	require.NotEqual(t, a.Messages(), c.Messages(), "another seed, another day")
	require.Len(t, c.Messages(), len(a.Messages()), "but the same counts")
}

func TestNewPlanCounts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		plan *simulate.Plan
	}{
		{"default", defaultPlan},
		{"small", simulate.NewPlan(simulate.Options{Flights: 120, Seed: 7})},
		{"custom", simulate.NewPlan(simulate.Options{Day: "20261231", Flights: 300, Updates: 45, Deletions: 9, Adhoc: 4,
			Duplicates: 11, Malformed: 13, Ignored: 5, Protocol: 3, Replans: 2, Rollbacks: 2, Late: 3, PlanChunks: 7, Seed: 9})},
		{"none", simulate.NewPlan(simulate.Options{Flights: 50, Updates: -1, Deletions: -1, Adhoc: -1, Duplicates: -1,
			Malformed: -1, Ignored: -1, Protocol: -1, Replans: -1, Rollbacks: -1, Late: -1, Seed: 3})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, c := tc.plan.Options(), tc.plan.Counts()
			require.Equal(t, tc.plan.Messages(), simulate.NewPlan(o).Messages(), "Options() regenerates the plan")
			for _, v := range []*int{&o.Updates, &o.Deletions, &o.Adhoc, &o.Duplicates, &o.Malformed, &o.Ignored,
				&o.Protocol, &o.Replans, &o.Rollbacks, &o.Late} {
				require.GreaterOrEqual(t, *v, -1)
				*v = max(0, *v) // -1: none
			}
			require.Equal(t, nonZero(map[simulate.Category]int{
				simulate.CategoryPlan: o.PlanChunks, simulate.CategoryReplan: o.Replans, simulate.CategoryUpdate: o.Updates,
				simulate.CategoryDeletion: o.Deletions, simulate.CategoryAdhoc: o.Adhoc, simulate.CategoryDuplicate: o.Duplicates,
				simulate.CategoryMalformed: o.Malformed, simulate.CategoryIgnored: o.Ignored, simulate.CategoryProtocol: o.Protocol,
				simulate.CategoryRollback: o.Rollbacks,
			}), nonZero(c.Categories))
			require.Equal(t, o.Flights, c.PlanRecords)
			require.Equal(t, o.Late, c.Late)
			require.Positive(t, c.NullReceiveTime)
			require.Equal(t, c.Messages-o.Rollbacks, c.Committed)
			require.Equal(t, o.Malformed+o.Protocol, c.Outcomes[simulate.Dead])
			require.Equal(t, c.Committed, c.Outcomes[simulate.Succeeded]+c.Outcomes[simulate.Skipped]+c.Outcomes[simulate.Dead])
			require.Equal(t, o.Flights+o.Adhoc, tc.plan.Model().Flights(), "the plan and ad-hoc flights; nothing else is created")
			for _, st := range sisxml.FlopSubtypes { // spread evenly over every subtype
				require.InDelta(t, o.Updates/len(sisxml.FlopSubtypes), c.FlopSubtypes[st], 1, st)
			}

			// Shared flights: SharedPercent of the plan, each MAID naming a plan flight.
			flids, shared := map[string]bool{}, 0
			for _, m := range tc.plan.Messages() {
				if m.Category == simulate.CategoryPlan {
					for _, f := range m.Msg.Schd.Flights {
						flids[f.FLID] = true
					}
				}
			}
			for _, m := range tc.plan.Messages() {
				if m.Category == simulate.CategoryPlan {
					require.Equal(t, simulate.Sender, m.Msg.Meta.SNDR)
					require.Len(t, m.Msg.Schd.Flights, m.Msg.Schd.RCNT)
					for _, f := range m.Msg.Schd.Flights {
						require.Equal(t, o.Day, f.SODT.Value.Format("20060102"), "SODT on the operating day")
						if f.MAID.Presence == sisxml.Set {
							shared++
							require.True(t, flids[f.MAID.Value], "MAID %s names a plan flight", f.MAID.Value)
							require.NotEqual(t, f.FLID, f.MAID.Value)
						}
					}
				}
			}
			require.Equal(t, o.Flights*simulate.SharedPercent/100, shared)
		})
	}
}

func nonZero[K comparable](m map[K]int) map[K]int {
	out := map[K]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// TestNewPlanOutcomes: each category's expected outcomes, and the default
// day covers every case the pipeline must get right.
func TestNewPlanOutcomes(t *testing.T) {
	t.Parallel()
	allowed := map[simulate.Category][]simulate.Outcome{
		simulate.CategoryPlan:      {simulate.Succeeded},
		simulate.CategoryReplan:    {simulate.Succeeded},
		simulate.CategoryAdhoc:     {simulate.Succeeded},
		simulate.CategoryUpdate:    {simulate.Succeeded, simulate.Skipped},
		simulate.CategoryDeletion:  {simulate.Succeeded, simulate.Skipped},
		simulate.CategoryDuplicate: {simulate.Skipped},
		simulate.CategoryIgnored:   {simulate.Skipped},
		simulate.CategoryMalformed: {simulate.Dead},
		simulate.CategoryProtocol:  {simulate.Dead},
		simulate.CategoryRollback:  {""},
	}
	msgs := defaultPlan.Messages()
	for i, m := range msgs {
		require.Contains(t, allowed[m.Category], m.Outcome, "#%d %s/%s", i, m.Category, m.Variant)
		switch m.Category {
		case simulate.CategoryUpdate:
			require.Equal(t, m.Outcome == simulate.Skipped, m.Variant == "on-deleted", "#%d", i)
		case simulate.CategoryDeletion:
			require.Equal(t, m.Outcome == simulate.Skipped, m.Variant == "repeat", "#%d", i)
		case simulate.CategoryDuplicate:
			require.Less(t, m.Original, i)
			require.Equal(t, msgs[m.Original].Raw, m.Raw, "the same content")
			require.Equal(t, fmt.Sprintf("duplicate-of:%d", m.Original), m.Reason)
		case simulate.CategoryProtocol:
			require.True(t, strings.HasPrefix(m.Reason, "PROTOCOL: "), m.Reason)
		}
		if m.Category != simulate.CategoryDuplicate {
			require.Equal(t, -1, m.Original)
		}
	}
	variants := defaultPlan.Counts().Variants
	for _, v := range []string{
		"update/set", "update/clear", "update/noop", "update/on-deleted", "update/maid-move", "update/link", "update/unlink",
		"deletion/single", "deletion/cascade", "deletion/repeat",
		"duplicate/stale", "duplicate/same",
		"protocol/dup-flid", "protocol/moved-day", "adhoc/new", "adhoc/new-unreadable-sodt",
		"malformed/null", "malformed/empty", "malformed/truncated", "malformed/rcnt-mismatch",
		"ignored/LDM", "ignored/REGN", "ignored/RSTA", "ignored/EROR",
	} {
		require.Positive(t, variants[v], v)
	}
	// Explicit clears of collections (<GATE/>) are among the FLOPs.
	clears := 0
	for _, m := range msgs {
		if m.Category == simulate.CategoryUpdate && strings.Contains(string(m.Raw), "<"+m.Msg.Meta.STYP+"/>") {
			clears++
		}
	}
	require.Greater(t, clears, 50)
}

// TestPlanMessagesDecode: every generated message decodes to exactly the
// intended message (so to its intended kind), malformed ones fail as
// MALFORMED (a wrong RCNT as PROTOCOL), and identities are unique except for duplicates.
func TestPlanMessagesDecode(t *testing.T) {
	t.Parallel()
	plans := []*simulate.Plan{defaultPlan, simulate.NewPlan(simulate.Options{Flights: 150, Seed: 11, Malformed: 30})}
	for _, p := range plans {
		identities := map[string]int{}
		for i, m := range p.Messages() {
			got, err := sisxml.Decode(m.Raw)
			if m.Category == simulate.CategoryMalformed {
				require.Error(t, err, "#%d %s: %q", i, m.Variant, m.Raw)
				want := relaytype.ClassMalformed
				if m.Variant == "rcnt-mismatch" {
					want = relaytype.ClassProtocol // a whole-package check (docs/msgx/sis-xml.md §6)
				}
				require.Equal(t, want, relay.ClassOf(err, relaytype.ClassNone), "#%d %s: %v", i, m.Variant, err)
				require.Nil(t, m.Msg)
				require.Empty(t, m.Identity())
				continue
			}
			require.NotNil(t, m.Raw, "#%d: only a malformed row is NULL", i)
			require.NoError(t, err, "#%d %s/%s", i, m.Category, m.Variant)
			require.Equal(t, m.Msg, got, "#%d %s/%s", i, m.Category, m.Variant)
			want := map[simulate.Category]sisxml.MsgKind{
				simulate.CategoryPlan: sisxml.KindSchd, simulate.CategoryReplan: sisxml.KindSchd, simulate.CategoryAdhoc: sisxml.KindSchd,
				simulate.CategoryProtocol: sisxml.KindSchd, simulate.CategoryUpdate: sisxml.KindFlop, simulate.CategoryRollback: sisxml.KindFlop,
				simulate.CategoryDeletion: sisxml.KindFdel, simulate.CategoryIgnored: sisxml.KindIgnored,
			}
			if m.Category != simulate.CategoryDuplicate {
				require.Equal(t, want[m.Category], got.Kind, "#%d %s", i, m.Category)
			}
			if m.Msg.Kind == sisxml.KindSchd {
				wantStyp := map[simulate.Category]string{simulate.CategoryAdhoc: "ADFT"}[m.Category]
				require.Equal(t, cmpOr(wantStyp, "DNLD"), got.Meta.STYP, "#%d", i)
			}
			id := m.Identity()
			require.Equal(t, sisxml.Identity(got.Meta, false), id)
			require.Equal(t, sisxml.Identity(got.Meta, false)+"|"+got.Meta.DTTM.Format("20060102"), sisxml.Identity(got.Meta, true))
			if first, seen := identities[id]; seen {
				require.Equal(t, simulate.CategoryDuplicate, m.Category, "#%d repeats the identity of #%d", i, first)
				require.Equal(t, first, m.Original)
			} else {
				require.NotEqual(t, simulate.CategoryDuplicate, m.Category, "#%d", i)
				identities[id] = i
			}
		}
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, simulate.Options{}.Validate())
	for _, tc := range []struct {
		o    simulate.Options
		want string
	}{
		{simulate.Options{Day: "2026-03-01"}, "Day"},
		{simulate.Options{Day: "20260230"}, "Day"},
		{simulate.Options{Flights: -1}, "Flights"},
		{simulate.Options{Flights: simulate.MaxFlights + 1}, "Flights"},
		{simulate.Options{Flights: 1000, PlanChunks: 2}, "PlanChunks"},
		{simulate.Options{Flights: 10, PlanChunks: 11}, "PlanChunks"},
		{simulate.Options{LateBy: -1}, "LateBy"},
	} {
		err := tc.o.Validate()
		require.ErrorContains(t, err, tc.want, "%+v", tc.o)
		require.Panics(t, func() { simulate.NewPlan(tc.o) })
	}
	d := simulate.Options{}.WithDefaults()
	require.Equal(t, simulate.Options{Day: "20260301", Flights: 1000, Updates: 3000, Deletions: 20, Adhoc: 10, Duplicates: 50,
		Malformed: 10, Ignored: 20, Protocol: 2, Replans: 2, Rollbacks: 5, Late: 5, LateBy: simulate.LateByDefault, PlanChunks: 10}, d)
}

// ExampleNewPlan shows the message mix of a small operating day.
func ExampleNewPlan() {
	p := simulate.NewPlan(simulate.Options{Flights: 200, Seed: 1})
	c := p.Counts()
	cats := make([]string, 0, len(c.Categories))
	for k, v := range c.Categories {
		cats = append(cats, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(cats)
	fmt.Println(strings.Join(cats, " "))
	fmt.Println("inserts", c.Messages, "committed", c.Committed, "late", c.Late)
	fmt.Println("expected", c.Outcomes[simulate.Succeeded], "SUCCEEDED,", c.Outcomes[simulate.Skipped], "SKIPPED,", c.Outcomes[simulate.Dead], "DEAD")
	fmt.Println("flights in the model", p.Model().Flights())
	// Output:
	// adhoc=2 deletion=4 duplicate=10 ignored=4 malformed=2 plan=2 protocol=2 replan=1 rollback=5 update=600
	// inserts 632 committed 627 late 5
	// expected 594 SUCCEEDED, 29 SKIPPED, 4 DEAD
	// flights in the model 202
}
