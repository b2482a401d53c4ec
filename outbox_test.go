package relay_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/internal/testlog"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// recSink is an in-memory relaysink.Sink whose failures the test scripts. It
// keeps the sink contract: once an event of a key fails, later events of that
// key in the call fail too and are not delivered. (The Kafka sink's end-to-end
// test with kfake is separate.)
type recSink struct {
	mu        sync.Mutex
	calls     [][]relaysink.Event // every Publish call, as received
	delivered []relaysink.Event   // confirmed events, in delivery order
	fail      func(ev relaysink.Event) error
	onPublish func(events []relaysink.Event) // runs at the start of Publish, unlocked
}

func (s *recSink) Name() string { return "rec" }

func (s *recSink) Publish(ctx context.Context, events []relaysink.Event) []error {
	s.mu.Lock()
	hook := s.onPublish
	s.calls = append(s.calls, slices.Clone(events))
	s.mu.Unlock()
	if hook != nil {
		hook(events)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(events))
	blocked := map[string]error{}
	for i, ev := range events {
		if err, ok := blocked[ev.Key]; ok {
			errs[i] = fmt.Errorf("blocked behind an earlier failure: %w", err)
			continue
		}
		if s.fail != nil {
			if err := s.fail(ev); err != nil {
				errs[i], blocked[ev.Key] = err, err
				continue
			}
		}
		s.delivered = append(s.delivered, ev)
	}
	return errs
}

func (s *recSink) Close(context.Context) error { return nil }

func (s *recSink) setFail(f func(ev relaysink.Event) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = f
}

// byKey returns the delivered events' "seq:payload" per key, in delivery order.
func (s *recSink) byKey() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	for _, ev := range s.delivered {
		out[ev.Key] = append(out[ev.Key], fmt.Sprintf("%d:%s", ev.Seq, ev.Payload))
	}
	return out
}

func (s *recSink) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// dispatchBundle is a store, a fake clock, a recording sink and a dispatcher.
type dispatchBundle struct {
	t     *testing.T
	ctx   context.Context
	d     relaydriver.Driver
	clock *relayclock.Fake
	sink  *recSink
	disp  *relay.Dispatcher
	reg   *prometheus.Registry
	n     int
}

func setupDispatch(t *testing.T, d relaydriver.Driver, cfg relay.DispatcherConfig) *dispatchBundle {
	t.Helper()
	b := &dispatchBundle{t: t, ctx: t.Context(), d: d, clock: relayclock.NewFake(t0), sink: &recSink{}, reg: prometheus.NewRegistry()}
	cfg.Target = "kafka:msg"
	cfg.Clock = b.clock
	cfg.Registerer = b.reg
	disp, err := relay.NewDispatcher(d, b.sink, cfg)
	require.NoError(t, err)
	b.disp = disp
	return b
}

// commit appends events for keys (payload "<key><n>") in one transaction.
func (b *dispatchBundle) commit(keys ...string) {
	b.t.Helper()
	tx, err := b.d.Begin(b.ctx)
	require.NoError(b.t, err)
	defer tx.Rollback(b.ctx) //nolint:errcheck
	evs := make([]*relay.OutboxEvent, len(keys))
	for i, k := range keys {
		b.n++
		evs[i] = &relay.OutboxEvent{ID: "e" + strconv.Itoa(b.n), Target: "kafka:msg", Topic: "msg", Key: k,
			Headers: map[string]string{"h": "v"}, Payload: []byte(k + strconv.Itoa(b.n))}
	}
	_, err = relay.AppendEventsTx(b.ctx, tx, evs...)
	require.NoError(b.t, err)
	require.NoError(b.t, tx.Commit(b.ctx))
}

func (b *dispatchBundle) work() int {
	b.t.Helper()
	n, err := b.disp.Work(b.ctx)
	require.NoError(b.t, err)
	return n
}

// rows returns the target's rows keyed "key/seq".
func (b *dispatchBundle) rows() map[string]*relaydriver.OutboxRecord {
	b.t.Helper()
	rs, err := b.d.GetExecutor().OutboxList(b.ctx, &relaydriver.OutboxListParams{Target: "kafka:msg", Limit: 10000})
	require.NoError(b.t, err)
	out := map[string]*relaydriver.OutboxRecord{}
	for _, r := range rs {
		out[fmt.Sprintf("%s/%d", r.Key, r.Seq)] = r
	}
	return out
}

// metric reads one sample of the dispatcher's registry.
func (b *dispatchBundle) metric(name, outcome string) float64 {
	b.t.Helper()
	mfs, err := b.reg.Gather()
	require.NoError(b.t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := outcome == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					match = true
				}
			}
			if !match {
				continue
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	b.t.Fatalf("metric %s{outcome=%q} not found", name, outcome)
	return 0
}

