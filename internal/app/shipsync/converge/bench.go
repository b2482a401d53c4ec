package converge

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	"github.com/relayhq/relay/internal/supervise"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	// PostgresURL, MariaDB and Dir as in Options. Required.
	PostgresURL, MariaDB, Dir string
	// Rows is how many rows one round inserts on one side (default 2,000);
	// Rounds how many rounds each direction runs, alternating (default 3).
	Rows, Rounds int
	// Conflicts is how many records both sides change while the link is
	// down, in the conflict round (default 200).
	Conflicts int
	// Progress receives a line per round (nil: none).
	Progress io.Writer
	// Timeout bounds each round (default 5 min).
	Timeout time.Duration
}

// BenchResult is what Bench measured: per round, the time from the first
// write to the last result (every uplink event's receipt; every command
// acknowledged by the ship), and the conflict round's.
type BenchResult struct {
	Rows         int
	Uplink       []time.Duration
	Downlink     []time.Duration
	Conflicts    int
	ConflictTime time.Duration
	// Cases by state after the conflict round; Converged: the conflicted
	// table holds the same rows on both sides.
	Cases     map[string]int
	Converged bool
}

// Median is the median of ds.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// Bench measures the two directions in one process on the same parts: the
// ship inserting Rows rows until the shore has a receipt for every event
// (uplink), the shore inserting Rows rows until the ship has acknowledged
// every command (downlink), alternating; then a conflict round: with the
// link down both sides update the same Conflicts rows of a SHORE_WINS
// table, the link comes back, and the clock runs until every case is
// closed, every event and command has its result and the table agrees.
func Bench(ctx context.Context, b BenchOptions) (*BenchResult, error) {
	b.Rows, b.Rounds, b.Conflicts = cmp.Or(b.Rows, 2000), cmp.Or(b.Rounds, 3), cmp.Or(b.Conflicts, 200)
	b.Timeout = cmp.Or(b.Timeout, 5*time.Minute)
	o := Options{PostgresURL: b.PostgresURL, MariaDB: b.MariaDB, Dir: b.Dir, Progress: b.Progress, Timeout: b.Timeout}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	r := &run{o: o, out: supervise.Printer(o.Progress), fail: make(chan error, 8)}
	var cleanup []func()
	defer func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}()
	if _, err := r.setUp(ctx, &cleanup); err != nil {
		return nil, err
	}
	res := &BenchResult{Rows: b.Rows, Conflicts: b.Conflicts}
	ship, shore := r.sides()
	next := map[*side]int64{ship: 1, shore: shoreBase + 1}
	var uplink, downlink int
	for round := 1; round <= b.Rounds; round++ {
		for _, s := range []*side{ship, shore} {
			began := time.Now()
			if err := s.bulkInsert(ctx, "crew", next[s], b.Rows); err != nil {
				return nil, err
			}
			next[s] += int64(b.Rows)
			wrote := time.Since(began)
			var err error
			if s == ship {
				uplink += b.Rows
				err = r.waitFor(ctx, b.Timeout, "SELECT count(*) FROM sync_event_receipt", uplink)
			} else {
				downlink += b.Rows
				err = r.waitFor(ctx, b.Timeout,
					"SELECT count(*) FROM sync_downlink_command WHERE kind = 'change' AND result IS NOT NULL", downlink)
			}
			if err != nil {
				return nil, err
			}
			d := time.Since(began)
			if s == ship {
				res.Uplink = append(res.Uplink, d)
			} else {
				res.Downlink = append(res.Downlink, d)
			}
			r.out("round %d, %s → %s: %d rows written in %s, every result in %s (%.0f changes/s)", round, s.name,
				map[string]string{"ship": "shore", "shore": "ship"}[s.name], b.Rows, wrote.Round(time.Millisecond),
				d.Round(time.Millisecond), float64(b.Rows)/d.Seconds())
		}
	}
	// The conflict round: the ship's rows of fuel_log (SHORE_WINS), synced,
	// then changed on both sides while the link is down.
	if err := ship.bulkInsert(ctx, "fuel_log", 1, b.Conflicts); err != nil {
		return nil, err
	}
	uplink += b.Conflicts
	if err := r.waitFor(ctx, b.Timeout, "SELECT count(*) FROM sync_downlink_command WHERE kind = 'change' AND result IS NOT NULL",
		downlink); err != nil {
		return nil, err
	}
	if err := r.waitFor(ctx, b.Timeout, "SELECT count(*) FROM sync_event_receipt", uplink); err != nil {
		return nil, err
	}
	r.proxy.SetDown(true)
	for _, s := range []*side{shore, ship} {
		if err := s.exec(ctx, "UPDATE fuel_log SET litres = litres + 1, note = ? WHERE id BETWEEN 1 AND ?",
			s.name+" edit", b.Conflicts); err != nil {
			return nil, err
		}
	}
	// Let both captures pick the edits up before the link returns.
	if err := r.waitFor(ctx, b.Timeout, "SELECT count(*) FROM sync_shore_event", downlink+b.Conflicts); err != nil {
		return nil, err
	}
	began := time.Now()
	r.proxy.SetDown(false)
	if err := r.waitSettled(ctx, b.Timeout, b.Conflicts); err != nil {
		return nil, err
	}
	res.ConflictTime = time.Since(began)
	var err error
	if res.Cases, err = countBy(ctx, r.pool, "SELECT state, count(*) FROM sync_conflict_case GROUP BY 1"); err != nil {
		return nil, err
	}
	q := "SELECT concat_ws('|', id, tank, litres, coalesce(note, ''), _sync_revision) FROM fuel_log ORDER BY id"
	a, err := lines(ctx, r.ship, q)
	if err != nil {
		return nil, err
	}
	z, err := lines(ctx, r.shoreDB, q)
	if err != nil {
		return nil, err
	}
	res.Converged = len(a) == b.Conflicts && len(a) == len(z)
	for k, v := range a {
		res.Converged = res.Converged && z[k] == v && strings.Contains(v, "shore edit")
	}
	r.out("conflict round: %d records changed on both sides while the link was down; settled %s after it returned "+
		"(%.0f conflicts/s); cases %v; the table agrees, the shore's edits kept: %t", b.Conflicts,
		res.ConflictTime.Round(time.Millisecond), float64(b.Conflicts)/res.ConflictTime.Seconds(), res.Cases, res.Converged)
	return res, nil
}

