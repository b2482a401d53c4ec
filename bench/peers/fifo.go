package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// Strict FIFO consumption: one queue consumed in global order with
// per-message state, relay's ModeFIFO (FIFOBatch heads per transaction) vs a
// watermill-sql v4 subscriber on one topic (its default SubscribeBatchSize of
// 100 rows per transaction). Both apply each message in the transaction that
// records it as consumed — relay's terminal state, watermill-sql's offset (the
// handler writes through sql.TxFromContext) — and both apply it as the next
// step of one global sequence (peers_key with one key: the handler advances it
// only from seq-1), so an effect exists only if every message was applied
// right after its predecessor, exactly once.

// fifoTopic is the watermill-sql topic.
const fifoTopic = "peers_fifo"

// runRelayFIFO is one FIFO burn-down of relay: enqueue n messages (ids 1..n),
// then Work until all are processed in order, then verify.
func runRelayFIFO(ctx context.Context, base string, n, fifoBatch int, batched bool) (res result, err error) {
	st, err := openRelay(ctx, base, 3, 1)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, st.close()) }()
	var h relay.Handler = relayHandler(1, nil)
	if batched {
		h = fifoBatchHandler{Handler: h}
	}
	cfg := relayConfig(0, relaySetting{Workers: 1, BatchSize: 1, TxBatch: 1}, h)
	cfg.Mode, cfg.FIFOBatch = relay.ModeFIFO, fifoBatch
	e, err := relay.NewEngine(st.d, cfg)
	if err != nil {
		return res, err
	}
	const chunk = 1000
	start := time.Now()
	for i := int64(1); i <= int64(n); i += chunk {
		if _, err := e.Enqueue(ctx, enqueueParams(i, min(i+chunk, int64(n)+1), 0, nil)...); err != nil {
			return res, err
		}
	}
	res.Insert = time.Since(start)
	start = time.Now()
	for done := 0; done < n; {
		k, err := e.Work(ctx)
		if err != nil {
			return res, err
		}
		if k == 0 {
			return res, fmt.Errorf("relay: FIFO stopped after %d of %d messages", done, n)
		}
		done += k
	}
	res.Process = time.Since(start)
	res.N = n
	return res, verifyRelay(ctx, e, st.d, n, 1)
}

// fifoBatchHandler is the FIFO scenario's handler as a relay.BatchHandler:
// the run of heads is applied with the same statement per message, in order,
// sent as one pgx batch (one round trip for the run instead of one per
// message). A message applied out of order makes its own result DEAD, which
// ends the batch (relay then commits the prefix alone). Handler serves the
// messages relay runs one at a time.
type fifoBatchHandler struct{ relay.Handler }

func (h fifoBatchHandler) HandleBatch(ctx context.Context, tx relay.Tx, ds []*relay.Delivery) []relay.Result {
	out := make([]relay.Result, len(ds))
	ptx, err := relaypgx.PgxTx(tx)
	if err != nil {
		for i := range out {
			out[i] = relay.Retry(relaytype.ClassInternal, err)
		}
		return out
	}
	b := &pgx.Batch{}
	for _, d := range ds {
		b.Queue(orderedStep, d.Message.ID, keyOf(d.Message.ID, 1), prevOf(d.Message.ID, 1))
	}
	br := ptx.SendBatch(ctx, b)
	defer br.Close()
	for i, d := range ds {
		tag, err := br.Exec()
		switch {
		case err != nil:
			out[i] = relay.Retry(relaytype.ClassInfra, err)
		case tag.RowsAffected() != 1:
			out[i] = relay.Dead(relaytype.ClassInternal, fmt.Errorf("message %d applied out of order", d.Message.ID))
		default:
			out[i] = relay.Succeeded()
			continue
		}
		for j := i + 1; j < len(ds); j++ {
			out[j] = out[i]
		}
		break
	}
	return out
}