// Per-key order holds across rounds: small batches, several commits, every
// event delivered once in seq order, SENT with sent_at after confirmation.
func TestDispatcherPerKeyOrderAcrossRounds(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupDispatch(t, s.open(t, true), relay.DispatcherConfig{BatchSize: 3})
		b.commit("a", "b", "a")
		b.commit("a", "c")
		b.commit("b", "a", "c", "a")
		require.Equal(t, 9, b.work())
		require.GreaterOrEqual(t, b.sink.callCount(), 3, "batches of 3")
		require.Equal(t, map[string][]string{
			"a": {"1:a1", "2:a3", "3:a4", "4:a7", "5:a9"},
			"b": {"1:b2", "2:b6"},
			"c": {"1:c5", "2:c8"},
		}, b.sink.byKey())
		for k, r := range b.rows() {
			require.Equal(t, relaydriver.OutboxSent, r.State, k)
			require.True(t, t0.Equal(r.SentAt), "%s sent_at %v", k, r.SentAt)
		}
		ev := b.sink.delivered[0]
		require.Equal(t, "msg", ev.Topic)
		require.Equal(t, relaysink.Upsert, ev.Type)
		require.Equal(t, map[string]string{"h": "v"}, ev.Headers)
		require.Equal(t, 9.0, b.metric("relay_outbox_events_total", "sent"))
		require.Equal(t, 0.0, b.metric("relay_outbox_pending", ""))

		b.commit("a")
		require.Equal(t, 1, b.work())
		require.Equal(t, "6:a10", b.sink.byKey()["a"][5])
		require.Zero(t, b.work(), "nothing ready")
	})
}

// A failing head pauses only its key: its later events stay PENDING (not sent,
// not failed), other keys go on; after the backoff on the fake clock the key
// resumes in order.
func TestDispatcherFailingHeadPausesOnlyItsKey(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupDispatch(t, s.open(t, true), relay.DispatcherConfig{MaxAttempts: 3, Backoff: []time.Duration{time.Minute, 2 * time.Minute}})
		b.commit("a", "a", "b", "a", "b")
		b.sink.setFail(func(ev relaysink.Event) error {
			if ev.Key == "a" {
				return errors.New("partition a unavailable")
			}
			return nil
		})
		require.Equal(t, 3, b.work(), "b/1, b/2 sent; a/1 failed once")
		require.Equal(t, map[string][]string{"b": {"1:b3", "2:b5"}}, b.sink.byKey())
		rows := b.rows()
		require.Equal(t, relaydriver.OutboxPending, rows["a/1"].State)
		require.Equal(t, 1, rows["a/1"].Attempts)
		require.Equal(t, "partition a unavailable", rows["a/1"].LastError)
		require.True(t, t0.Add(time.Minute).Equal(rows["a/1"].NextAttemptAt))
		for _, k := range []string{"a/2", "a/3"} {
			require.Equal(t, relaydriver.OutboxPending, rows[k].State, k)
			require.Zero(t, rows[k].Attempts, "%s: only the head counts the failure", k)
			require.True(t, rows[k].SentAt.IsZero())
		}
		require.Equal(t, 1.0, b.metric("relay_outbox_events_total", "retry"))
		require.Equal(t, 3.0, b.metric("relay_outbox_pending", ""))

		// Within the backoff nothing of a goes, even when the sink recovers.
		b.sink.setFail(nil)
		b.commit("b")
		b.clock.Advance(time.Minute - time.Second)
		require.Equal(t, 1, b.work(), "only the new b event")
		require.Len(t, b.sink.byKey()["a"], 0)

		b.clock.Advance(time.Second)
		require.Equal(t, 3, b.work())
		require.Equal(t, []string{"1:a1", "2:a2", "3:a4"}, b.sink.byKey()["a"])
		require.Equal(t, relaydriver.OutboxSent, b.rows()["a/3"].State)
		require.Equal(t, 1, b.rows()["a/1"].Attempts, "the attempt count is kept")
	})
}

