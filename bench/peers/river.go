package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverPoolMaxConns is the River client's pool size: its workers' effect
// inserts share it (MaxWorkers goroutines are far more than PostgreSQL on two
// cores can serve at once), plus the producer, completer and listener.
const riverPoolMaxConns = 40

// noopArgs is the River job: Seq is the job's number 1..n, the effect key; T,
// when set, is the producer's insert time (Unix nanoseconds, continuous load).
type noopArgs struct {
	Seq int64 `json:"s"`
	T   int64 `json:"t,omitempty"`
}

func (noopArgs) Kind() string { return "peers_noop" }

// noopWorker writes the job's effect row in its own statement and succeeds
// (or, with noEffect, just succeeds).
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	pool     *pgxpool.Pool
	observe  func(noopArgs)
	noEffect bool
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	if w.observe != nil {
		w.observe(job.Args)
	}
	if w.noEffect {
		return nil
	}
	_, err := w.pool.Exec(ctx, effectInsert, job.Args.Seq)
	return err
}

// riverRun is one run's River store and client (not yet started).
type riverRun struct {
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	events <-chan *river.Event
	close  func() error
	// noEffect: jobs write no effect row; verify checks job states only.
	noEffect bool
}

// openRiver migrates River into a fresh schema and builds a client with
// maxWorkers on the default queue. Its completion events are subscribed with
// a channel of n+1000, large enough for every event: River drops events that
// do not fit, and a dropped completion would hang the wait.
func openRiver(ctx context.Context, base string, n, maxWorkers int, noEffect bool, observe func(noopArgs)) (_ *riverRun, err error) {
	dsn, _, drop, err := freshSchema(ctx, base, riverPoolMaxConns)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, errors.Join(err, drop())
	}
	closeAll := func() error { pool.Close(); return drop() }
	defer func() {
		if err != nil {
			err = errors.Join(err, closeAll())
		}
	}()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river: migrate: %w", err)
	}
	if _, err := pool.Exec(ctx, effectDDL); err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{pool: pool, observe: observe, noEffect: noEffect})
	client, err := river.NewClient(driver, &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers: workers,
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, err
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	return &riverRun{pool: pool, client: client, events: events, noEffect: noEffect,
		close: func() error { cancel(); return closeAll() }}, nil
}

// insert inserts jobs lo..hi-1 with InsertManyFast; t, when set, stamps them.
func (r *riverRun) insert(ctx context.Context, lo, hi int64, t int64) error {
	params := make([]river.InsertManyParams, 0, hi-lo)
	for seq := lo; seq < hi; seq++ {
		params = append(params, river.InsertManyParams{Args: noopArgs{Seq: seq, T: t}})
	}
	if _, err := r.client.InsertManyFast(ctx, params); err != nil {
		return fmt.Errorf("river: insert: %w", err)
	}
	return nil
}

// await waits for n completion events (any other event kind fails the run).
func (r *riverRun) await(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.After(timeout)
	for completed := 0; completed < n; {
		select {
		case ev := <-r.events:
			if ev.Kind != river.EventKindJobCompleted {
				return fmt.Errorf("river: job %d: event %s (errors %v)", ev.Job.ID, ev.Kind, ev.Job.Errors)
			}
			completed++
		case <-deadline:
			return fmt.Errorf("river: %d of %d jobs completed within %s", completed, n, timeout)
		case <-ctx.Done():
			return fmt.Errorf("river: %d of %d jobs completed: %w", completed, n, ctx.Err())
		}
	}
	return nil
}

// verify checks that river_job holds n completed jobs, each with one effect.
func (r *riverRun) verify(ctx context.Context, n int) error {
	var total, done int64
	if err := r.pool.QueryRow(ctx,
		`SELECT count(*), count(*) FILTER (WHERE state = 'completed') FROM river_job`).Scan(&total, &done); err != nil {
		return err
	}
	if total != int64(n) || done != int64(n) {
		return fmt.Errorf("river: %d jobs, %d completed; want %d", total, done, n)
	}
	if r.noEffect {
		return nil
	}
	return checkEffects(ctx, r.pool, n)
}

// runRiverBurn is one burn-down of River on a fresh schema: InsertManyFast n
// jobs in batches of 1,000, then start the client and wait for n completion
// events, then verify. noEffect makes the jobs true no-ops.
func runRiverBurn(ctx context.Context, base string, n, maxWorkers int, noEffect bool) (res result, err error) {
	r, err := openRiver(ctx, base, n, maxWorkers, noEffect, nil)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, r.close()) }()

	const chunk = 1000
	start := time.Now()
	for i := int64(1); i <= int64(n); i += chunk {
		if err := r.insert(ctx, i, min(i+chunk, int64(n)+1), 0); err != nil {
			return res, err
		}
	}
	res.Insert = time.Since(start)

	start = time.Now()
	if err := r.client.Start(ctx); err != nil {
		return res, err
	}
	if err := r.await(ctx, n, burnTimeout); err != nil {
		return res, errors.Join(err, r.client.Stop(context.WithoutCancel(ctx)))
	}
	res.Process = time.Since(start)
	res.N = n
	if err := r.client.Stop(ctx); err != nil {
		return res, err
	}
	return res, r.verify(ctx, n)
}