// runWatermillFIFO is one FIFO burn-down of a watermill-sql subscriber:
// publish n messages (payload = seq) in batches of 1,000, then subscribe and
// apply each in the subscriber's transaction until n are acked, then close the
// subscriber (its last batch commits) and verify.
func runWatermillFIFO(ctx context.Context, base string, n int) (res result, err error) {
	pool, closePool, err := freshPool(ctx, base, 4, effectDDL, keyDDL)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, closePool()) }()
	if _, err := pool.Exec(ctx, keyFill, 1); err != nil {
		return res, err
	}
	db := wsql.BeginnerFromPgx(pool)
	logger := watermill.NopLogger{}
	pub, err := wsql.NewPublisher(db, wsql.PublisherConfig{
		SchemaAdapter: wsql.DefaultPostgreSQLSchema{}, AutoInitializeSchema: true}, logger)
	if err != nil {
		return res, err
	}
	const chunk = 1000
	start := time.Now()
	for i := 1; i <= n; i += chunk {
		msgs := make([]*message.Message, 0, chunk)
		for seq := i; seq < min(i+chunk, n+1); seq++ {
			msgs = append(msgs, message.NewMessage(watermill.NewUUID(), []byte(strconv.Itoa(seq))))
		}
		if err := pub.Publish(fifoTopic, msgs...); err != nil {
			return res, fmt.Errorf("watermill: publish: %w", err)
		}
	}
	res.Insert = time.Since(start)

	sub, err := newWatermillSubscriber(pool)
	if err != nil {
		return res, err
	}
	closed := false
	defer func() {
		if !closed {
			err = errors.Join(err, sub.Close())
		}
	}()
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start = time.Now()
	msgs, err := sub.Subscribe(subCtx, fifoTopic)
	if err != nil {
		return res, err
	}
	deadline := time.After(burnTimeout)
	for done := 0; done < n; {
		select {
		case msg := <-msgs:
			if err := applyWatermill(msg); err != nil {
				return res, err
			}
			msg.Ack()
			done++
		case <-deadline:
			return res, fmt.Errorf("watermill: %d of %d messages within %s", done, n, burnTimeout)
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	closed = true
	if err := sub.Close(); err != nil { // waits for the last batch's commit
		return res, err
	}
	res.Process = time.Since(start)
	res.N = n
	if err := checkEffects(ctx, pool, n); err != nil {
		return res, err
	}
	return res, checkKeys(ctx, pool, n, 1)
}

// newWatermillSubscriber returns a watermill-sql v4 subscriber on pool with
// the package's defaults (DefaultPostgreSQLSchema: SubscribeBatchSize 100;
// DefaultPostgreSQLOffsetsAdapter), consumer group "peers", creating its
// tables when it subscribes.
func newWatermillSubscriber(pool *pgxpool.Pool) (*wsql.Subscriber, error) {
	return wsql.NewSubscriber(wsql.BeginnerFromPgx(pool), wsql.SubscriberConfig{
		ConsumerGroup:    "peers",
		SchemaAdapter:    wsql.DefaultPostgreSQLSchema{},
		OffsetsAdapter:   wsql.DefaultPostgreSQLOffsetsAdapter{},
		InitializeSchema: true,
	}, watermill.NopLogger{})
}

// applyWatermill applies one message as the next step of the global sequence
// in the subscriber's transaction. A message applied out of order writes no
// effect, which verification reports.
func applyWatermill(msg *message.Message) error {
	seq, err := strconv.ParseInt(string(msg.Payload), 10, 64)
	if err != nil {
		return fmt.Errorf("watermill: payload %q: %w", msg.Payload, err)
	}
	tx, ok := wsql.TxFromContext(msg.Context())
	if !ok {
		return errors.New("watermill: no transaction in the message context")
	}
	if _, err := tx.ExecContext(msg.Context(), orderedStep, seq, keyOf(seq, 1), prevOf(seq, 1)); err != nil {
		return fmt.Errorf("watermill: apply %d: %w", seq, err)
	}
	return nil
}