// After MaxAttempts failures the head is DEAD with its error kept (the DLQ);
// its key continues with the next event.
func TestDispatcherDeadAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupDispatch(t, s.open(t, true), relay.DispatcherConfig{MaxAttempts: 3, Backoff: []time.Duration{time.Second, 2 * time.Second}})
		b.commit("a", "a")
		attempt := 0
		b.sink.setFail(func(ev relaysink.Event) error {
			if ev.ID == "e1" {
				attempt++
				return fmt.Errorf("rejected #%d", attempt)
			}
			return nil
		})
		require.Equal(t, 1, b.work())
		require.Zero(t, b.work(), "waiting for the 1s backoff")
		b.clock.Advance(time.Second)
		require.Equal(t, 1, b.work())
		b.clock.Advance(time.Second)
		require.Zero(t, b.work(), "second level is 2s")
		b.clock.Advance(time.Second)
		require.Equal(t, 2, b.work(), "third failure: DEAD; then a/2 is sent")
		rows := b.rows()
		require.Equal(t, relaydriver.OutboxDead, rows["a/1"].State)
		require.Equal(t, 3, rows["a/1"].Attempts)
		require.Equal(t, "rejected #3", rows["a/1"].LastError)
		require.True(t, rows["a/1"].SentAt.IsZero())
		require.Equal(t, relaydriver.OutboxSent, rows["a/2"].State)
		require.Equal(t, []string{"2:a2"}, b.sink.byKey()["a"])
		require.Equal(t, 1.0, b.metric("relay_outbox_events_total", "dead"))
		require.Equal(t, 2.0, b.metric("relay_outbox_events_total", "retry"))

		// Retention keeps DEAD rows.
		n, err := b.d.GetExecutor().OutboxDeleteSent(b.ctx, "kafka:msg", t0.Add(time.Hour), 100)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Len(t, b.rows(), 1)
	})
}

// DeleteDelivered: a confirmed event's row is deleted instead of marked SENT;
// a failing head keeps its row (attempts, backoff) and pauses its key, a DEAD
// one stays as the DLQ, and the key goes on in seq order after it.
func TestDispatcherDeleteDelivered(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupDispatch(t, s.open(t, true), relay.DispatcherConfig{BatchSize: 3, MaxAttempts: 2,
			Backoff: []time.Duration{time.Minute}, DeleteDelivered: true})
		b.commit("a", "b", "a", "c", "b")
		b.sink.setFail(func(ev relaysink.Event) error {
			if ev.ID == "e2" {
				return errors.New("partition b unavailable")
			}
			return nil
		})
		require.Equal(t, 4, b.work(), "a1, a3, c4 sent; b2 failed once")
		require.Equal(t, []string{"b/1", "b/2"}, slices.Sorted(maps.Keys(b.rows())),
			"only the failed head and the event behind it are kept")
		require.Equal(t, relaydriver.OutboxPending, b.rows()["b/1"].State)
		require.Equal(t, 1, b.rows()["b/1"].Attempts)
		require.Equal(t, 3.0, b.metric("relay_outbox_events_total", "sent"))

		b.clock.Advance(time.Minute)
		require.Equal(t, 2, b.work(), "b2 DEAD at its second failure, then b5 goes")
		rows := b.rows()
		require.Len(t, rows, 1)
		require.Equal(t, relaydriver.OutboxDead, rows["b/1"].State)
		require.Equal(t, map[string][]string{"a": {"1:a1", "2:a3"}, "b": {"2:b5"}, "c": {"1:c4"}}, b.sink.byKey())
		st, err := b.disp.Stats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, [3]int64{0, 0, 1}, [3]int64{st.Pending, st.Sent, st.Dead}, "no SENT history")

		b.commit("b")
		require.Equal(t, 1, b.work())
		require.Equal(t, "3:b6", b.sink.byKey()["b"][1], "the key's seq goes on")
	})
}

// The dispatcher's shorter schedule repeats its last level: MaxAttempts 4
// with [1m] waits 1m after each of the first three failures.
func TestDispatcherShortBackoffRepeatsLastLevel(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, openSQLite(t, true), relay.DispatcherConfig{MaxAttempts: 4, Backoff: []time.Duration{time.Minute}})
	b.commit("a")
	b.sink.setFail(func(relaysink.Event) error { return errors.New("refused") })
	for i := range 3 {
		require.Equal(t, 1, b.work())
		r := b.rows()["a/1"]
		require.Equal(t, relaydriver.OutboxPending, r.State)
		require.Equal(t, i+1, r.Attempts)
		require.True(t, b.clock.Now().Add(time.Minute).Equal(r.NextAttemptAt), "failure %d waits 1m", i+1)
		require.Zero(t, b.work(), "waiting")
		b.clock.Advance(time.Minute)
	}
	require.Equal(t, 1, b.work())
	require.Equal(t, relaydriver.OutboxDead, b.rows()["a/1"].State)
}

