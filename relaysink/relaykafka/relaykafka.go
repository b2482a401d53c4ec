// Package relaykafka is the Kafka sink: a relaysink.Sink on franz-go's kgo
// client with the idempotent producer (acks=all). Each event becomes one
// record on Event.Topic with key Event.Key, value Event.Payload (null for a
// tombstone) and the standard relaysink headers followed by Event.Headers.
//
// Publish produces the whole batch asynchronously, so the client packs it
// into one produce request per broker (one record batch per partition), and
// waits for every record's promise, bounded by ctx and Config.ProduceTimeout.
// The idempotent producer keeps each partition in order and deduplicates the
// client's own internal retries; it does not replace the consumer-side dedupe
// by the relay-event-id header.
package relaykafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/relayhq/relay/relaysink"
)

// DefaultProduceTimeout bounds one Publish (and the flush in Close) when
// Config.ProduceTimeout is zero.
const DefaultProduceTimeout = 10 * time.Second

// Config configures a Sink.
type Config struct {
	// Brokers are the seed brokers, "host:port"; required.
	Brokers []string
	// ClientID is the Kafka client id; default "relay".
	ClientID string
	// ProduceTimeout bounds one Publish call (on top of its ctx) and the
	// flush in Close; it is also the broker-side produce request timeout.
	// Default DefaultProduceTimeout.
	ProduceTimeout time.Duration
	// Opts are extra kgo client options (TLS, SASL, a logger, linger, …).
	// They are applied before relaykafka's own, so acks=all and the produce
	// request timeout always hold; New refuses options that turn off the
	// idempotent producer or make it transactional.
	Opts []kgo.Opt
}

// Sink is the Kafka relaysink.Sink. It is safe for concurrent use.
type Sink struct {
	cl       *kgo.Client
	timeout  time.Duration
	maxBatch int32 // the client's record batch limit (ProducerBatchMaxBytes)
	closed   atomic.Bool
}

var _ relaysink.Sink = (*Sink)(nil)

// New returns a Sink for cfg. It does not contact the brokers: the client
// connects on the first Publish.
func New(cfg Config) (*Sink, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("relaykafka: no brokers")
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "relay"
	}
	if cfg.ProduceTimeout < 0 {
		return nil, fmt.Errorf("relaykafka: negative produce timeout %v", cfg.ProduceTimeout)
	}
	if cfg.ProduceTimeout == 0 {
		cfg.ProduceTimeout = DefaultProduceTimeout
	}
	opts := append(slices.Clone(cfg.Opts),
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		// The idempotent producer is kgo's default; acks=all is what it
		// requires and what "confirmed" means here.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(cfg.ProduceTimeout),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("relaykafka: new client: %w", err)
	}
	if v, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); v {
		cl.Close()
		return nil, errors.New("relaykafka: the idempotent producer cannot be disabled")
	}
	if id, _ := cl.OptValue(kgo.TransactionalID).(string); id != "" {
		cl.Close()
		return nil, errors.New("relaykafka: a transactional producer is not supported")
	}
	maxBatch, _ := cl.OptValue(kgo.ProducerBatchMaxBytes).(int32)
	return &Sink{cl: cl, timeout: cfg.ProduceTimeout, maxBatch: maxBatch}, nil
}

// pkg prefixes the sink's errors.
const pkg = "relaykafka"

// Name returns "kafka".
func (s *Sink) Name() string { return "kafka" }

// streamKey is the unit of order: one key on one topic.
type streamKey struct{ topic, key string }

// promised is one record's outcome.
type promised struct {
	i   int
	err error
}

// Publish produces events and waits for the broker's acknowledgements (see
// relaysink.Sink). It returns when every record is acknowledged or failed,
// or when ctx or Config.ProduceTimeout ends; events without an answer by
// then get the context's cause (relaysink.ErrPublishTimeout for
// ProduceTimeout; they may still be written: at least once).
//
// Every error is a *relaysink.PublishError; errors.Is finds the relaysink
// sentinels in it. Publish does not send a key's later events once it knows
// an earlier one failed (relaysink.Event.Validate, too large, ctx done), and
// kgo fails a partition's records in order, so relaysink.EnforceKeyOrder
// rarely changes the result. It matters where a record fails on its own
// while a later record of its key was already handed to kgo: one that kgo
// finds too large though checkSize let it pass, or one whose wait in a full
// buffer ended on ctx; the broker may then have accepted the later event,
// which is reported with relaysink.ErrEarlierFailed.
func (s *Sink) Publish(ctx context.Context, events []relaysink.Event) []error {
	errs := make([]error, len(events))
	if len(events) == 0 {
		return errs
	}
	defer relaysink.FinishResult(pkg, events, errs) // in place, on every return
	if s.closed.Load() {
		for i := range errs {
			errs[i] = relaysink.ErrClosed
		}
		return errs
	}

	// The records' context: cancelled when Publish returns, so records that
	// were never sent are dropped rather than written after the caller gave
	// up on them. (kgo fails a partition's buffered records together, and
	// never fails idempotent records already sent: those finish in the
	// background.)
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, relaysink.ErrPublishTimeout)
	defer cancel()

	// Buffered for every record, so a promise never blocks kgo's promise
	// loop, even after Publish returned.
	done := make(chan promised, len(events))
	failed := map[streamKey]bool{}
	pending := 0
	for i, ev := range events {
		sk := streamKey{ev.Topic, ev.Key}
		if failed[sk] {
			// Known before producing: do not send later events of a
			// failed key at all.
			errs[i] = relaysink.ErrEarlierFailed
			continue
		}
		rec, err := record(ev)
		if err == nil {
			err = s.checkSize(rec)
		}
		if err == nil && ctx.Err() != nil {
			// Do not start records after the caller gave up: one of
			// an earlier key's records may have failed on the ctx.
			err = context.Cause(ctx)
		}
		if err != nil {
			errs[i] = err
			failed[sk] = true
			continue
		}
		pending++
		s.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- promised{i, err} })
	}

	answered := make([]bool, len(events))
