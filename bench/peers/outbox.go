package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaysink"
)

// Outbox relay: events written in business transactions (one business row
// and PerTx events per transaction, single writer, event j of key j % keys),
// then relayed to a broker (Redis Streams or Kafka on an in-process kfake
// cluster). relay appends with AppendEventsTx and relays with a Dispatcher and
// its own sink (relayredis, relaykafka); the peer publishes with
// watermill-sql's publisher on the business transaction, wrapped by the
// Forwarder's publisher (an envelope on the forwarder topic), and relays with
// watermill's Forwarder (a watermill-sql subscriber on the forwarder topic,
// publishing each message to watermill-redisstream or watermill-kafka).
//
// The write phase is timed from the first BEGIN to the last COMMIT; the relay
// phase from the start of relaying until the broker has confirmed every event
// (a wrapper around each system's publisher counts distinct confirmed events;
// relay's SENT marks of the last batch and the peer's last offset commit come
// after that). Then the broker is read back — XRANGE of the stream, or every
// partition of the topic — and checked with the consumer's view of
// at-least-once: every event present, duplicates counted, and per key the
// first copies of the events in ascending order.

// outboxResult is one verified outbox run.
type outboxResult struct {
	N          int
	Write      time.Duration
	Relay      time.Duration
	Duplicates int
	Reordered  int // events whose first copy came after a later event of their key
}

func (r outboxResult) writeRate() float64 { return float64(r.N) / r.Write.Seconds() }
func (r outboxResult) relayRate() float64 { return float64(r.N) / r.Relay.Seconds() }

// orderHeld reports whether every key's events arrived in order.
func (r outboxResult) orderHeld() bool { return r.Reordered == 0 }

func outboxLine(r outboxResult) string {
	order := "per-key order held"
	if !r.orderHeld() {
		order = fmt.Sprintf("order NOT held (%d events behind a later one of their key)", r.Reordered)
	}
	return fmt.Sprintf("write %8.0f ev/s  relay %8.0f ev/s  dups %d  %s", r.writeRate(), r.relayRate(), r.Duplicates, order)
}

// outboxTimeout bounds one relay phase.
const outboxTimeout = 4 * time.Minute

// outboxSpec is one outbox run's shape.
type outboxSpec struct {
	n, keys, perTx int
}

// keyName is the ordering key of event j.
func (s outboxSpec) keyName(j int) string { return "k" + strconv.Itoa(j%s.keys) }

// write runs tx(lo, hi) for events lo..hi-1 of every business transaction, one
// after another, and returns how long they took.
func (s outboxSpec) write(system string, tx func(lo, hi int) error) (time.Duration, error) {
	start := time.Now()
	for lo := 0; lo < s.n; lo += s.perTx {
		hi := min(lo+s.perTx, s.n)
		if err := tx(lo, hi); err != nil {
			return 0, fmt.Errorf("%s: write events %d..%d: %w", system, lo, hi-1, err)
		}
	}
	return time.Since(start), nil
}

// Business rows: one per transaction, written with its events.
const (
	orderDDL    = `CREATE TABLE peers_order (id bigint PRIMARY KEY, events int NOT NULL)`
	orderInsert = `INSERT INTO peers_order (id, events) VALUES ($1, $2)`
	orderCheck  = `SELECT count(*), COALESCE(sum(events), 0) FROM peers_order`
)

// checkOrders verifies that every business transaction committed its row.
func checkOrders(ctx context.Context, pool *pgxpool.Pool, s outboxSpec) error {
	var rows, events int64
	if err := pool.QueryRow(ctx, orderCheck).Scan(&rows, &events); err != nil {
		return fmt.Errorf("read business rows: %w", err)
	}
	if want := (s.n + s.perTx - 1) / s.perTx; rows != int64(want) || events != int64(s.n) {
		return fmt.Errorf("business rows: %d rows for %d events, want %d rows for %d", rows, events, want, s.n)
	}
	return nil
}

// confirmed counts the distinct events a broker confirmed (by their payload,
// the event number) and notes when the last one was.
type confirmed struct {
	mu   sync.Mutex
	seen []bool
	left int
	at   time.Time
	done chan struct{}
	bad  atomic.Value // error: a payload that is no event number
}

func newConfirmed(n int) *confirmed {
	return &confirmed{seen: make([]bool, n), left: n, done: make(chan struct{})}
}

func (c *confirmed) add(payload []byte) {
	j, err := strconv.Atoi(string(payload))
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || j < 0 || j >= len(c.seen) {
		c.bad.CompareAndSwap(nil, fmt.Errorf("confirmed payload %q is no event number", payload))
		return
	}
	if c.seen[j] {
		return
	}
	c.seen[j] = true
	c.left--
	if c.left == 0 {
		c.at = time.Now()
		close(c.done)
	}
}