// With DigestKeys a failed or dead event's log lines and last_error carry a
// digest of its key, never the key; without it, the key.
func TestDispatcherDigestKeysInLogs(t *testing.T) {
	t.Parallel()
	for _, digest := range []bool{false, true} {
		var logs testlog.Buffer
		b := setupDispatch(t, openSQLite(t, true), relay.DispatcherConfig{MaxAttempts: 2, Backoff: []time.Duration{time.Minute},
			DigestKeys: digest, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		b.commit("pk-13800000000")
		// A sink's failure names the event's key in its text, as every sink
		// of relaysink does.
		b.sink.setFail(func(ev relaysink.Event) error {
			return &relaysink.PublishError{Sink: "test", Topic: ev.Topic, Key: ev.Key, ID: ev.ID, Err: errors.New("refused")}
		})
		require.Equal(t, 1, b.work()) // failed: retry
		b.clock.Advance(time.Minute)
		require.Equal(t, 1, b.work()) // dead
		out := logs.String()
		require.Contains(t, out, "outbox delivery failed")
		require.Contains(t, out, "outbox event dead")
		lastError := b.rows()["pk-13800000000/1"].LastError
		require.Contains(t, lastError, "refused")
		sum := sha256.Sum256([]byte("pk-13800000000"))
		if digest {
			require.NotContains(t, out, "13800000000", "the key stays out of the logs")
			require.NotContains(t, lastError, "13800000000", "and out of last_error")
			// the attribute of both lines and the error text of both
			require.Equal(t, 4, strings.Count(out, "key_digest="+hex.EncodeToString(sum[:8])), out)
		} else {
			require.Equal(t, 4, strings.Count(out, "key=pk-13800000000"), out) // attribute and error text, twice
			require.Contains(t, lastError, "key=pk-13800000000")
		}
	}
}

// The batch is frozen at fetch: an event committed while Publish runs is not
// published or marked in that round (it goes in the next one), and nothing is
// SENT before the sink returned.
func TestDispatcherFrozenBatchAndSentAfterConfirm(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupDispatch(t, s.open(t, true), relay.DispatcherConfig{})
		b.commit("a", "b")
		var once sync.Once
		b.sink.onPublish = func(events []relaysink.Event) {
			once.Do(func() {
				for k, r := range b.rows() {
					require.Equal(t, relaydriver.OutboxPending, r.State, "%s is not SENT while the sink works", k)
					require.True(t, r.SentAt.IsZero())
				}
				b.clock.Advance(time.Second) // confirmation comes after the fetch time
				b.commit("a", "c")           // committed during the round
			})
		}
		require.Equal(t, 4, b.work())
		first := b.sink.calls[0]
		require.Len(t, first, 2)
		require.Equal(t, []string{"e1", "e2"}, []string{first[0].ID, first[1].ID})
		var later []string
		for _, call := range b.sink.calls[1:] {
			for _, ev := range call {
				later = append(later, ev.ID)
			}
		}
		// The queue fetches c/1 while a's first batch is settling (a is in
		// flight and left out), a/2 once it is settled.
		require.ElementsMatch(t, []string{"e3", "e4"}, later, "the events committed during round 1 went in later rounds")
		rows := b.rows()
		require.True(t, t0.Add(time.Second).Equal(rows["a/1"].SentAt), "sent_at is the confirmation time")
		require.Equal(t, []string{"1:a1", "2:a3"}, b.sink.byKey()["a"])
	})
}

// The sink's timeout bounds each call on the clock: a hanging sink's events
// count as failed and stay PENDING.
func TestDispatcherPublishTimeout(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, openSQLite(t, true), relay.DispatcherConfig{PublishTimeout: 5 * time.Second, MaxAttempts: 2, Backoff: []time.Duration{time.Minute}})
	b.commit("a")
	hang := &hangSink{entered: make(chan struct{})}
	disp, err := relay.NewDispatcher(b.d, hang, relay.DispatcherConfig{Target: "kafka:msg", Clock: b.clock, PublishTimeout: 5 * time.Second, MaxAttempts: 2, Backoff: []time.Duration{time.Minute}})
	require.NoError(t, err)
	go func() {
		<-hang.entered
		b.clock.Advance(5 * time.Second)
	}()
	n, err := disp.Work(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	r := b.rows()["a/1"]
	require.Equal(t, relaydriver.OutboxPending, r.State)
	require.Contains(t, r.LastError, "timed out")
}

type hangSink struct{ entered chan struct{} }

func (*hangSink) Name() string { return "hang" }
func (h *hangSink) Publish(ctx context.Context, events []relaysink.Event) []error {
	close(h.entered)
	<-ctx.Done()
	errs := make([]error, len(events))
	for i := range errs {
		errs[i] = ctx.Err()
	}
	return errs
}
func (*hangSink) Close(context.Context) error { return nil }

