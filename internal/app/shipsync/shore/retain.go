package shore

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// Retention says how long the shore keeps what it may forget. Zero fields
// take the defaults; nothing that is still needed is ever removed.
type Retention struct {
	// Samples: the heartbeats' throughput samples (default 30 days; the
	// ETA reads the last 24 hours).
	Samples time.Duration
	// Batches: the answers kept for resent upload batches (default 30
	// days; a batch resent later is answered event by event, from the
	// inbox, with the same statuses).
	Batches time.Duration
	// Bodies: how long an inbox event keeps its row images once it has a
	// terminal result and no active conflict on its record (default 30
	// days). Its row stays, cut down to its header: the de-duplication
	// record, the operation and the revisions.
	Bodies time.Duration
	// Idempotency: management API idempotency keys (default 7 days).
	Idempotency time.Duration
	// Chunk is how many inbox rows one transaction trims (default 500).
	Chunk int
}

// Retention defaults.
const (
	RetainSamplesDefault     = 30 * 24 * time.Hour
	RetainBatchesDefault     = 30 * 24 * time.Hour
	RetainBodiesDefault      = 30 * 24 * time.Hour
	RetainIdempotencyDefault = 7 * 24 * time.Hour
)

// Retained counts what one Retain pass removed.
type Retained struct {
	Samples, Batches, Bodies, Idempotency int64
	// Unreadable counts inbox bodies that did not decode: marked, kept
	// whole.
	Unreadable int64
}

func (r Retained) String() string {
	return fmt.Sprintf("%d samples, %d batch answers, %d inbox bodies trimmed (%d unreadable, kept), %d idempotency keys",
		r.Samples, r.Batches, r.Bodies, r.Unreadable, r.Idempotency)
}

// Retain runs one retention pass at the clock's now. Kept whatever their
// age: events without a terminal result, events of a record with an
// active conflict, conflict cases, evidence and decisions, receipts (a
// node may not have pulled them yet), the audit log (append-only) and
// requests still being served. Bodies are trimmed in chunks, each its own
// transaction, so a long pass holds no lock for long and can stop at any
// point.
func (r *Registry) Retain(ctx context.Context, pol Retention) (Retained, error) {
	now := r.clock.Now()
	var out Retained
	del := func(stmt string, keep time.Duration, n *int64) error {
		tag, err := r.pool.Exec(ctx, stmts[stmt], now.Add(-keep))
		if err != nil {
			return fmt.Errorf("%w: retention: %w", ErrStore, err)
		}
		*n = tag.RowsAffected()
		return nil
	}
	if err := del("RetainSamples", cmp.Or(pol.Samples, RetainSamplesDefault), &out.Samples); err != nil {
		return out, err
	}
	if err := del("RetainBatches", cmp.Or(pol.Batches, RetainBatchesDefault), &out.Batches); err != nil {
		return out, err
	}
	if err := del("RetainIdempotency", cmp.Or(pol.Idempotency, RetainIdempotencyDefault), &out.Idempotency); err != nil {
		return out, err
	}
	cutoff, chunk := now.Add(-cmp.Or(pol.Bodies, RetainBodiesDefault)), cmp.Or(pol.Chunk, 500)
	for {
		n, err := r.trimBodies(ctx, cutoff, chunk, now, &out.Unreadable)
		out.Bodies += int64(n)
		if err != nil || n < chunk {
			return out, err
		}
	}
}

// trimBodies cuts up to chunk settled inbox bodies older than cutoff down
// to their header in one transaction.
func (r *Registry) trimBodies(ctx context.Context, cutoff time.Time, chunk int, now time.Time, unreadable *int64) (int, error) {
	var n int
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, stmts["RetainBodiesPick"], cutoff, chunk)
		if err != nil {
			return err
		}
		var ids []int64
		var bodies [][]byte
		var id int64
		var raw []byte
		_, err = pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
			body, err := trimmedBody(raw)
			if err != nil {
				// Never readable (it was checked when received): kept as it
				// is and marked, so it neither stops the pass nor comes back.
				body, *unreadable = raw, *unreadable+1
			}
			ids, bodies = append(ids, id), append(bodies, body)
			return nil
		})
		if err != nil || len(ids) == 0 {
			return err
		}
		n = len(ids)
		_, err = tx.Exec(ctx, stmts["RetainBodiesTrim"], ids, bodies, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%w: retention: %w", ErrStore, err)
	}
	return n, nil
}

// trimmedBody is an event with its row images and changed columns dropped:
// what stays says which event it was, its operation and revisions (what
// the shore's CDC consumer asks of an old platform write).
func trimmedBody(raw []byte) ([]byte, error) {
	var ev pb.ChangeEvent
	if err := proto.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("stored body unreadable: %w", err)
	}
	ev.Before, ev.After = nil, nil
	return proto.MarshalOptions{Deterministic: true}.Marshal(&ev)
}