// wait returns the time of the last confirmation, or an error after timeout
// or when failed is closed first (with its cause).
func (c *confirmed) wait(ctx context.Context, timeout time.Duration, failed <-chan error) (time.Time, error) {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.at, nil
	case err := <-failed:
		return time.Time{}, fmt.Errorf("relay phase ended early: %w", err)
	case <-time.After(timeout):
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Time{}, fmt.Errorf("%d of %d events confirmed by the broker within %s", len(c.seen)-c.left, len(c.seen), timeout)
}

// countingSink counts what relay's sink confirmed.
type countingSink struct {
	relaysink.Sink
	c *confirmed
}

func (s countingSink) Publish(ctx context.Context, events []relaysink.Event) []error {
	errs := s.Sink.Publish(ctx, events)
	for i, ev := range events {
		if errs[i] == nil {
			s.c.add(ev.Payload)
		}
	}
	return errs
}

// countingPublisher counts what the Forwarder's publisher confirmed.
type countingPublisher struct {
	message.Publisher
	c *confirmed
}

func (p countingPublisher) Publish(topic string, msgs ...*message.Message) error {
	if err := p.Publisher.Publish(topic, msgs...); err != nil {
		return err
	}
	for _, m := range msgs {
		p.c.add(m.Payload)
	}
	return nil
}

// runRelayOutbox is one outbox run of relay: write, relay with a Dispatcher to
// the broker, verify the broker and the outbox.
func runRelayOutbox(ctx context.Context, base string, br *broker, s outboxSpec, batch int) (res outboxResult, err error) {
	// The writer, and the dispatcher's fetch and settling batches.
	st, err := openRelay(ctx, base, 5, 0)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, st.close()) }()
	if _, err := st.d.Pool().Exec(ctx, orderDDL); err != nil {
		return res, err
	}
	const target = "peers"
	res.Write, err = s.write("relay", func(lo, hi int) error {
		tx, err := st.d.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) //nolint:errcheck // after Commit: ErrTxClosed
		if _, err := tx.Exec(ctx, orderInsert, lo, hi-lo); err != nil {
			return err
		}
		evs := make([]*relay.OutboxEvent, 0, hi-lo)
		for j := lo; j < hi; j++ {
			evs = append(evs, &relay.OutboxEvent{ID: "e" + strconv.Itoa(j), Target: target, Topic: br.topic,
				Key: s.keyName(j), Payload: []byte(strconv.Itoa(j))})
		}
		if _, err := relay.AppendEventsTx(ctx, tx, evs...); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return res, err
	}

	sink, err := br.relaySink()
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, sink.Close(context.WithoutCancel(ctx))) }()
	conf := newConfirmed(s.n)
	disp, err := relay.NewDispatcher(st.d, countingSink{sink, conf}, relay.DispatcherConfig{Target: target, BatchSize: batch,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return res, err
	}
	failed := make(chan error, 1)
	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	go func() {
		// Work drains the backlog: every batch published and settled.
		if _, err := disp.Work(workCtx); err != nil {
			failed <- err
		}
		close(failed)
	}()
	last, err := conf.wait(ctx, outboxTimeout, failed)
	if err != nil {
		cancel()
		<-failed // Work has returned before the store closes
		return res, fmt.Errorf("relay: %w", err)
	}
	res.Relay = last.Sub(start)
	if err := <-failed; err != nil {
		return res, fmt.Errorf("relay: dispatcher: %w", err)
	}
	if err, _ := conf.bad.Load().(error); err != nil {
		return res, err
	}
	stats, err := st.d.GetExecutor().OutboxStats(ctx, target)
	if err != nil {
		return res, err
	}
	if stats.Sent != int64(s.n) || stats.Pending != 0 || stats.Dead != 0 {
		return res, fmt.Errorf("relay: outbox ended with %d SENT, %d PENDING, %d DEAD of %d", stats.Sent, stats.Pending, stats.Dead, s.n)
	}
	if err := checkOrders(ctx, st.d.Pool(), s); err != nil {
		return res, err
	}
	return br.verify(ctx, s, res)
}

// forwarderTopic is the watermill-sql topic the Forwarder consumes.
const forwarderTopic = "peers_forwarder"