// Config is validated like the engine's: the backoff may not have more than
// MaxAttempts-1 levels (fewer repeat the last), Target is required.
func TestDispatcherConfigValidated(t *testing.T) {
	t.Parallel()
	d := openSQLite(t, true)
	_, err := relay.NewDispatcher(d, &recSink{}, relay.DispatcherConfig{})
	require.ErrorContains(t, err, "Target")
	_, err = relay.NewDispatcher(d, &recSink{}, relay.DispatcherConfig{Target: "t", MaxAttempts: 3, Backoff: []time.Duration{time.Second, time.Second, time.Second}})
	require.ErrorContains(t, err, "Backoff")
	_, err = relay.NewDispatcher(d, &recSink{}, relay.DispatcherConfig{Target: "t", MaxAttempts: 3, Backoff: []time.Duration{time.Second}})
	require.NoError(t, err, "a shorter schedule repeats its last level")
	_, err = relay.NewDispatcher(d, &recSink{}, relay.DispatcherConfig{Target: "t", MaxAttempts: 3, Backoff: []time.Duration{}})
	require.NoError(t, err, "empty: the default schedule")
	_, err = relay.NewDispatcher(d, &recSink{}, relay.DispatcherConfig{Target: "t", LockTTL: -time.Second})
	require.ErrorContains(t, err, "LockTTL")
	_, err = relay.NewDispatcher(d, &recSink{}, relay.DispatcherConfig{Target: "t", StandbyInterval: -time.Second})
	require.ErrorContains(t, err, "StandbyInterval")
	_, err = relay.NewDispatcher(d, &recSink{}, relay.DispatcherConfig{Target: "t", Kind: relay.DispatchLatest, DeleteDelivered: true})
	require.ErrorContains(t, err, "DeleteDelivered")
	_, err = relay.NewDispatcher(d, &recSink{}, relay.DispatcherConfig{Target: "t"})
	require.NoError(t, err)
}

// AppendEventsTx in a handler's Tx commits with the message's terminal state
// and is rolled back with a Retry; the rollback consumes no seq. Anything but
// a relay.Tx or an ExecutorTx is refused.
func TestAppendEventsTxInHandler(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		fails := map[int64]bool{2: true}
		var mu sync.Mutex
		b := setup(t, s, relay.Config{Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
			id := d.Message.ID
			_, err := relay.AppendEventsTx(ctx, tx, &relay.OutboxEvent{
				ID: "m" + itoa(id) + "-a" + itoa(int64(d.Message.Attempts)), Target: "kafka:msg", Key: "flight", Payload: []byte(itoa(id)),
			})
			if err != nil {
				return relay.Retry(relaytype.ClassInternal, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if fails[id] {
				fails[id] = false
				return relay.Retry(relaytype.ClassInfra, errors.New("try again"))
			}
			return relay.Succeeded()
		})})
		b.enqueue(1, 2, 3)
		b.work()
		require.Equal(t, relaytype.StateSucceeded, b.state(1))
		require.Equal(t, relaytype.StateFailed, b.state(2))
		rs, err := b.d.GetExecutor().OutboxList(b.ctx, &relaydriver.OutboxListParams{Target: "kafka:msg"})
		require.NoError(t, err)
		require.Len(t, rs, 1, "message 2's event was rolled back with its Retry")
		require.Equal(t, "m1-a0", rs[0].ID)
		require.Equal(t, int64(1), rs[0].Seq)
		require.True(t, t0.Equal(rs[0].CreatedAt), "created_at from the engine's clock")

		b.clock.Advance(time.Hour)
		b.work()
		rs, err = b.d.GetExecutor().OutboxList(b.ctx, &relaydriver.OutboxListParams{Target: "kafka:msg"})
		require.NoError(t, err)
		got := []string{}
		for _, r := range rs {
			got = append(got, fmt.Sprintf("%d:%s:%s", r.Seq, r.ID, r.Payload))
		}
		require.Equal(t, []string{"1:m1-a0:1", "2:m2-a1:2", "3:m3-a0:3"}, got, "no gap: the rolled-back seq was reused")

		_, err = relay.AppendEventsTx(b.ctx, fakeTx{}, &relay.OutboxEvent{ID: "x", Target: "t"})
		require.ErrorContains(t, err, "neither a handler's Tx nor a driver's transaction")
		_, err = relay.AppendEventsTx(b.ctx, nil, &relay.OutboxEvent{ID: "x", Target: "t"})
		require.Error(t, err)
	})
}

