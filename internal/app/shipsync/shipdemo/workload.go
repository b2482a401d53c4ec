package shipdemo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// WorkloadOptions shape a Workload. Rows, Writers ≥ 1; Updates, Deletes ≥ 0
// (Deletes at most Rows).
type WorkloadOptions struct {
	// Rows is how many rows the workload inserts per table; it then updates
	// Updates rows and deletes Deletes, at random, from Writers goroutines.
	Rows, Updates, Deletes, Writers int
	// Seed makes the workload repeatable.
	Seed uint64
}

// Workload writes the ship's tables as a crew would: inserts, then
// updates and deletes of random rows, from several connections at once,
// in small transactions. Writes is safe for concurrent use with Run.
type Workload struct {
	o  WorkloadOptions
	db *sql.DB
	n  atomic.Int64
}

// NewWorkload returns the workload o on the ship database db (its tables
// made by CreateTables).
func NewWorkload(o WorkloadOptions, db *sql.DB) *Workload { return &Workload{o: o, db: db} }

// Writes is how many row changes the workload has committed so far: each
// is one changelog row and must become one event.
func (w *Workload) Writes() int { return int(w.n.Load()) }

// txRows is how many row changes one workload transaction makes.
const txRows = 20

// Run writes the whole workload; ctx bounds it.
func (w *Workload) Run(ctx context.Context) error {
	for ti, t := range tables {
		// Inserts: ids 1…Rows split between the writers.
		if err := w.parallel(ctx, func(k int, r *rand.Rand) error {
			var ids []int64
			for id := int64(1 + k); id <= int64(w.o.Rows); id += int64(w.o.Writers) {
				ids = append(ids, id)
			}
			return w.inTx(ctx, ids, func(tx *sql.Tx, id int64) (int64, error) {
				vals := t.row(r, id)
				vals[len(vals)-1] = stamp(r)
				args := append([]any{id}, vals...)
				return changedRows(tx.ExecContext(ctx, "INSERT INTO "+t.name+" ("+strings.Join(t.columns, ", ")+") VALUES (?"+
					strings.Repeat(", ?", len(t.columns)-1)+")", args...))
			})
		}, uint64(ti)); err != nil {
			return err
		}
	}
	// Updates and deletes of random rows; a row deleted by one writer and
	// updated by another just updates nothing (no change, no event).
	deleted := make([]map[int64]bool, len(tables))
	for i := range deleted {
		deleted[i] = map[int64]bool{}
	}
	r := rand.New(rand.NewPCG(w.o.Seed, 99))
	for i := 0; i < w.o.Deletes; i++ {
		ti := r.IntN(len(tables))
		deleted[ti][1+r.Int64N(int64(w.o.Rows))] = true
	}
	var mu sync.Mutex
	return w.parallel(ctx, func(k int, r *rand.Rand) error {
		var ids []int64
		for i := k; i < w.o.Updates; i += w.o.Writers {
			ids = append(ids, int64(i))
		}
		if err := w.inTx(ctx, ids, func(tx *sql.Tx, _ int64) (int64, error) {
			ti := r.IntN(len(tables))
			t := tables[ti]
			id := 1 + r.Int64N(int64(w.o.Rows))
			vals := t.row(r, id)
			vals[len(vals)-1] = stamp(r)
			sets := make([]string, len(t.columns)-1)
			for i, c := range t.columns[1:] {
				sets[i] = c + " = ?"
			}
			// A deleted row updates nothing: no change, no event.
			return changedRows(tx.ExecContext(ctx, "UPDATE "+t.name+" SET "+strings.Join(sets, ", ")+" WHERE id = ?",
				append(vals, id)...))
		}); err != nil {
			return err
		}
		if k != 0 {
			return nil
		}
		for ti, ids := range deleted {
			mu.Lock()
			list := make([]int64, 0, len(ids))
			for id := range ids {
				list = append(list, id)
			}
			mu.Unlock()
			if err := w.inTx(ctx, list, func(tx *sql.Tx, id int64) (int64, error) {
				return changedRows(tx.ExecContext(ctx, "DELETE FROM "+tables[ti].name+" WHERE id = ?", id))
			}); err != nil {
				return err
			}
		}
		return nil
	}, 7)
}

// parallel runs fn on Writers goroutines, each with its own random source.
func (w *Workload) parallel(ctx context.Context, fn func(k int, r *rand.Rand) error, salt uint64) error {
	errs := make(chan error, w.o.Writers)
	for k := range w.o.Writers {
		go func() { errs <- fn(k, rand.New(rand.NewPCG(w.o.Seed+salt, uint64(k)))) }()
	}
	var first error
	for range w.o.Writers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// inTx applies fn to ids, txRows per transaction, counting each change
// once its transaction committed. A transaction that lost a deadlock is
// run again, as an application would.
func (w *Workload) inTx(ctx context.Context, ids []int64, fn func(tx *sql.Tx, id int64) (int64, error)) error {
	for i := 0; i < len(ids); i += txRows {
		chunk := ids[i:min(i+txRows, len(ids))]
		for attempt := 1; ; attempt++ {
			err := w.oneTx(ctx, chunk, fn)
			var me *mysql.MySQLError
			if err != nil && errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) && attempt < 10 {
				continue
			}
			if err != nil {
				return err
			}
			break
		}
	}
	return nil
}

func (w *Workload) oneTx(ctx context.Context, ids []int64, fn func(tx *sql.Tx, id int64) (int64, error)) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	changed := int64(0)
	for _, id := range ids {
		n, err := fn(tx, id)
		if err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("row %d: %w", id, err)
		}
		changed += n
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	w.n.Add(changed)
	return nil
}

func changedRows(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// stamp is a business time in the recent past, at microsecond precision.
func stamp(r *rand.Rand) time.Time {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	return base.Add(time.Duration(r.Int64N(int64(30*24*time.Hour))) / time.Microsecond * time.Microsecond)
}