// runWatermillOutbox is one outbox run of the peer: publish through the
// Forwarder's publisher on watermill-sql in each business transaction, then
// run the Forwarder to the broker until every event is confirmed, then verify
// the broker.
func runWatermillOutbox(ctx context.Context, base string, br *broker, s outboxSpec) (res outboxResult, err error) {
	pool, closePool, err := freshPool(ctx, base, 4, orderDDL)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, closePool()) }()
	logger := watermill.NopLogger{}
	sub, err := newWatermillSubscriber(pool)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, sub.Close()) }()
	// The publisher on a transaction may not create tables (an implicit
	// commit); the subscriber creates the topic's tables first.
	if err := sub.SubscribeInitialize(forwarderTopic); err != nil {
		return res, err
	}

	res.Write, err = s.write("watermill", func(lo, hi int) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) //nolint:errcheck // after Commit: ErrTxClosed
		if _, err := tx.Exec(ctx, orderInsert, lo, hi-lo); err != nil {
			return err
		}
		sqlPub, err := wsql.NewPublisher(wsql.TxFromPgx(tx), wsql.PublisherConfig{SchemaAdapter: wsql.DefaultPostgreSQLSchema{}}, logger)
		if err != nil {
			return err
		}
		pub := forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{ForwarderTopic: forwarderTopic})
		msgs := make([]*message.Message, 0, hi-lo)
		for j := lo; j < hi; j++ {
			m := message.NewMessage(watermill.NewUUID(), []byte(strconv.Itoa(j)))
			m.Metadata.Set(keyMetadata, s.keyName(j))
			msgs = append(msgs, m)
		}
		if err := pub.Publish(br.topic, msgs...); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return res, err
	}

	out, err := br.watermillPublisher()
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	conf := newConfirmed(s.n)
	fwd, err := forwarder.NewForwarder(sub, countingPublisher{out, conf}, logger, forwarder.Config{ForwarderTopic: forwarderTopic})
	if err != nil {
		return res, err
	}
	failed := make(chan error, 1)
	start := time.Now()
	go func() {
		if err := fwd.Run(ctx); err != nil {
			failed <- err
		}
		close(failed)
	}()
	last, err := conf.wait(ctx, outboxTimeout, failed)
	closeErr := fwd.Close() // waits for the handler; the last batch's offsets commit
	if err != nil {
		return res, errors.Join(fmt.Errorf("watermill: %w", err), closeErr)
	}
	if closeErr != nil {
		return res, fmt.Errorf("watermill: close forwarder: %w", closeErr)
	}
	<-failed
	res.Relay = last.Sub(start)
	if err, _ := conf.bad.Load().(error); err != nil {
		return res, err
	}
	if err := checkOrders(ctx, pool, s); err != nil {
		return res, err
	}
	return br.verify(ctx, s, res)
}

// keyMetadata is the watermill metadata field holding the event's key (the
// Kafka partition key of watermill-kafka's partitioning marshaler).
const keyMetadata = "key"

// streamCheck reads a broker's copy of the events as a deduplicating consumer
// would: by event number, counting duplicates, and per key checking that the
// first copies arrive in ascending order.
type streamCheck struct {
	s          outboxSpec
	seen       []bool
	last       []int // per key: the largest event number seen (-1: none)
	distinct   int
	duplicates int
	reordered  int
	total      int
}

func newStreamCheck(s outboxSpec) *streamCheck {
	c := &streamCheck{s: s, seen: make([]bool, s.n), last: make([]int, s.keys)}
	for i := range c.last {
		c.last[i] = -1
	}
	return c
}

func (c *streamCheck) observe(payload []byte) error {
	c.total++
	j, err := strconv.Atoi(string(payload))
	if err != nil || j < 0 || j >= c.s.n {
		return fmt.Errorf("broker holds a record with payload %q, not an event of this run", payload)
	}
	if c.seen[j] {
		c.duplicates++
		return nil
	}
	c.seen[j] = true
	c.distinct++
	k := j % c.s.keys
	if j < c.last[k] {
		c.reordered++
	} else {
		c.last[k] = j
	}
	return nil
}

// result fills res from the check: a lost event is an error for any system;
// a reordering is reported in res (the caller decides whether it fails).
func (c *streamCheck) result(res outboxResult) (outboxResult, error) {
	res.N, res.Duplicates, res.Reordered = c.s.n, c.duplicates, c.reordered
	if c.distinct != c.s.n {
		return res, fmt.Errorf("broker holds %d of %d events (%d records read)", c.distinct, c.s.n, c.total)
	}
	return res, nil
}

// outboxNames are the table names of the brokers.
var outboxNames = map[string]string{brokerRedis: "Redis Streams", brokerKafka: "Kafka (in-process kfake)"}

