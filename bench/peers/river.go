package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverPoolMaxConns is the River client's pool size: its workers' effect
// inserts share it (MaxWorkers goroutines are far more than PostgreSQL on two
// cores can serve at once), plus the producer, completer and listener.
const riverPoolMaxConns = 40

// noopArgs is the River job: Seq is the job's number 1..n, the effect key.
type noopArgs struct {
	Seq int64 `json:"s"`
}

func (noopArgs) Kind() string { return "peers_noop" }

// noopWorker writes the job's effect row and succeeds.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	pool *pgxpool.Pool
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	_, err := w.pool.Exec(ctx, effectInsert, job.Args.Seq)
	return err
}

// runRiver is one burn-down of River on a fresh schema: InsertManyFast n jobs in
// batches of 1,000, then start a client with maxWorkers on the default queue and
// wait for n completion events, then verify.
func runRiver(ctx context.Context, base string, n, maxWorkers int) (res result, err error) {
	dsn, drop, err := freshSchema(ctx, base, riverPoolMaxConns)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, drop()) }()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return res, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return res, fmt.Errorf("river: migrate: %w", err)
	}
	if _, err := pool.Exec(ctx, effectDDL); err != nil {
		return res, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{pool: pool})
	client, err := river.NewClient(driver, &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers: workers,
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return res, err
	}

	const chunk = 1000
	start := time.Now()
	for i := 0; i < n; i += chunk {
		params := make([]river.InsertManyParams, 0, chunk)
		for j := i; j < min(i+chunk, n); j++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{Seq: int64(j + 1)}})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return res, fmt.Errorf("river: insert: %w", err)
		}
	}
	res.Insert = time.Since(start)

	// A channel large enough for every event: River drops events that do not
	// fit, and a dropped completion would hang the wait.
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancel()
	start = time.Now()
	if err := client.Start(ctx); err != nil {
		return res, err
	}
	stopped := false
	defer func() {
		if !stopped {
			err = errors.Join(err, client.Stop(context.WithoutCancel(ctx)))
		}
	}()
	completed := 0
	for completed < n {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				return res, fmt.Errorf("river: job %d: event %s (errors %v)", ev.Job.ID, ev.Kind, ev.Job.Errors)
			}
			completed++
		case <-ctx.Done():
			return res, fmt.Errorf("river: %d of %d jobs completed: %w", completed, n, ctx.Err())
		}
	}
	res.Process = time.Since(start)
	res.N = n
	stopped = true
	if err := client.Stop(ctx); err != nil {
		return res, err
	}

	var total, done int64
	if err := pool.QueryRow(ctx,
		`SELECT count(*), count(*) FILTER (WHERE state = 'completed') FROM river_job`).Scan(&total, &done); err != nil {
		return res, err
	}
	if total != int64(n) || done != int64(n) {
		return res, fmt.Errorf("river: %d jobs, %d completed; want %d", total, done, n)
	}
	return res, checkEffects(ctx, pool, n)
}