// AppendEventsTx returns, in input order, each event's row id and its
// per-(target, key) seq: the ids are the rows OutboxList shows, and seqs
// continue across transactions and per target.
func TestAppendEventsTxResults(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		d := s.open(t, true)
		ctx := t.Context()
		appendTx := func(evs ...*relay.OutboxEvent) []relay.AppendEventResult {
			t.Helper()
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			res, err := relay.AppendEventsTx(ctx, tx, evs...)
			require.NoError(t, err)
			require.NoError(t, tx.Commit(ctx))
			return res
		}
		ev := func(id, target, key string) *relay.OutboxEvent {
			return &relay.OutboxEvent{ID: id, Target: target, Key: key, Payload: []byte(id)}
		}
		first := appendTx(ev("a1", "t", "a"), ev("b1", "t", "b"), ev("a2", "t", "a"), ev("u1", "u", "a"))
		second := appendTx(ev("b2", "t", "b"), ev("a3", "t", "a"))
		seqs := func(rs []relay.AppendEventResult) []int64 {
			out := []int64{}
			for _, r := range rs {
				out = append(out, r.Seq)
			}
			return out
		}
		require.Equal(t, []int64{1, 1, 2, 1}, seqs(first), "per (target, key), in input order")
		require.Equal(t, []int64{2, 3}, seqs(second), "continued by the next transaction")

		ids := map[string]int64{}
		for _, target := range []string{"t", "u"} {
			rs, err := d.GetExecutor().OutboxList(ctx, &relaydriver.OutboxListParams{Target: target})
			require.NoError(t, err)
			for _, r := range rs {
				ids[r.ID] = r.RowID
			}
		}
		for i, id := range []string{"a1", "b1", "a2", "u1"} {
			require.Equal(t, ids[id], first[i].ID, "%s: the row id", id)
		}
		for i, id := range []string{"b2", "a3"} {
			require.Equal(t, ids[id], second[i].ID, "%s: the row id", id)
		}

		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck
		res, err := relay.AppendEventsTx(ctx, tx)
		require.NoError(t, err)
		require.Empty(t, res)
		require.NotNil(t, res, "no events: an empty slice")
		bad := ev("x1", "t", "a")
		bad.Seq = 9
		_, err = relay.AppendEventsTx(ctx, tx, bad)
		require.ErrorIs(t, err, relaytype.ErrInvalidEvent, "the store assigns Seq")
		_, err = relay.AppendEventsTx(ctx, tx, &relay.OutboxEvent{ID: "x2", Target: "t", Type: relaytype.EventTombstone, Payload: []byte{}})
		require.ErrorIs(t, err, relaytype.ErrInvalidEvent, "a tombstone carries no payload")
		_, err = relay.AppendEventsTx(ctx, tx, ev("a1", "t", "a"))
		require.ErrorIs(t, err, relaytype.ErrConflict)
	})
}

