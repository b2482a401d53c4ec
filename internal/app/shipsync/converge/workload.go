package converge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
)

// side is one database's writer.
type side struct {
	name string
	db   *sql.DB
	base int64         // where its own inserts start
	n    *atomic.Int64 // rows its writes changed
	next int64         // its next insert id (per table)
}

func (r *run) sides() (*side, *side) {
	return &side{name: "ship", db: r.ship, base: 0, n: &r.shipN}, &side{name: "shore", db: r.shoreDB, base: shoreBase, n: &r.shoreN}
}

// exec runs one autocommit write and counts the rows it changed; a
// deadlock or lock wait is tried again, as an application would.
func (s *side) exec(ctx context.Context, q string, args ...any) error {
	for attempt := 1; ; attempt++ {
		res, err := s.db.ExecContext(ctx, q, args...)
		var me *mysql.MySQLError
		if err != nil && errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) && attempt < 10 {
			continue
		}
		if err != nil {
			return fmt.Errorf("converge: %s write: %w", s.name, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		s.n.Add(n)
		return nil
	}
}

// now is a business time: the wall clock, to the microsecond (the columns
// are DATETIME(6)).
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// insert writes a new row id into table t.
func (s *side) insert(ctx context.Context, t string, id int64, rng *rand.Rand) error {
	switch t {
	case "crew":
		return s.exec(ctx, "INSERT INTO crew (id, name, rank_code, wage, updated_at) VALUES (?, ?, ?, ?, ?)", id,
			fmt.Sprintf("%s sailor %d", s.name, id), "AB", fmt.Sprintf("%d.%02d", 1500+rng.IntN(5000), rng.IntN(100)), now())
	default:
		return s.exec(ctx, "INSERT INTO fuel_log (id, tank, litres, note, logged_at) VALUES (?, ?, ?, ?, ?)", id,
			fmt.Sprintf("T%d", 1+rng.IntN(8)), fmt.Sprintf("%d.%03d", rng.IntN(90000), rng.IntN(1000)), nil, now())
	}
}

// inserts has each side insert Rows rows per table, its own ids.
func (r *run) inserts(ctx context.Context) error {
	ship, shore := r.sides()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []*side{ship, shore} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(r.o.Seed, uint64(i)))
			for _, t := range []string{"crew", "fuel_log"} {
				for k := int64(1); k <= int64(r.o.Rows); k++ {
					if err := s.insert(ctx, t, s.base+k, rng); err != nil {
						errs[i] = err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for k := int64(1); k <= int64(r.o.Rows); k++ {
		r.shipIDs, r.shoreIDs = append(r.shipIDs, k), append(r.shoreIDs, shoreBase+k)
	}
	r.out("inserted %d rows per table on each side", r.o.Rows)
	return errors.Join(errs...)
}

// edits has both sides make Edits changes at once, and go on until `until`
// is closed: three in four on a hot set of rows of both sides (the
// conflicts), the rest on any row; updates mostly, some deletes and new
// rows. A share of the ship's crew updates carry a business time a day
// ahead.
func (r *run) edits(ctx context.Context, until <-chan struct{}) error {
	ship, shore := r.sides()
	all := append(append([]int64(nil), r.shipIDs...), r.shoreIDs...)
	hot := append(append([]int64(nil), r.shipIDs[:min(8, len(r.shipIDs))]...), r.shoreIDs[:min(8, len(r.shoreIDs))]...)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []*side{ship, shore} {
		s.next = s.base + int64(r.o.Rows) + 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(r.o.Seed, uint64(10+i)))
			for k := 0; k < r.o.Edits || !closed(until); k++ {
				t := []string{"crew", "fuel_log"}[rng.IntN(2)]
				id := all[rng.IntN(len(all))]
				if rng.IntN(4) > 0 {
					id = hot[rng.IntN(len(hot))]
				}
				var err error
				switch p := rng.IntN(20); {
				case p < 2:
					err = s.exec(ctx, "DELETE FROM "+t+" WHERE id = ?", id)
				case p < 4:
					err = s.insert(ctx, t, s.next, rng)
					s.next++
				case t == "crew":
					at := now()
					if s.name == "ship" && rng.Float64() < r.o.BadTimes {
						at = at.Add(24 * time.Hour)
					}
					err = s.exec(ctx, "UPDATE crew SET name = ?, wage = wage + 1, updated_at = ? WHERE id = ?",
						fmt.Sprintf("%s edit %d", s.name, rng.IntN(1e6)), at, id)
				default:
					err = s.exec(ctx, "UPDATE fuel_log SET litres = litres + 1, note = ?, logged_at = ? WHERE id = ?",
						fmt.Sprintf("%s note %d", s.name, rng.IntN(1e6)), now(), id)
				}
				if err != nil {
					errs[i] = err
					return
				}
				// Tens of writes a second per side: the sync runs in between
				// (and the link flaps), so some edits meet the other side's.
				time.Sleep(time.Duration(10+rng.IntN(50)) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// operator decides every PENDING_MANUAL case as an operator would, keeping
// the shore's version; it returns how many it decided.
func (r *run) operator(ctx context.Context) (int, error) {
	cases, err := arbiter.List(ctx, r.pool, arbiter.StatePending, 1000)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range cases {
		_, err := r.op.Decide(ctx, c.ID, arbiter.ManualDecision{Choice: "SHORE", Operator: "converge operator",
			Reason: "keep the shore's version (" + c.Reason + ")"})
		if errors.Is(err, arbiter.ErrStale) || errors.Is(err, arbiter.ErrState) {
			continue // newer evidence: the next round sees it
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