// bulkInsert inserts n rows of table t from id first, 200 to a statement
// (one changelog row, and so one event, per row).
func (s *side) bulkInsert(ctx context.Context, t string, first int64, n int) error {
	at := now()
	for done := 0; done < n; {
		k := min(200, n-done)
		var q strings.Builder
		args := make([]any, 0, 5*k)
		if t == "crew" {
			q.WriteString("INSERT INTO crew (id, name, rank_code, wage, updated_at) VALUES ")
		} else {
			q.WriteString("INSERT INTO fuel_log (id, tank, litres, note, logged_at) VALUES ")
		}
		for i := range k {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?)")
			id := first + int64(done+i)
			if t == "crew" {
				args = append(args, id, fmt.Sprintf("%s sailor %d", s.name, id), "AB", "1800.00", at)
			} else {
				args = append(args, id, "T1", "100.000", nil, at)
			}
		}
		if err := s.exec(ctx, q.String(), args...); err != nil {
			return err
		}
		done += k
	}
	return nil
}

// waitFor polls q (a count on the shore's PostgreSQL) every 20 ms until it
// reaches want.
func (r *run) waitFor(ctx context.Context, timeout time.Duration, q string, want int) error {
	deadline := time.Now().Add(timeout)
	for {
		var n int
		if err := r.pool.QueryRow(ctx, q).Scan(&n); err != nil {
			return err
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("converge: bench: %d of %d after %s (%s)", n, want, timeout, q)
		}
		select {
		case err := <-r.fail:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitSettled waits until at least cases cases exist and none is open,
// every command is answered and acted on, and every uplink event has its
// receipt.
func (r *run) waitSettled(ctx context.Context, timeout time.Duration, cases int) error {
	return r.waitFor(ctx, timeout, fmt.Sprintf(`SELECT CASE WHEN
		(SELECT count(*) FROM sync_conflict_case) >= %d
		AND NOT EXISTS (SELECT 1 FROM sync_conflict_case WHERE state IN ('%s', '%s', '%s', '%s', '%s'))
		AND NOT EXISTS (SELECT 1 FROM sync_downlink_command WHERE result IS NULL OR (processed_at IS NULL
			AND (kind = 'decision' OR result = 'COMMAND_CONFLICT_REPORTED')))
		AND (SELECT count(*) FROM sync_inbox_event) = (SELECT count(*) FROM sync_event_receipt)
		THEN 1 ELSE 0 END`, cases, arbiter.StateDetected, arbiter.StateAutoDeciding, arbiter.StatePending,
		arbiter.StateDecided, arbiter.StateDispatched), 1)
}
