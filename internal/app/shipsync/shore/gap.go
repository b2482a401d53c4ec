package shore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Gap handling defaults.
const (
	// GapGraceDefault is how long a gap may stay open before the node is
	// asked to resend it: batches of one stream can arrive out of order
	// (two uploads in flight), so a young gap usually fills by itself.
	GapGraceDefault = 30 * time.Second
	// ResendEveryDefault is how often an unfilled gap is asked for again.
	ResendEveryDefault = 10 * time.Minute
)

// Resend is a request to a node to send a stream's missing sequence range
// again.
type Resend struct {
	Node, Connector, Partition string
	From, To                   uint64
	At                         time.Time
}

// AskResends records a resend request for every stream whose gap has been
// open longer than grace and was not asked about within every, and returns
// them. seed 004 §10.4: a gap pauses the stream's later events (they stay
// held, see Receive) and the node is asked to send the missing range again;
// the requests are delivered to the node with its downlink.
func (in *Inbox) AskResends(ctx context.Context, grace, every time.Duration) ([]Resend, error) {
	now := in.clock.Now()
	var out []Resend
	err := pgx.BeginTxFunc(ctx, in.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, stmts["StreamGapsDue"], now, now.Add(-grace), now.Add(-every))
		if err != nil {
			return err
		}
		var r Resend
		var from, to *string
		_, err = pgx.ForEachRow(rows, []any{&r.Node, &r.Connector, &r.Partition, &from, &to}, func() error {
			if from == nil || to == nil {
				return nil // the held events were released meanwhile
			}
			f, err1 := strconv.ParseUint(*from, 10, 64)
			t, err2 := strconv.ParseUint(*to, 10, 64)
			if err1 != nil || err2 != nil || t < f {
				return fmt.Errorf("gap of stream %s/%s: bad range %s–%s", r.Connector, r.Partition, *from, *to)
			}
			r.From, r.To, r.At = f, t, now
			out = append(out, r)
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range out {
			if _, err := tx.Exec(ctx, stmts["ResendInsert"], r.Node, r.Connector, r.Partition,
				strconv.FormatUint(r.From, 10), strconv.FormatUint(r.To, 10), now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: resend requests: %w", ErrStore, err)
	}
	return out, nil
}

// Resends returns the resend requests recorded for node, oldest first.
func (in *Inbox) Resends(ctx context.Context, node string) ([]Resend, error) {
	rows, err := in.pool.Query(ctx, stmts["ResendList"], node)
	if err != nil {
		return nil, fmt.Errorf("%w: resend requests: %w", ErrStore, err)
	}
	var out []Resend
	var r Resend
	var from, to string
	_, err = pgx.ForEachRow(rows, []any{&r.Node, &r.Connector, &r.Partition, &from, &to, &r.At}, func() error {
		var err1, err2 error
		r.From, err1 = strconv.ParseUint(from, 10, 64)
		r.To, err2 = strconv.ParseUint(to, 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad resend range %s–%s", from, to)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: resend requests: %w", ErrStore, err)
	}
	return out, nil
}