wait:
	for pending > 0 {
		select {
		case p := <-done:
			pending--
			answered[p.i] = true
			if p.err != nil {
				errs[p.i] = mapClientErr(p.err)
			}
		case <-ctx.Done():
			break wait
		}
	}
	if pending > 0 {
		cause := context.Cause(ctx)
		for i := range events {
			if errs[i] == nil && !answered[i] {
				errs[i] = cause
			}
		}
	}

	return errs
}

// recordOverhead bounds what a one-record batch adds to the record's key,
// value and header bytes: the 61-byte batch header and the record's varints
// (length, attributes, timestamp and offset deltas, key and value lengths,
// header count).
const recordOverhead = 61 + 5 + 1 + 10 + 5 + 5 + 5 + 5

// checkSize fails a record that cannot fit a record batch on its own, before
// it is produced, so that the later events of its key are not sent either.
// (kgo would fail it alone, after the later ones were buffered.)
func (s *Sink) checkSize(r *kgo.Record) error {
	if s.maxBatch <= 0 {
		return nil
	}
	n := recordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 10 + len(h.Key) + len(h.Value) // two length varints each
	}
	if n > int(s.maxBatch) {
		return fmt.Errorf("%w (about %d bytes, batch limit %d)", kerr.MessageTooLarge, n, s.maxBatch)
	}
	return nil
}

// record builds the Kafka record of ev, or an error wrapping
// relaysink.ErrInvalidEvent.
func record(ev relaysink.Event) (*kgo.Record, error) {
	if err := ev.Validate(); err != nil {
		return nil, err
	}
	headers := make([]kgo.RecordHeader, 0, 3+len(ev.Headers))
	headers = append(headers,
		kgo.RecordHeader{Key: relaysink.HeaderEventID, Value: []byte(ev.ID)},
		kgo.RecordHeader{Key: relaysink.HeaderSeq, Value: strconv.AppendInt(nil, ev.Seq, 10)},
		kgo.RecordHeader{Key: relaysink.HeaderType, Value: []byte(ev.Type)},
	)
	for _, name := range slices.Sorted(maps.Keys(ev.Headers)) {
		switch name {
		case relaysink.HeaderEventID, relaysink.HeaderSeq, relaysink.HeaderType:
			// The standard headers come from the event's fields; a user
			// header of the same name would make them ambiguous.
			continue
		}
		headers = append(headers, kgo.RecordHeader{Key: name, Value: []byte(ev.Headers[name])})
	}
	var value []byte
	if ev.Type == relaysink.Upsert {
		value = ev.Payload
	}
	return &kgo.Record{
		Topic: ev.Topic,
		// Never nil, even for the empty key: kgo hashes a non-nil key to a
		// fixed partition, while a nil key would be spread (no order).
		Key:     []byte(ev.Key),
		Value:   value,
		Headers: headers,
	}, nil
}

// mapClientErr adds relaysink.ErrClosed to kgo's closed-client error.
func mapClientErr(err error) error {
	if errors.Is(err, kgo.ErrClientClosed) {
		return fmt.Errorf("%w: %w", relaysink.ErrClosed, err)
	}
	return err
}

// Close flushes buffered records within ctx (and Config.ProduceTimeout), then
// closes the client; records still unanswered fail. Later Publish calls fail
// every event with relaysink.ErrClosed. Close is idempotent: only the first call
// flushes and can return an error.
func (s *Sink) Close(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, relaysink.ErrPublishTimeout)
	defer cancel()
	err := s.cl.Flush(ctx)
	s.cl.Close()
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
		return fmt.Errorf("relaykafka: close: flush: %w", err)
	}
	return nil
}