// TestOutboxConcurrentCommitOrder is the visibility-gap proof on real
// PostgreSQL (docs/outbox.md): 8 goroutines × 50 transactions over 20 keys; each
// bumps its key's business counter (UPDATE … RETURNING n, a row lock), holds the
// transaction open for a random jitter, appends an event carrying n, and
// commits or rolls back (~20 %). A dispatcher drains concurrently and at the end.
// Every key's delivered seqs must be exactly 1..count, without gaps or
// duplicates, with n strictly increasing in seq order (commit order), and no
// rolled-back transaction may leave an event.
func TestOutboxConcurrentCommitOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d, err := relaypgx.Open(ctx, testdb.PGSchema(t)+"&pool_max_conns=12")
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	_, err = relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
	require.NoError(t, err)

	const (
		workers = 8
		perW    = 50
		keys    = 20
	)
	ex := d.GetExecutor()
	_, err = ex.Exec(ctx, "CREATE TABLE counter (k text PRIMARY KEY, n bigint NOT NULL)")
	require.NoError(t, err)
	for k := range keys {
		_, err = ex.Exec(ctx, "INSERT INTO counter (k, n) VALUES ($1, 0)", fmt.Sprintf("k%02d", k))
		require.NoError(t, err)
	}

	clock := relayclock.NewFake(t0)
	sink := &recSink{}
	disp, err := relay.NewDispatcher(d, sink, relay.DispatcherConfig{Target: "t", BatchSize: 37, Clock: clock})
	require.NoError(t, err)

	var (
		mu         sync.Mutex
		committed  = map[string]int{} // key → committed transactions
		rolledBack []string           // event ids of rolled-back transactions
		wg         sync.WaitGroup
		errs       = make(chan error, workers)
	)
	jitter := func(r *rand.Rand) {
		// Random hold of 0–3 ms, or a few yields: varies interleavings; it
		// synchronises nothing.
		if r.IntN(2) == 0 {
			tm := time.NewTimer(time.Duration(r.IntN(3000)) * time.Microsecond)
			<-tm.C
			return
		}
		for range r.IntN(50) {
			runtime.Gosched()
		}
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 42))
			for i := range perW {
				if err := func() error {
					key := fmt.Sprintf("k%02d", r.IntN(keys))
					id := fmt.Sprintf("w%d-%d", w, i)
					tx, err := d.Begin(ctx)
					if err != nil {
						return err
					}
					defer tx.Rollback(ctx) //nolint:errcheck
					var n int64
					if err := tx.QueryRow(ctx, "UPDATE counter SET n = n + 1 WHERE k = $1 RETURNING n", key).Scan(&n); err != nil {
						return err
					}
					jitter(r)
					if _, err := relay.AppendEventsTx(ctx, tx, &relay.OutboxEvent{ID: id, Target: "t", Key: key, Payload: []byte(strconv.FormatInt(n, 10))}); err != nil {
						return err
					}
					jitter(r)
					if r.IntN(5) == 0 {
						mu.Lock()
						rolledBack = append(rolledBack, id)
						mu.Unlock()
						return tx.Rollback(ctx)
					}
					if err := tx.Commit(ctx); err != nil {
						return err
					}
					mu.Lock()
					committed[key]++
					mu.Unlock()
					return nil
				}(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// The dispatcher drains while writers commit: it must never see a later seq
	// of a key before an earlier one.
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()
	for running := true; running; {
		select {
		case <-writersDone:
			running = false
		default:
		}
		_, err := disp.Work(ctx)
		require.NoError(t, err)
		runtime.Gosched()
	}
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	_, err = disp.Work(ctx)
	require.NoError(t, err)

	total := 0
	delivered := sink.byKey()
	for k := range keys {
		key := fmt.Sprintf("k%02d", k)
		got := delivered[key]
		require.Len(t, got, committed[key], "key %s: every committed event once", key)
		total += len(got)
		var lastN int64
		for i, sp := range got {
			var seq, n int64
			_, err := fmt.Sscanf(sp, "%d:%d", &seq, &n)
			require.NoError(t, err)
			require.Equal(t, int64(i+1), seq, "key %s: seqs 1..count in delivery order, got %v", key, got)
			require.Greater(t, n, lastN, "key %s: counter values increase with seq (commit order): %v", key, got)
			lastN = n
		}
	}
	require.Equal(t, workers*perW-len(rolledBack), total)
	require.NotEmpty(t, rolledBack)
	rs, err := ex.OutboxList(ctx, &relaydriver.OutboxListParams{Target: "t", Limit: 10000})
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, r := range rs {
		ids[r.ID] = true
		require.Equal(t, relaydriver.OutboxSent, r.State)
	}
	for _, id := range rolledBack {
		require.False(t, ids[id], "rolled-back transaction %s left an event", id)
	}
	t.Logf("%d committed, %d rolled back, %d sink calls", total, len(rolledBack), sink.callCount())
}

// A started dispatcher delivers on Notify and on its poll interval (on the
// fake clock), refuses an unmigrated store, and stops cleanly.
func TestDispatcherStartNotifyStop(t *testing.T) {
	t.Parallel()
	bare, err := relay.NewDispatcher(openSQLite(t, false), &recSink{}, relay.DispatcherConfig{Target: "kafka:msg"})
	require.NoError(t, err)
	require.ErrorIs(t, bare.Start(t.Context()), relaytype.ErrSchemaOutdated)

	b := setupDispatch(t, openSQLite(t, true), relay.DispatcherConfig{PollInterval: time.Minute})
	require.NoError(t, b.disp.Start(b.ctx))
	require.Error(t, b.disp.Start(b.ctx), "starts once")
	delivered := func(n int) func() bool {
		return func() bool {
			b.sink.mu.Lock()
			defer b.sink.mu.Unlock()
			return len(b.sink.delivered) == n
		}
	}
	b.commit("a")
	b.disp.Notify()
	require.Eventually(t, delivered(1), 10*time.Second, time.Millisecond)

	// Without Notify, the poll interval on the clock wakes it (the clock moves
	// a poll interval per check, so whenever the loop parks it is woken).
	b.commit("a")
	require.Eventually(t, func() bool {
		b.clock.Advance(time.Minute)
		return delivered(2)()
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, b.disp.Stop(b.ctx))
	require.NoError(t, b.disp.Stop(b.ctx), "twice is harmless")
	require.Equal(t, []string{"1:a1", "2:a2"}, b.sink.byKey()["a"])
}

// On PostgreSQL a started dispatcher wakes on the commit of an append
// (LISTEN/NOTIFY): with a poll interval of an hour on a clock that never moves,
// only the notification can deliver the event. A rolled-back append sends no
// notification (NOTIFY is transactional), and the next commit still wakes it.
func TestDispatcherWakesOnCommit(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, openPG(t, true), relay.DispatcherConfig{PollInterval: time.Hour})
	require.NoError(t, b.disp.Start(b.ctx))
	t.Cleanup(func() { require.NoError(t, b.disp.Stop(context.Background())) })
	delivered := func(n int) func() bool {
		return func() bool {
			b.sink.mu.Lock()
			defer b.sink.mu.Unlock()
			return len(b.sink.delivered) == n
		}
	}
	// The listener may start after this commit: it wakes the loop once when it
	// starts, so the first event is found either way.
	b.commit("a")
	require.Eventually(t, delivered(1), 10*time.Second, time.Millisecond)

	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	_, err = relay.AppendEventsTx(b.ctx, tx, &relay.OutboxEvent{ID: "rolled-back", Target: "kafka:msg", Topic: "msg", Key: "a"})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(b.ctx))

	for i := 2; i <= 4; i++ {
		b.commit("b")
		require.Eventually(t, delivered(i), 10*time.Second, time.Millisecond, "commit %d must wake the dispatcher", i)
	}
	require.Equal(t, []string{"1:a1"}, b.sink.byKey()["a"], "the rolled-back event was never delivered")
}

