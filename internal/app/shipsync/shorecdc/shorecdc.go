// Package shorecdc is the shore's CDC consumer: it reads the shore
// database's own captured changes (Debezium MySQL envelopes over the Kafka
// API, from Debezium or from the trigger capture of package capture),
// normalises them under the shore's rules (normalize with SideShore), and
// stores each change that needs syncing as a durable downlink command per
// ship node that syncs its rule (shore.Downlink.Forward), with the event's
// result FORWARDED.
//
// The rules it keeps:
//
//   - A change the platform itself wrote — the shore applier's write of an
//     uplink event, recognised by the _sync_event_id it stamped and the
//     inbox holding that event at the written revision — produces no
//     command: only the position moves (loop suppression). So does a
//     tombstone or a table no rule selects.
//   - A change that cannot be forwarded (undecodable, unknown origin, an
//     invalid event) is stored BLOCKED with its reason, and the consumer
//     group's committed position never passes it: reading goes on, the
//     failure is queryable, nothing is dropped.
//   - Commands are stored before the position is committed, and a position
//     handled before is recognised by its row, so a crash anywhere repeats
//     work but never duplicates or loses a command.
package shorecdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/relaytype"
)

// Config configures a Consumer.
type Config struct {
	// Brokers and TopicPrefix say what to consume: every topic whose name
	// starts with TopicPrefix.
	Brokers     []string
	TopicPrefix string
	// Group is the consumer group (default "shipsync-shore-cdc").
	Group string
	// KafkaOpts are extra franz-go options.
	KafkaOpts []kgo.Opt
	// Downlink stores the commands. Required.
	Downlink *shore.Downlink
	// Decoder decodes envelopes; Normalizer applies the shore's rules
	// (NewNormalizer builds one). Required.
	Decoder    *cdc.Decoder
	Normalizer Normalizer
	// Clock gives the trusted now of dataset windows. Required.
	Clock  relaytype.Clock
	Logger *slog.Logger
}

// Normalizer is normalize.Normalizer's method the consumer uses.
type Normalizer interface {
	Normalize(ctx context.Context, src normalize.Source, ev *cdc.Event, trustedNow time.Time) (normalize.Outcome, error)
}

// NewNormalizer returns the shore's normaliser: rules on the shore side,
// origin nodeID (the shore's node id, which the capture writes into
// _sync_origin on local writes), the platform's own writes recognised
// through the inbox and the conflict decisions.
func NewNormalizer(nodeID, connectorID string, epoch uint32, rules *normalize.RuleSet, d *shore.Downlink) (*normalize.Normalizer, error) {
	return normalize.New(normalize.Config{NodeID: nodeID, ConnectorID: connectorID, ReplayEpoch: epoch,
		Side: normalize.SideShore}, rules, inboxLookup{d})
}

// inboxLookup finds what the platform stamped into a row: an uplink event
// the applier wrote or a decision the arbiter wrote.
type inboxLookup struct{ d *shore.Downlink }

func (l inboxLookup) Applied(ctx context.Context, origin, eventID string) (normalize.AppliedCommand, bool, error) {
	op, rev, found, err := l.d.AppliedChange(ctx, origin, eventID)
	if err != nil || !found {
		return normalize.AppliedCommand{}, false, err
	}
	return normalize.AppliedCommand{Operation: op, ResultRevision: rev}, true, nil
}

// Stats count what the consumer did since it started.
type Stats struct {
	Read, Forwarded, Skipped, Blocked, Commands, Commits int64
	// Failures: attempts to store a poll's changes that failed and were
	// retried.
	Failures int64
}

// Consumer is the shore CDC consumer.
type Consumer struct {
	cfg Config
	log *slog.Logger
	kc  *kgo.Client

	mu sync.Mutex
	// blocked is the first blocked offset per "topic/partition".
	blocked map[string]int64

	read, forwarded, skipped, blockedN, commands, commits, failures atomic.Int64
}

