package demo

import (
	"fmt"
	"math/rand/v2"
)

// Plan is the generated content of the demo's source table and what the
// queue must make of it.
type Plan struct {
	// Rows are the source rows in id order, Late ones included.
	Rows []PlanRow
	// PermanentHoles are ids that are never written: after the max commit delay
	// the intake must release and log exactly these.
	PermanentHoles []int64
	// Expected outcome counts.
	Succeeded, Duplicates, Ignored, Malformed int
	// Keys lists each key's valid message ids in ascending order.
	Keys map[string][]int64
	// Totals is each key's expected projection total.
	Totals map[string]int64
}

// PlanRow is one source row.
type PlanRow struct {
	ID      int64
	Payload string
	// Late rows are written after rows with larger ids, as a transaction that
	// commits late would make them visible (a hole that fills).
	Late bool
}

// PlanOptions shape a plan.
type PlanOptions struct {
	N     int    // ids 1..N (rows + holes); at least 20
	Keys  int    // distinct keys
	Seed  uint64 // deterministic generation
	Holes int    // permille of ids that are holes (half fill late, half never)
}

// NewPlan generates N ids: mostly valid updates over Keys keys, plus
// duplicates (a valid message's identity again), ignored kinds, malformed
// payloads, flaky messages that fail once, late rows and permanent holes. The
// last id is always a row, so every hole has rows after it and is decided.
func NewPlan(o PlanOptions) *Plan {
	r := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	p := &Plan{Keys: map[string][]int64{}, Totals: map[string]int64{}}
	var identities []string
	for id := int64(1); id <= int64(o.N); id++ {
		last := id == int64(o.N)
		if !last && id > 1 && r.IntN(1000) < o.Holes {
			if r.IntN(2) == 0 {
				p.PermanentHoles = append(p.PermanentHoles, id)
				continue
			}
			row := p.row(r, id, &identities, o.Keys)
			row.Late = true
			p.Rows = append(p.Rows, row)
			continue
		}
		p.Rows = append(p.Rows, p.row(r, id, &identities, o.Keys))
	}
	return p
}

func (p *Plan) row(r *rand.Rand, id int64, identities *[]string, keys int) PlanRow {
	key := fmt.Sprintf("K%03d", r.IntN(keys))
	switch n := r.IntN(100); {
	case n < 3 && len(*identities) > 0: // duplicate of an earlier valid message
		p.Duplicates++
		ident := (*identities)[r.IntN(len(*identities))]
		return PlanRow{ID: id, Payload: fmt.Sprintf("%s|%s|%s|%d", kindUpdate, ident, key, 1)}
	case n < 5:
		p.Ignored++
		kind := kindLDM
		if n == 4 {
			kind = kindRegn
		}
		return PlanRow{ID: id, Payload: fmt.Sprintf("%s|ign-%d|%s|0", kind, id, key)}
	case n < 6:
		p.Malformed++
		return PlanRow{ID: id, Payload: fmt.Sprintf("<garbled message %d", id)}
	default:
		kind := kindUpdate
		if n < 7 {
			kind = kindFlaky
		}
		ident := fmt.Sprintf("SNDR/%s/%d", kind, id)
		*identities = append(*identities, ident)
		value := int64(r.IntN(100) + 1)
		p.Succeeded++
		p.Keys[key] = append(p.Keys[key], id)
		p.Totals[key] += value
		return PlanRow{ID: id, Payload: fmt.Sprintf("%s|%s|%s|%d", kind, ident, key, value)}
	}
}