// outbox runs the rounds of the outbox scenario to one broker kind: each
// round relay, then the Forwarder, each on a fresh schema and a fresh
// stream/topic. A relay run that lost or reordered an event fails; a
// Forwarder run fails on a lost event, and a reordering is reported.
func (b *bench) outbox(ctx context.Context, kind string) {
	o := b.o
	relayS := outboxSpec{n: o.outboxN, keys: o.outboxKeys, perTx: o.outboxPerTx}
	peerS := outboxSpec{n: o.outboxPeerN, keys: o.outboxKeys, perTx: o.outboxPerTx}
	fmt.Fprintf(b.out, "\n== outbox relay to %s: relay n=%d, Forwarder n=%d, %d keys, %d events per business transaction, rounds=%d\n",
		outboxNames[kind], relayS.n, peerS.n, o.outboxKeys, o.outboxPerTx, o.rounds)
	batch := o.outboxBatch
	if batch == 0 {
		batch = relay.DispatchBatchSizeDefault
	}
	run := func(f func(*broker) (outboxResult, error)) func() (outboxResult, error) {
		return func() (res outboxResult, err error) {
			br, err := newBroker(kind, o.redisAddr)
			if err != nil {
				return res, err
			}
			defer func() { err = errors.Join(err, br.close()) }()
			return f(br)
		}
	}
	var relayRes, peerRes []outboxResult
	for round := 1; round <= o.rounds; round++ {
		if r, ok := verified(b, fmt.Sprintf("round %d relay", round), run(func(br *broker) (outboxResult, error) {
			r, err := runRelayOutbox(ctx, o.postgres, br, relayS, batch)
			if err == nil && !r.orderHeld() {
				err = fmt.Errorf("per-key order broken: %d events arrived behind a later event of their key", r.Reordered)
			}
			return r, err
		}), outboxLine); ok {
			relayRes = append(relayRes, r)
		}
		if r, ok := verified(b, fmt.Sprintf("round %d watermill Forwarder", round), run(func(br *broker) (outboxResult, error) {
			return runWatermillOutbox(ctx, o.postgres, br, peerS)
		}), outboxLine); ok {
			peerRes = append(peerRes, r)
		}
	}
	if b.failed {
		return
	}
	relaySetting := fmt.Sprintf("Dispatcher BatchSize=%d, %s", batch, map[string]string{
		brokerRedis: "relayredis (pipelined XADD)", brokerKafka: "relaykafka (franz-go, idempotent, acks=all)"}[kind])
	peerSetting := "Forwarder on watermill-sql v4.1.2 (SubscribeBatchSize 100), " + map[string]string{
		brokerRedis: "watermill-redisstream v1.4.5 (XADD per message)",
		brokerKafka: "watermill-kafka v3.0.6 (sarama sync producer, key = event key)"}[kind]
	order := func(rs []outboxResult) string {
		for _, r := range rs {
			if !r.orderHeld() {
				return "not held"
			}
		}
		return "held"
	}
	dups := func(rs []outboxResult) string {
		lo, hi := rs[0].Duplicates, rs[0].Duplicates
		for _, r := range rs {
			lo, hi = min(lo, r.Duplicates), max(hi, r.Duplicates)
		}
		if lo == hi {
			return strconv.Itoa(lo)
		}
		return fmt.Sprintf("%d–%d", lo, hi)
	}
	fmt.Fprintf(b.out, "\n| system | setting | n | relay min | relay median | relay max | write median | duplicates | per-key order |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range []struct {
		name, setting string
		n             int
		rs            []outboxResult
	}{{"relay", relaySetting, relayS.n, relayRes}, {"watermill", peerSetting, peerS.n, peerRes}} {
		p := values(row.rs, outboxResult.relayRate)
		fmt.Fprintf(b.out, "| %s | %s | %d | %.0f ev/s | %.0f ev/s | %.0f ev/s | %.0f ev/s | %s | %s |\n",
			row.name, row.setting, row.n, p[0], median(p), p[len(p)-1], median(values(row.rs, outboxResult.writeRate)),
			dups(row.rs), order(row.rs))
	}
	relayMed, peerMed := median(values(relayRes, outboxResult.relayRate)), median(values(peerRes, outboxResult.relayRate))
	writeRatio := median(values(relayRes, outboxResult.writeRate)) / median(values(peerRes, outboxResult.writeRate))
	fmt.Fprintf(b.out, "\nrelay/Forwarder (median relay phase): %.2f×   (median write phase: %.2f×)\n", relayMed/peerMed, writeRatio)
	b.summary = append(b.summary, summaryRow{
		scenario: fmt.Sprintf("outbox relay → %s, relay n=%d, Forwarder n=%d", outboxNames[kind], relayS.n, peerS.n),
		relay:    fmt.Sprintf("%.0f ev/s (Dispatcher BatchSize=%d), per-key order %s", relayMed, batch, order(relayRes)),
		peer:     fmt.Sprintf("%.0f ev/s (watermill Forwarder), per-key order %s", peerMed, order(peerRes)),
		ratio:    fmt.Sprintf("%.2f× (write %.2f×)", relayMed/peerMed, writeRatio),
		goal:     "≥ 50,000 ev/s and ≥ 5×",
	})
}