// New returns a Consumer for cfg.
func New(cfg Config) (*Consumer, error) {
	switch {
	case cfg.Downlink == nil || cfg.Decoder == nil || cfg.Normalizer == nil || cfg.Clock == nil:
		return nil, errors.New("shorecdc: Downlink, Decoder, Normalizer and Clock are required")
	case len(cfg.Brokers) == 0 || cfg.TopicPrefix == "":
		return nil, errors.New("shorecdc: Brokers and TopicPrefix are required")
	}
	if cfg.Group == "" {
		cfg.Group = "shipsync-shore-cdc"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Consumer{cfg: cfg, log: cfg.Logger}, nil
}

// Stats returns the counters.
func (c *Consumer) Stats() Stats {
	return Stats{Read: c.read.Load(), Forwarded: c.forwarded.Load(), Skipped: c.skipped.Load(),
		Blocked: c.blockedN.Load(), Commands: c.commands.Load(), Commits: c.commits.Load(), Failures: c.failures.Load()}
}

// Progress is a one-line summary of the counters.
func (c *Consumer) Progress() string {
	s := c.Stats()
	return fmt.Sprintf("shore cdc: read %d, forwarded %d (%d commands), skipped %d, blocked %d, store failures retried %d",
		s.Read, s.Forwarded, s.Commands, s.Skipped, s.Blocked, s.Failures)
}

// commitTimeout bounds one consumer group commit.
const commitTimeout = 10 * time.Second

// Run consumes until ctx ends. Records whose storing fails are handled
// again after a pause (RetryMinDefault, doubling to RetryMaxDefault on the
// consumer's clock), which stored changes make safe; Run returns an error
// only when it cannot start (the blocked positions unreadable, the Kafka
// client refused).
func (c *Consumer) Run(ctx context.Context) error {
	blocked, err := c.cfg.Downlink.BlockedFirst(ctx)
	if err != nil {
		return err
	}
	c.blocked = blocked
	opts := append(cdc.GroupOpts(c.cfg.Brokers, c.cfg.Group, c.cfg.TopicPrefix), c.cfg.KafkaOpts...)
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("shorecdc: kafka: %w", err)
	}
	c.kc = kc
	defer kc.Close()
	for {
		fs := kc.PollRecords(ctx, 1000)
		if ctx.Err() != nil {
			return nil
		}
		for _, e := range fs.Errors() {
			c.log.Warn("shipsync shore cdc: topic read failed; retrying", "topic", e.Topic, "partition", e.Partition,
				"err", e.Err)
		}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if len(recs) == 0 {
			continue
		}
		// A failure to store (PostgreSQL restarting, a deadlock, a
		// connection cut) stops nothing: the same records are handled
		// again after a pause, and what was stored before is recognised.
		for wait := RetryMinDefault; ; wait = min(2*wait, RetryMaxDefault) {
			err := c.handle(ctx, recs)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				break
			}
			c.failures.Add(1)
			c.log.Warn("shipsync shore cdc: storing the changes failed; retrying", "records", len(recs), "retry_in", wait,
				"err", wire.Bound(err.Error(), 300))
			select {
			case <-ctx.Done():
				return nil
			case <-c.cfg.Clock.After(wait):
			}
		}
	}
}

// The pause before records whose storing failed are handled again: the
// first, doubled on each failure in a row up to the last.
const (
	RetryMinDefault = 100 * time.Millisecond
	RetryMaxDefault = 10 * time.Second
)

// handle turns one poll's records into stored changes, then commits the
// positions.
func (c *Consumer) handle(ctx context.Context, recs []*kgo.Record) error {
	now := c.cfg.Clock.Now()
	var changes []shore.ShoreChange
	next := map[string]map[int32]int64{}
	skipped := 0
	for _, r := range recs {
		ch, err := c.prepare(ctx, r, now)
		if err != nil {
			return err
		}
		if ch != nil {
			changes = append(changes, *ch)
		} else {
			skipped++
		}
		if next[r.Topic] == nil {
			next[r.Topic] = map[int32]int64{}
		}
		next[r.Topic][r.Partition] = r.Offset + 1
	}
	res, err := c.cfg.Downlink.Forward(ctx, changes)
	if err != nil {
		return err
	}
	faultpoint.Hit(faultpoint.ShipsyncShoreCDCAfterForward)
	c.read.Add(int64(len(recs)))
	c.skipped.Add(int64(skipped))
	c.forwarded.Add(int64(res.Forwarded))
	c.blockedN.Add(int64(res.Blocked))
	c.commands.Add(int64(res.Commands))
	c.mu.Lock()
	for _, ch := range changes {
		if ch.Blocked {
			k := ch.Topic + "/" + strconv.Itoa(int(ch.Partition))
			if b, ok := c.blocked[k]; !ok || ch.Offset < b {
				c.blocked[k] = ch.Offset
			}
		}
	}
	offs := map[string]map[int32]kgo.EpochOffset{}
	for t, ps := range next {
		for p, o := range ps {
			if b, ok := c.blocked[t+"/"+strconv.Itoa(int(p))]; ok && b < o {
				o = b
			}
			if offs[t] == nil {
				offs[t] = map[int32]kgo.EpochOffset{}
			}
			offs[t][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
	}
	c.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	var cerr error
	c.kc.CommitOffsetsSync(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					cerr = fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
				}
			}
		}
	})
	if cerr != nil {
		// Not fatal: the changes are stored; a restart before the next
		// commit reads them again and finds them.
		c.log.Warn("shipsync shore cdc: consumer group commit failed; retrying after the next poll", "err", cerr)
		return nil
	}
	c.commits.Add(1)
	return nil
}

// prepare decodes and normalises one record: nil when it needs no row
// (skipped), a forwarded or blocked change otherwise. An error is an
// infrastructure failure.
func (c *Consumer) prepare(ctx context.Context, r *kgo.Record, now time.Time) (*shore.ShoreChange, error) {
	ch := &shore.ShoreChange{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	m := cdc.Message{Topic: r.Topic, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, cdc.Header{Key: h.Key, Value: h.Value})
	}
	ev, err := c.cfg.Decoder.Decode(m)
	if err != nil {
		ch.Blocked, ch.Reason, ch.Detail = true, "undecodable", err.Error()
		return ch, nil
	}
	o, err := c.cfg.Normalizer.Normalize(ctx, normalize.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, ev, now)
	if err != nil {
		return nil, err
	}
	if o.Rule != nil {
		ch.RuleID, ch.RuleVersion = o.Rule.ID, o.Rule.Version
	}
	switch o.Disposition {
	case normalize.Skip:
		return nil, nil
	case normalize.Block:
		ch.Blocked, ch.Reason, ch.Detail, ch.Event = true, o.Reason, o.Detail, o.Event
		return ch, nil
	}
	ch.Event = o.Event
	return ch, nil
}
