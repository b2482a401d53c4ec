package flightstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
)

// BenchmarkSaveLoad measures one processing round of a typical flight (base
// fields and 7 collections, 15 detail rows; 8 other flights in the table)
// inside a transaction: begin, PIPELINE_LOCK + Load with children, bump the
// version, Save, end the transaction.
//
//   - commit: LoadWith(LockPipeline, Children) and Save — two round trips —
//     then COMMIT, including its WAL flush (synchronous_commit=on);
//   - rollback: the same, ending in ROLLBACK: the store's own work;
//   - rollback-4rt: LockPipeline, Load, Load(children), Save as four round
//     trips (a lock and two-step load), ending in ROLLBACK.
func BenchmarkSaveLoad(b *testing.B) {
	for _, bc := range []struct {
		name       string
		commit     bool
		roundTrips int
	}{{"commit", true, 2}, {"rollback", false, 2}, {"rollback-4rt", false, 4}} {
		b.Run(bc.name, func(b *testing.B) {
			db := setup(b)
			var states []*flight.State
			for _, f := range []string{"A", "B", "C", "D", "E", "F", "G", "H"} {
				states = append(states, typicalState("OTHER-"+f))
			}
			require.NoError(b, flightstore.Save(db.ctx, db.pool, append(states, typicalState("BENCH"))))
			flids := []string{"BENCH"}
			now := base
			for b.Loop() {
				tx, err := db.pool.Begin(db.ctx)
				if err != nil {
					b.Fatal(err)
				}
				var got map[string]*flight.State
				if bc.roundTrips == 2 {
					got, err = flightstore.LoadWith(db.ctx, tx, flids, flightstore.LoadOpts{LockPipeline: true, Children: true})
				} else if err = flightstore.LockPipeline(db.ctx, tx); err == nil {
					if _, err = flightstore.Load(db.ctx, tx, flids, false); err == nil {
						got, err = flightstore.Load(db.ctx, tx, flids, true)
					}
				}
				if err != nil {
					b.Fatal(err)
				}
				next := got["BENCH"].Clone()
				now = now.Add(time.Microsecond)
				next.Version++
				next.UpdatedAt = now
				next.Resources[flight.GATE][0].ActualBegin = now
				if err := flightstore.Save(db.ctx, tx, []*flight.State{next}); err != nil {
					b.Fatal(err)
				}
				if bc.commit {
					err = tx.Commit(db.ctx)
				} else {
					err = tx.Rollback(db.ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			got, err := flightstore.Load(db.ctx, db.pool, flids, false)
			require.NoError(b, err)
			if bc.commit {
				require.Equal(b, now, got["BENCH"].UpdatedAt)
			} else {
				require.Equal(b, base, got["BENCH"].UpdatedAt)
			}
		})
	}
}