// The pipelined dispatcher (a batch settles while the next one is fetched and
// published) under injected sink failures: small batches over many keys, about
// a fifth of the deliveries refused, no backoff, three attempts. Every event
// ends SENT or DEAD (nothing lost, nothing left PENDING), each key's confirmed
// events arrive once each in ascending seq, and — the queue's own rule — an
// event is handed to the sink only when every earlier event of its key is
// already settled in the store (SENT or DEAD) or earlier in the same call: a
// key is never in two batches at once, so a failing head pauses its key.
func TestDispatcherPipelineUnderFailures(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupDispatch(t, s.open(t, true), relay.DispatcherConfig{BatchSize: 7, MaxAttempts: 3, Backoff: []time.Duration{0, 0}})
		const keys, perKey = 12, 15
		for range perKey {
			var ks []string
			for k := range keys {
				ks = append(ks, fmt.Sprintf("k%02d", k))
			}
			b.commit(ks...)
		}
		rng := rand.New(rand.NewPCG(5, 7))
		b.sink.setFail(func(ev relaysink.Event) error {
			if rng.IntN(5) == 0 {
				return errors.New("injected")
			}
			return nil
		})
		var violations []string
		var vmu sync.Mutex
		b.sink.onPublish = func(events []relaysink.Event) {
			rows := b.rows()
			inCall := map[string]bool{}
			for _, ev := range events {
				for seq := int64(1); seq < ev.Seq; seq++ {
					k := fmt.Sprintf("%s/%d", ev.Key, seq)
					if r := rows[k]; r.State == relaydriver.OutboxPending && !inCall[k] {
						vmu.Lock()
						violations = append(violations, fmt.Sprintf("%s/%d published while %s is unsettled", ev.Key, ev.Seq, k))
						vmu.Unlock()
					}
				}
				inCall[fmt.Sprintf("%s/%d", ev.Key, ev.Seq)] = true
			}
		}
		for b.work() > 0 {
		}
		require.Empty(t, violations)
		require.Greater(t, b.sink.callCount(), keys*perKey/7, "many small batches")

		rows := b.rows()
		require.Len(t, rows, keys*perKey)
		sent, dead := 0, 0
		delivered := b.sink.byKey()
		for k := range keys {
			key := fmt.Sprintf("k%02d", k)
			var want []int64
			for seq := int64(1); seq <= perKey; seq++ {
				switch r := rows[fmt.Sprintf("%s/%d", key, seq)]; r.State {
				case relaydriver.OutboxSent:
					sent++
					want = append(want, seq)
				case relaydriver.OutboxDead:
					dead++
					require.Equal(t, 3, r.Attempts)
				default:
					t.Fatalf("%s/%d ended %s", key, seq, r.State)
				}
			}
			var got []int64
			for _, sp := range delivered[key] {
				var seq int64
				_, err := fmt.Sscanf(sp, "%d:", &seq)
				require.NoError(t, err)
				got = append(got, seq)
			}
			require.Equal(t, want, got, "key %s: every SENT event delivered once, in seq order", key)
		}
		require.Equal(t, keys*perKey, sent+dead)
		require.Positive(t, dead, "some events exhausted their attempts")
		require.Equal(t, float64(sent), b.metric("relay_outbox_events_total", "sent"))
		require.Equal(t, float64(dead), b.metric("relay_outbox_events_total", "dead"))
	})
}
