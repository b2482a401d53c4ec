package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/flow"
	"github.com/relayhq/relay/relaytype"
)

// Normalizer turns a decoded change into an event or a disposition
// (normalize.Normalizer).
type Normalizer interface {
	Normalize(ctx context.Context, src normalize.Source, ev *cdc.Event, trustedNow time.Time) (normalize.Outcome, error)
}

// Config configures a Client.
type Config struct {
	NodeID string
	// Brokers and TopicPrefix say what to consume: every topic whose name
	// starts with TopicPrefix ("sync.cdc.<logical>.").
	Brokers     []string
	TopicPrefix string
	// Group is the consumer group (default "shipsync-client-<node>").
	Group string
	// KafkaOpts are extra franz-go options (SASL, TLS, …).
	KafkaOpts []kgo.Opt

	Store      *Store
	Decoder    *cdc.Decoder
	Normalizer Normalizer
	Codec      *wire.Codec
	Transport  *Transport
	Clock      relaytype.Clock
	Logger     *slog.Logger

	// MaxBatchEvents and MaxBatchBytes bound one upload (default and
	// maximum: the codec's limits, 500 events / 4 MiB before compression).
	MaxBatchEvents int
	MaxBatchBytes  int
	// Window is how many events of one partition may be read and not yet
	// terminal; reading that partition pauses at it and resumes below half
	// (default 250,000). Events the shore has received take a few dozen
	// bytes each until their receipt (their payloads are let go), so the
	// window can cover minutes of a link that delivers faster than the
	// shore applies.
	Window int
	// MaxTracked bounds the events read and not yet terminal over all
	// partitions: at it, the partitions holding at least half their share
	// pause, and all resume below seven eighths (default 500,000: about
	// 21 MiB of received events waiting for their receipts, 43.5 B each).
	MaxTracked int
	// ReceiptEvery is how often receipts are pulled while events wait for
	// them (default 1 s).
	ReceiptEvery time.Duration
	// Backoff is the retry schedule of failed requests.
	Backoff Backoff
	// UploadRate and UploadBurst meter uploads in bytes on the wire (after
	// compression) per second; 0: unmetered. Burst 0 is one second of rate.
	UploadRate, UploadBurst int64
	// BulkWindow, when set, is when BULK rules may transfer (in the node's
	// time zone); other classes always may.
	BulkWindow *flow.Window
	// Monotonic, when set, returns a monotonic elapsed time (since any
	// fixed start): with it the client detects jumps of the system clock
	// (flow.TrustedClock) and pauses window-only BULK rules after one.
	Monotonic func() time.Duration
	// JumpThreshold is the clock jump that counts (default
	// flow.JumpThresholdDefault).
	JumpThreshold time.Duration
	// HeartbeatEvery is the heartbeat interval until the shore states its
	// own (default 60 s).
	HeartbeatEvery time.Duration
	// Version is the client software version reported in heartbeats.
	Version string
	// LaneInFlight is how many batches of one partition may be in flight
	// at once (default: Uploads): on a long round trip one partition's
	// backlog needs several to keep the link busy.
	LaneInFlight int
	// MaxHeldBytes bounds the events read and not yet received by the
	// shore, by their encoded size: reading pauses at it and resumes below
	// half (default 4 MiB: ≈ 12,000 narrow events, a minute of a 128 KiB/s
	// link; in memory they take about eight times that). One partition
	// holding a quarter of it pauses on its own and resumes below an
	// eighth, so the consumer's fetches serve the other partitions too.
	MaxHeldBytes int64
	// Uploads is how many batches may be in flight at once (default
	// UploadsDefault). The link is kept busy when the batches in flight
	// cover what it carries in a round trip and the shore's answer: at
	// 128 KiB/s and 600 ms that is ≈ 80 KB, five batches of 500 narrow
	// events (≈ 16 KB each), and a few more for the answers' time.
	Uploads int
	// Remote, when set, turns the downlink on: the shore's commands are
	// pulled, applied to the ship's database through it, and acknowledged
	// (docs/shipsync/client.md, "Downlink"). Nil: no commands are pulled.
	Remote RemoteApplier
	// CommandPollEvery is how long the downlink waits after a page that
	// said no more commands are ready (default CommandPollEveryDefault); a
	// page with more after it is followed at once.
	CommandPollEvery time.Duration
	// CommandPage is how many commands one pull asks for (default
	// CommandPageDefault, at most CommandPageMax).
	CommandPage int
	// Barrier, when set, holds records back until it lets them through
	// (see Barrier); nil: nothing is held.
	Barrier Barrier
}

// Defaults of Config.
const (
	WindowDefault             = 250_000
	MaxTrackedDefault         = 500_000
	MaxHeldBytesDefault int64 = 4 << 20
	// UploadsDefault: batches in flight at once (see Config.Uploads).
	UploadsDefault = 8
)

// Stats are the client's counters since start.
type Stats struct {
	Read, Produced, Skipped, Blocked      int64
	Batches, Resends, Uploaded, Received  int64
	Terminal, WireBytes, RawBytes         int64
	UploadFailures, ReceiptPulls, Commits int64
	// The downlink: command pages pulled, commands stored, applied (any
	// result), results the shore acknowledged, failed rounds.
	CommandPulls, CommandsStored, CommandsApplied, CommandsAcked, DownlinkFailures int64
	// DownlinkCheckpoint is the saved downlink platform checkpoint as last
	// read (DownlinkMark.Acked: the next command sequence past those
	// applied and acknowledged; 0 before any).
	DownlinkCheckpoint uint64
}

// Client runs the ship side of the uplink: it consumes the CDC topics,
// normalises each change, keeps the state in SQLite, uploads batches and
// pulls receipts, and commits the consumer group only up to the contiguous
// terminal checkpoint.
type Client struct {
	cfg      Config
	rules    *RuleRuntime // the shore's releases (Build); nil: cfg.Normalizer if it is one
	log      *slog.Logger
	kc       *kgo.Client
	mu       sync.Mutex
	tr       *tracker
	saved    map[TP]Watermark
	wake     chan struct{} // something may be uploaded
	polled   chan polled   // consume → store, unbuffered: a decoded poll waits for the one being stored
	batchSeq uint64
	sched    *flow.Scheduler[*slot]
	lanes    map[string]*partition // scheduler lane → partition
	// committed: what the group acknowledged to this process, per
	// partition (see commitOffsets).
	committed map[TP]int64
	bucket    *flow.TokenBucket
	guard     *flow.TrustedClock
	// xfer measures the uploader for the heartbeats (the shore's ETA);
	// readNew and readRaw count the new events read and their raw bytes
	// (the mean sizes the unread backlog).
	xfer             TransferMeter
	readNew, readRaw atomic.Int64

	read, produced, skipped, blocked  atomic.Int64
	batches, resends, uploaded, recvd atomic.Int64
	terminal, wireBytes, rawBytes     atomic.Int64
	uploadFailures, pulls, commits    atomic.Int64
	commandPulls, commandsStored      atomic.Int64
	commandsApplied, commandsAcked    atomic.Int64
	downFailures                      atomic.Int64
	downCheckpoint                    atomic.Uint64
	// uploadMinor is the shore's latest upload_minor (heartbeat answers):
	// batches go as protocol 1.1 (columns) once it is at least 1.
	uploadMinor atomic.Uint32
	// receiptPage is the shore's receipt_page_max (heartbeat answers; 0
	// until one said it).
	receiptPage atomic.Uint32
	// held are the records a Barrier holds back, per partition, in order
	// (guarded by mu).
	held map[TP][]*kgo.Record
	// afterStates, when set, runs in ingest right after the stored states
	// of the polled events are read (a test seam; nil otherwise).
	afterStates func()
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.NodeID == "":
		return nil, errors.New("client: NodeID is required")
	case cfg.Store == nil || cfg.Decoder == nil || cfg.Normalizer == nil || cfg.Codec == nil || cfg.Transport == nil ||
		cfg.Clock == nil:
		return nil, errors.New("client: Store, Decoder, Normalizer, Codec, Transport and Clock are required")
	case cfg.TopicPrefix == "" || len(cfg.Brokers) == 0:
		return nil, errors.New("client: Brokers and TopicPrefix are required")
	}
	lim := cfg.Codec.Config()
	if cfg.MaxBatchEvents <= 0 || cfg.MaxBatchEvents > lim.MaxEvents {
		cfg.MaxBatchEvents = lim.MaxEvents
	}
	if cfg.MaxBatchBytes <= 0 || cfg.MaxBatchBytes > lim.MaxBytes {
		// Room for the EventList framing around the events.
		cfg.MaxBatchBytes = lim.MaxBytes - 64<<10
	}
	if cfg.Window <= 0 {
		cfg.Window = WindowDefault
	}
	if cfg.MaxTracked <= 0 {
		cfg.MaxTracked = MaxTrackedDefault
	}
	if cfg.Uploads <= 0 {
		cfg.Uploads = UploadsDefault
	}
	if cfg.LaneInFlight <= 0 {
		cfg.LaneInFlight = cfg.Uploads
	}
	if cfg.MaxHeldBytes <= 0 {
		cfg.MaxHeldBytes = MaxHeldBytesDefault
	}
	if cfg.ReceiptEvery <= 0 {
		cfg.ReceiptEvery = time.Second
	}
	if cfg.CommandPollEvery <= 0 {
		cfg.CommandPollEvery = CommandPollEveryDefault
	}
	if cfg.CommandPage <= 0 {
		cfg.CommandPage = CommandPageDefault
	}
	cfg.CommandPage = min(cfg.CommandPage, CommandPageMax)
	if cfg.Group == "" {
		cfg.Group = "shipsync-client-" + cfg.NodeID
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{cfg: cfg, log: cfg.Logger, tr: newTracker(), wake: make(chan struct{}, 1),
		polled: make(chan polled),
		lanes:  map[string]*partition{}, committed: map[TP]int64{}}
	c.xfer.since = cfg.Clock.Now()
	sched, err := flow.NewScheduler(flow.SchedulerConfig[*slot]{BatchItems: cfg.MaxBatchEvents,
		BatchBytes: int64(cfg.MaxBatchBytes), SizeFunc: func(s *slot) int64 { return int64(s.raw) },
		EligibleFunc: c.eligible})
	if err != nil {
		return nil, err
	}
	c.sched = sched
	if cfg.UploadRate < 0 || cfg.UploadBurst < 0 {
		return nil, errors.New("client: UploadRate and UploadBurst must not be negative")
	}
	if cfg.UploadRate > 0 {
		c.bucket = flow.NewTokenBucket(cfg.Clock.Now(), cfg.UploadRate, cmp.Or(cfg.UploadBurst, cfg.UploadRate))
	}
	if cfg.Monotonic != nil {
		if c.guard, err = flow.NewTrustedClock(flow.TrustedClockConfig{Threshold: cfg.JumpThreshold}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	return Stats{Read: c.read.Load(), Produced: c.produced.Load(), Skipped: c.skipped.Load(), Blocked: c.blocked.Load(),
		Batches: c.batches.Load(), Resends: c.resends.Load(), Uploaded: c.uploaded.Load(), Received: c.recvd.Load(),
		Terminal: c.terminal.Load(), WireBytes: c.wireBytes.Load(), RawBytes: c.rawBytes.Load(),
		UploadFailures: c.uploadFailures.Load(), ReceiptPulls: c.pulls.Load(), Commits: c.commits.Load(),
		CommandPulls: c.commandPulls.Load(), CommandsStored: c.commandsStored.Load(),
		CommandsApplied: c.commandsApplied.Load(), CommandsAcked: c.commandsAcked.Load(),
		DownlinkFailures: c.downFailures.Load(), DownlinkCheckpoint: c.downCheckpoint.Load()}
}

// Waiting returns how many events the client tracks that are not yet
// terminal (read, sent or received, or blocked).
func (c *Client) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tr.tracked()
}

// Run consumes, uploads and pulls receipts until ctx ends or the state
// store fails (the process must then stop: its memory is ahead of what is
// saved, and a restart rebuilds from the saved state).
func (c *Client) Run(ctx context.Context) error {
	saved, err := c.cfg.Store.Watermarks(ctx)
	if err != nil {
		return err
	}
	c.saved = saved
	if v, err := c.cfg.Store.meta(ctx, metaBatchSequence); err != nil {
		return err
	} else if v != "" {
		c.batchSeq, _ = strconv.ParseUint(v, 10, 64)
	}
	kc, err := kgo.NewClient(append(c.consumerOpts(), c.cfg.KafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("client: kafka: %w", err)
	}
	c.kc = kc
	defer kc.Close()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	loops := []func(context.Context) error{c.consume, c.store, c.receipts, c.heartbeats}
	for range c.cfg.Uploads {
		loops = append(loops, c.upload)
	}
	if c.cfg.Remote != nil {
		loops = append(loops, c.downlink)
	}
	for _, loop := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loop(ctx); err != nil && ctx.Err() == nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// FetchMaxWait bounds how long the broker may hold one of the client's
// fetches waiting for records. While a fetch is outstanding no other goes
// to that broker, and a fetch names only the partitions not paused when it
// was sent: a partition resumed meanwhile (reading resumes once the
// uploads have drained what was held) waits for the outstanding fetch —
// up to the broker's 5 s default, with the link idle once the held events
// are sent. An idle client asks five times a second instead.
const FetchMaxWait = 200 * time.Millisecond

// consumerOpts are the consumer's options (Config.KafkaOpts come after).
func (c *Client) consumerOpts() []kgo.Opt {
	return append(cdc.GroupOpts(c.cfg.Brokers, c.cfg.Group, c.cfg.TopicPrefix),
		// Fetched records wait in the client's buffers until polled: a
		// small fetch size and one fetch at a time keep that bounded
		// (the next fetch goes out as soon as the last is polled).
		kgo.FetchMaxBytes(1<<20),
		kgo.FetchMaxPartitionBytes(512<<10),
		kgo.MaxConcurrentFetches(1),
		kgo.FetchMaxWait(FetchMaxWait),
	)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// polled is one poll's records with their envelopes decoded, on the way
// from the reading loop (consume) to the one that stores them (store): the
// next poll is fetched and decoded while the last one is normalised and
// written to the state store. Decoding has no side effects, so a record
// decoded and then found read already costs only the work.
type polled struct {
	recs []*kgo.Record
	evs  []*cdc.Event // nil where the record did not decode
	errs []error
}

// consume reads the topics, decodes the records and hands them to store in
// the order read.
func (c *Client) consume(ctx context.Context) error {
	for {
		if recs := c.releaseHeld(); len(recs) > 0 && !c.hand(ctx, recs) {
			return nil
		}
		pctx, cancel := c.pollContext(ctx)
		fs := c.kc.PollRecords(pctx, 2000)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		for _, e := range fs.Errors() {
			if pollTimedOut(e.Err) {
				continue
			}
			c.log.Warn("shipsync client: topic read failed; retrying", "topic", e.Topic, "partition", e.Partition,
				"err", e.Err)
		}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if recs = c.holdBack(recs); len(recs) == 0 {
			continue
		}
		if !c.hand(ctx, recs) {
			return nil
		}
	}
}

// hand decodes recs and passes them to store; false when ctx ended first.
func (c *Client) hand(ctx context.Context, recs []*kgo.Record) bool {
	select {
	case c.polled <- c.decode(recs):
		return true
	case <-ctx.Done():
		return false
	}
}

// decode decodes the envelopes of recs.
func (c *Client) decode(recs []*kgo.Record) polled {
	p := polled{recs: recs, evs: make([]*cdc.Event, len(recs)), errs: make([]error, len(recs))}
	for i, r := range recs {
		m := cdc.Message{Topic: r.Topic, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, cdc.Header{Key: h.Key, Value: h.Value})
		}
		p.evs[i], p.errs[i] = c.cfg.Decoder.Decode(m)
	}
	return p
}

// store turns the decoded polls into tracked events, in the order read.
func (c *Client) store(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-c.polled:
			if err := c.ingest(ctx, p); err != nil {
				return err
			}
			signal(c.wake)
		}
	}
}

// ingested is one record's result before it is saved.
type ingested struct {
	tp  TP
	off int64
	s   *slot // nil: nothing to track
	new bool
}

// ingest normalises a poll's records, stores the new events and the read
// positions in one transaction, then tracks them.
func (c *Client) ingest(ctx context.Context, pl polled) error {
	recs := pl.recs
	now := c.cfg.Clock.Now()
	out := make([]ingested, 0, len(recs))
	ids := make([]string, 0, len(recs))
	c.mu.Lock()
	starts := map[TP]int64{}
	for _, r := range recs {
		tp := TP{r.Topic, r.Partition}
		if _, ok := starts[tp]; !ok {
			starts[tp] = r.Offset
		}
	}
	parts := map[TP]*partition{}
	for tp, start := range starts {
		parts[tp] = c.tr.part(tp, c.saved, start)
	}
	c.mu.Unlock()

	for i, r := range recs {
		tp := TP{r.Topic, r.Partition}
		p := parts[tp]
		c.read.Add(1)
		if r.Offset < p.wm.ReadNext {
			continue // terminal already, or read twice
		}
		in := ingested{tp: tp, off: r.Offset}
		s, err := c.prepare(ctx, r, pl.evs[i], pl.errs[i], now)
		if err != nil {
			return err
		}
		if s != nil {
			s.tp, s.off = tp, r.Offset
			in.s = s
			ids = append(ids, s.id)
		}
		out = append(out, in)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// The stored states are read and what they leave open is tracked under
	// one hold of c.mu: applyReceipts stores a result before it looks for
	// the event here (under c.mu), so a result is either read now (the
	// event is not tracked) or finds the event tracked. Read before the
	// lock, a receipt pulled in between was lost: the event was tracked
	// as waiting for it and held its partition's terminal checkpoint (and
	// the group's commit) for the rest of the process's life.
	states, err := c.cfg.Store.eventStates(ctx, ids)
	if err != nil {
		return err
	}
	if c.afterStates != nil {
		c.afterStates()
	}
	var evs []newEvent
	for i := range out {
		in := &out[i]
		p := parts[in.tp]
		if in.s == nil {
			continue
		}
		s := in.s
		if k, ok := states[s.id]; ok {
			// Produced before a restart: reuse its number and state.
			s.seq = k.Seq
			switch k.State {
			case StateTerminal, StateExpiredApproved:
				in.s = nil
				continue
			case StateReceived:
				s.state, s.ev = StateReceived, nil
			case StateBlocked:
				s.state, s.ev = StateBlocked, nil
			default:
				s.state = StateReady
			}
			if s.ev != nil {
				s.ev.SourceSequence = s.seq
			}
			continue
		}
		if s.state == StateReady && c.expire(s) {
			// Expired by an approval before it took a number.
			in.new = true
			evs = append(evs, s.newEvent())
			s.ev = nil
			continue
		}
		if s.state == StateReady {
			s.seq = p.wm.NextSeq
			s.ev.SourceSequence = s.seq
			if err := c.cfg.Codec.ValidateEvent(s.ev); err != nil {
				// Never number an event the shore would refuse: a refused
				// number would leave a gap in the stream for ever.
				s.seq, s.state, s.reason, s.ev = 0, StateBlocked, "invalid: "+bound(err.Error(), 160), nil
			} else {
				p.wm.NextSeq++
			}
		}
		in.new = true
		evs = append(evs, s.newEvent())
	}
	// Save before tracking: what is tracked in memory is always saved.
	marks := make([]Watermark, 0, len(parts))
	for tp, p := range parts {
		wm := p.wm
		for i := range out {
			if out[i].tp == tp && out[i].off+1 > wm.ReadNext {
				wm.ReadNext = out[i].off + 1
			}
		}
		marks = append(marks, wm)
	}
	if err := c.cfg.Store.recordRead(ctx, evs, marks); err != nil {
		return err
	}
	faultpoint.Hit(faultpoint.ShipsyncClientAfterRead)
	for _, in := range out {
		p := parts[in.tp]
		if in.s == nil {
			p.read(in.off)
			c.skipped.Add(1)
			continue
		}
		if in.s.state == StateExpiredApproved {
			p.read(in.off) // final on read: nothing to send or wait for
			continue
		}
		c.tr.add(p, in.s)
		if in.s.state == StateReady {
			lane := in.tp.String()
			c.lanes[lane] = p
			c.sched.Push(lane, classOf(in.s.priority), in.s, now)
		}
		if in.new {
			if in.s.state == StateBlocked {
				c.blocked.Add(1)
				c.log.Warn("shipsync client: event blocked", "partition", in.tp.String(), "offset", in.off,
					"reason", in.s.reason)
			} else {
				c.produced.Add(1)
				if at := in.s.ev.GetCapturedAt(); at != nil {
					c.xfer.Captured(at.AsTime(), in.s.raw)
				}
				c.readNew.Add(1)
				c.readRaw.Add(int64(in.s.raw))
			}
		}
	}
	c.flow()
	return nil
}

// flow pauses reading the partitions over a bound (the partition's
// window, the payload bytes held, the events tracked) and resumes those
// back under every bound (tracker.flow). Reading pauses, never drops: what
// is not read stays in the topic. The caller holds c.mu, so pauses and
// resumptions reach the consumer in the order they were decided.
func (c *Client) flow() {
	pause, resume := c.tr.flow(bounds{window: c.cfg.Window, held: c.cfg.MaxHeldBytes, tracked: c.cfg.MaxTracked})
	resume = c.unheld(resume)
	if len(pause) > 0 {
		c.kc.PauseFetchPartitions(byTopic(pause))
	}
	if len(resume) > 0 {
		c.kc.ResumeFetchPartitions(byTopic(resume))
	}
}

func byTopic(tps []TP) map[string][]int32 {
	out := map[string][]int32{}
	for _, tp := range tps {
		out[tp.Topic] = append(out[tp.Topic], tp.Partition)
	}
	return out
}

// prepare normalises one record, decoded as ev (or not, err). It returns
// nil for a record that needs no event (skipped), a READY slot with its
// event, or a BLOCKED slot. An error is an infrastructure failure.
func (c *Client) prepare(ctx context.Context, r *kgo.Record, ev *cdc.Event, err error, now time.Time) (*slot, error) {
	src := normalize.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	if err != nil {
		// Not decodable: blocked under an id naming its position, so the
		// checkpoint stops here and the failure is queryable.
		return &slot{id: rawID(src), state: StateBlocked, reason: "undecodable: " + bound(err.Error(), 160),
			priority: int(normalize.PriorityNormal), raw: len(r.Value)}, nil
	}
	o, err := c.cfg.Normalizer.Normalize(ctx, src, ev, now)
	if err != nil {
		return nil, err
	}
	switch o.Disposition {
	case normalize.Skip:
		return nil, nil
	case normalize.Block:
		id := rawID(src)
		if o.Event != nil && o.Event.EventId != "" {
			id = o.Event.EventId
		}
		s := &slot{id: id, state: StateBlocked, reason: o.Reason, priority: int(o.Priority), raw: len(r.Value)}
		if o.Rule != nil {
			s.ruleID, s.ruleVersion = o.Rule.ID, o.Rule.Version
		}
		return s, nil
	}
	s := &slot{id: o.Event.EventId, state: StateReady, ev: o.Event, priority: int(o.Priority), raw: o.RawBytes,
		ruleID: o.Event.RuleId, ruleVersion: o.Event.RuleVersion}
	return s, nil
}

// rawID names an event that could not be normalised, by its position.
func rawID(src normalize.Source) string {
	return "raw:" + src.Topic + "/" + strconv.Itoa(int(src.Partition)) + "@" + strconv.FormatInt(src.Offset, 10)
}

func (s *slot) newEvent() newEvent {
	ne := newEvent{ID: s.id, TP: s.tp, Offset: s.off, Seq: s.seq, RuleID: s.ruleID, RuleVersion: s.ruleVersion,
		Priority: s.priority, State: s.state, Reason: s.reason, RawBytes: s.raw}
	if s.ev != nil {
		ne.CapturedAt = s.ev.CapturedAt.AsTime()
		if s.ev.BusinessOccurredAt != nil {
			ne.BusinessAt = s.ev.BusinessOccurredAt.AsTime()
		}
	}
	return ne
}

// classOf maps a rule priority onto the scheduler's class.
func classOf(priority int) flow.Class {
	switch normalize.Priority(priority) {
	case normalize.PriorityCritical:
		return flow.Critical
	case normalize.PriorityHigh:
		return flow.High
	case normalize.PriorityBulk:
		return flow.Bulk
	default:
		return flow.Normal
	}
}

// eligible says whether lane may be served at now: fewer than
// LaneInFlight batches of it in flight, its head not waiting for a retry, and — for BULK — inside the
// transfer window with a trusted clock. The caller holds c.mu (the
// scheduler calls it from Next).
func (c *Client) eligible(lane string, class flow.Class, now time.Time) bool {
	p := c.lanes[lane]
	if p == nil || p.inFlight >= c.cfg.LaneInFlight || now.Before(p.notBefore) {
		return false
	}
	if class == flow.Bulk && c.cfg.BulkWindow != nil && (!c.cfg.BulkWindow.Open(now) || !c.trusted()) {
		return false
	}
	return true
}

// trusted reports whether the node's clock is trusted (no jump seen since
// the last anchor). The caller holds c.mu.
func (c *Client) trusted() bool { return c.guard == nil || c.guard.Trusted() }

// observeClock feeds the clock-jump guard; it reports a jump once.
func (c *Client) observeClock() {
	if c.guard == nil {
		return
	}
	c.mu.Lock()
	_, jumped := c.guard.Observe(c.cfg.Clock.Now(), c.cfg.Monotonic())
	skew := c.guard.Skew()
	c.mu.Unlock()
	if jumped {
		c.log.Error("shipsync client: the system clock jumped; window-only BULK rules pause until the shore's time "+
			"re-anchors it (next heartbeat)", "skew", skew)
	}
}

// upload sends batches while there is something to send.
func (c *Client) upload(ctx context.Context) error {
	failures, woken := 0, false
	for ctx.Err() == nil {
		c.observeClock()
		now := c.cfg.Clock.Now()
		c.mu.Lock()
		b, ok := c.sched.Next(now)
		var batch []*slot
		var p *partition
		if ok {
			p = c.lanes[b.Lane]
			for _, s := range b.Items {
				// A slot may have been answered meanwhile (a receipt for an
				// event re-read after a restart).
				if s.state == StateReady || s.state == StateRetryWait {
					s.state = stateInFlight
					batch = append(batch, s)
				}
			}
			if len(batch) > 0 {
				p.inFlight++
			}
		}
		waiting := c.sched.Len()
		c.mu.Unlock()
		if len(batch) == 0 {
			if ok {
				continue
			}
			var timer <-chan time.Time
			if waiting > 0 {
				// Something waits for a retry, a window or a batch in flight.
				timer = c.cfg.Clock.After(time.Second)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-c.wake:
			case <-timer:
			}
			continue
		}
		again, err := c.send(ctx, batch)
		c.mu.Lock()
		p.inFlight--
		if err != nil {
			unsent(batch)
			again = batch
		}
		if len(again) > 0 {
			c.sched.Requeue(b.Lane, b.Class, again, now)
		}
		c.mu.Unlock()
		if err == nil {
			failures, woken = 0, false
			continue
		}
		var se *storeError
		if errors.As(err, &se) {
			return se.err
		}
		if ctx.Err() != nil {
			return nil
		}
		c.uploadFailures.Add(1)
		d := c.cfg.Backoff.Delay(failures, err)
		failures++
		var re *RequestError
		if errors.As(err, &re) && !re.Retryable {
			// Authentication, protocol or a refused batch: not to be retried
			// quickly; wait the longest backoff and report.
			d = c.cfg.Backoff.capOr()
			c.log.Error("shipsync client: upload refused; waiting before trying again", "err", err, "wait", d)
		} else {
			c.log.Warn("shipsync client: upload failed; retrying", "err", err, "wait", d)
		}
		if !c.backoff(ctx, d, err, &woken) {
			return nil
		}
	}
	return nil
}

// backoff waits d after a failed request, or less: when the request got no
// answer (the link is down), until another request gets one — once per run
// of failures (*woken; the caller clears it on a success), so a link that
// answers small requests but cuts this loop's does not make it retry at
// the pace of the others. It returns false when ctx ended first.
func (c *Client) backoff(ctx context.Context, d time.Duration, err error, woken *bool) bool {
	var back <-chan struct{}
	if re := (*RequestError)(nil); !*woken && errors.As(err, &re) && re.Status == 0 {
		back = c.cfg.Transport.LinkBack()
	}
	select {
	case <-ctx.Done():
		return false
	case <-c.cfg.Clock.After(d):
	case <-back:
		*woken = true
	}
	return true
}

// storeError wraps a state-store failure, which stops the client.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }

// send uploads one batch and records the answer. It returns the slots the
// shore asked to send again (RETRYABLE_FAILURE), in order; an error means
// the whole batch is to be sent again (or, a *storeError, that the client
// must stop).
func (c *Client) send(ctx context.Context, batch []*slot) ([]*slot, error) {
	evs := make([]*pb.ChangeEvent, len(batch))
	raw := 0
	for i, s := range batch {
		evs[i] = s.ev
		raw += s.raw
	}
	c.mu.Lock()
	c.batchSeq++
	seq := c.batchSeq
	c.mu.Unlock()
	var id [16]byte
	_, _ = rand.Read(id[:])
	id[6], id[8] = id[6]&0x0f|0x40, id[8]&0x3f|0x80
	version := wire.CurrentVersion
	if c.uploadMinor.Load() >= wire.ColumnarVersion.Minor {
		version = wire.ColumnarVersion
	}
	body, err := c.cfg.Codec.Encode(&wire.Batch{ProtocolVersion: version.String(), NodeID: c.cfg.NodeID,
		BatchID: wire.FormatUUID(id), Sequence: seq, CreatedAt: c.cfg.Clock.Now(), Events: evs})
	if err != nil {
		return nil, &storeError{fmt.Errorf("client: encode batch: %w", err)}
	}
	// The attempt is measured whatever way it ends: answered (active time,
	// effective bytes), failed (physical bytes only) or stopped.
	start := c.cfg.Clock.Now()
	c.xfer.Begin(start)
	var wireSent int64
	answered, first := false, 0
	defer func() {
		c.xfer.Sent(start, c.cfg.Clock.Now(), wireSent, int64(raw), answered, first, len(batch))
	}()
	if c.bucket != nil {
		if d := c.bucket.Reserve(c.cfg.Clock.Now(), int64(len(body))); d > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-c.cfg.Clock.After(d):
			}
		}
	}
	c.batches.Add(1)
	for _, s := range batch {
		if s.attempts > 0 {
			c.resends.Add(1)
		}
		s.attempts++
	}
	c.wireBytes.Add(int64(len(body)))
	wireSent = int64(len(body))
	ur, err := c.cfg.Transport.Upload(ctx, body)
	if err != nil {
		// A shore rolled back to 1.0 refuses 1.1 bodies (events_body is
		// empty to it): send 1.0 until a heartbeat answer offers 1.1 again.
		if re := (*RequestError)(nil); version == wire.ColumnarVersion && errors.As(err, &re) && re.Status != 0 &&
			!re.Retryable {
			c.uploadMinor.Store(0)
		}
		return nil, err
	}
	faultpoint.Hit(faultpoint.ShipsyncClientAfterUpload)
	ids := make([]string, len(batch))
	for i, s := range batch {
		ids[i] = s.id
	}
	statuses, err := wire.ExpandStatuses(ur, ids)
	if err != nil {
		return nil, &RequestError{Status: 200, Detail: err.Error(), Err: err}
	}
	if len(statuses) != len(batch) {
		return nil, &RequestError{Status: 200, Detail: fmt.Sprintf("answer has %d statuses for %d events", len(statuses), len(batch))}
	}
	for i, st := range statuses {
		if st.EventId != batch[i].id {
			return nil, &RequestError{Status: 200, Detail: "answer statuses out of order"}
		}
	}
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	res, again, newly := c.answer(batch, statuses, now)
	first = newly
	marks := c.tr.dirtyMarks()
	c.mu.Unlock()
	answered = true
	c.uploaded.Add(int64(len(batch)))
	c.recvd.Add(int64(len(res.Received)))
	c.rawBytes.Add(int64(raw))
	if err := c.cfg.Store.recordSent(ctx, res, seq, marks); err != nil {
		return nil, &storeError{err}
	}
	return again, nil
}

// answer applies an upload's per-event statuses to the batch's slots and
// returns what the store must record, the slots to send again and how many
// were received at their first attempt. A slot whose receipt came while
// its upload was in flight is final: its answer changes nothing (sent
// again, it would wait for a receipt already pulled and hold its
// partition's checkpoint). The caller holds c.mu.
func (c *Client) answer(batch []*slot, statuses []*pb.EventStatus, now time.Time) (sendResult, []*slot, int) {
	res := sendResult{Retry: map[string]string{}, Blocked: map[string]string{}}
	var again, received []*slot
	first := 0
	for i, st := range statuses {
		s := batch[i]
		if s.state == StateTerminal {
			continue
		}
		switch st.Status {
		case pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED:
			res.Received = append(res.Received, s.id)
			received = append(received, s)
			if s.attempts == 1 {
				first++
			}
		case pb.ReceiveStatus_RECEIVE_STATUS_RETRYABLE_FAILURE:
			why := st.Reason.String()
			res.Retry[s.id] = why
			s.state, s.reason = StateRetryWait, why
			again = append(again, s)
		default:
			why := st.Reason.String()
			if st.Field != "" {
				why += " on " + st.Field
			}
			res.Blocked[s.id] = why
			c.tr.blocked(s, why)
			c.blocked.Add(1)
			c.log.Error("shipsync client: event refused by the shore; blocked", "event", s.id, "reason", why)
		}
	}
	if len(again) > 0 {
		// The shore is holding too much of this stream past a gap: the head
		// waits before it goes again.
		c.lanes[batch[0].tp.String()].notBefore = now.Add(c.cfg.Backoff.Delay(again[0].attempts-1, nil))
	}
	c.tr.receivedAll(received)
	c.flow()
	return res, again, first
}

// receipts pulls terminal results, stores them with the cursor, advances
// the terminal checkpoints and commits the consumer group to them.
func (c *Client) receipts(ctx context.Context) error {
	cursor, err := c.cfg.Store.meta(ctx, metaReceiptCursor)
	if err != nil {
		return err
	}
	failures, woken := 0, false
	for ctx.Err() == nil {
		// Paced, never per upload: the shore counts every request of the
		// node against its limits, and a page carries up to 1,000 receipts.
		select {
		case <-ctx.Done():
			return nil
		case <-c.cfg.Clock.After(c.cfg.ReceiptEvery):
		}
		for ctx.Err() == nil {
			page, err := c.cfg.Transport.Receipts(ctx, cursor, c.receiptLimit())
			c.pulls.Add(1)
			var rs []*pb.Receipt
			if err == nil {
				// A compact page carries plain APPLIED results as bare ids.
				if rs, err = wire.ExpandReceipts(page, c.cfg.NodeID); err != nil {
					err = &RequestError{Status: 200, Detail: err.Error(), Retryable: true, Err: err}
				}
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				d := c.cfg.Backoff.Delay(failures, err)
				failures++
				c.log.Warn("shipsync client: receipts pull failed", "err", err, "wait", d)
				if !c.backoff(ctx, d, err, &woken) {
					return nil
				}
				continue
			}
			failures, woken = 0, false
			if err := c.applyReceipts(ctx, rs, page.NextCursor); err != nil {
				return err
			}
			if page.NextCursor != "" {
				cursor = page.NextCursor
			}
			if !page.More || len(rs) == 0 {
				break
			}
		}
		c.commitOffsets(ctx)
	}
	return nil
}

// Receipt pages the client asks for: ReceiptPageOld from a shore that has
// not said its largest (every shore serves that many), else the shore's
// largest up to ReceiptPageMax. One page costs a round trip of the link.
const (
	ReceiptPageOld = 1000
	ReceiptPageMax = 10000
)

// receiptLimit is the receipt page size to ask for.
func (c *Client) receiptLimit() int {
	if n := c.receiptPage.Load(); n > 0 {
		return min(int(n), ReceiptPageMax)
	}
	return ReceiptPageOld
}

// applyReceipts stores the terminal results rs of one page with the page's
// next cursor.
func (c *Client) applyReceipts(ctx context.Context, rs []*pb.Receipt, next string) error {
	if len(rs) > 0 {
		faultpoint.Hit(faultpoint.ShipsyncClientAfterReceipts)
	}
	ts := make([]terminal, 0, len(rs))
	for _, r := range rs {
		if r.OriginNodeId != c.cfg.NodeID {
			continue
		}
		reason := ""
		if r.Reason != pb.RejectReason_REJECT_REASON_UNSPECIFIED {
			reason = r.Reason.String()
		}
		ts = append(ts, terminal{ID: r.EventId, Result: resultName(r.Result), Reason: reason, ConflictID: r.ConflictId})
	}
	// Stored, then tracked: ingest reads the stored states and tracks the
	// events they leave open under one hold of c.mu, so a result stored
	// here is either read there or finds its event tracked below (see
	// ingest). The checkpoints the results move are saved after, in a
	// second transaction; a crash between the two re-reads the events
	// from the older checkpoint and finds them terminal.
	if len(ts) > 0 {
		n, err := c.cfg.Store.recordTerminal(ctx, ts, next, nil)
		if err != nil {
			return err
		}
		c.terminal.Add(int64(n))
		next = ""
	}
	c.mu.Lock()
	for _, t := range ts {
		c.tr.terminal(t.ID)
	}
	c.flow()
	marks := c.tr.dirtyMarks()
	c.mu.Unlock()
	if len(marks) > 0 || next != "" {
		if _, err := c.cfg.Store.recordTerminal(ctx, nil, next, marks); err != nil {
			return err
		}
	}
	c.commitOffsets(ctx)
	return nil
}

// commitTimeout bounds one consumer group commit.
const commitTimeout = 10 * time.Second

// commitOffsets commits the consumer group to every saved terminal
// checkpoint that the group has not acknowledged to this process. The commit follows the saved
// checkpoint, so a life that died between the two, or a commit that
// failed, left the group behind: without a new receipt on that partition
// it would stay behind for ever. The group's offset is a hint for where
// reading resumes; the saved checkpoint is the truth, so a failed commit
// only costs re-reading (and is made again after the next pull).
func (c *Client) commitOffsets(ctx context.Context) {
	// The saved checkpoints, wherever they were saved (receipts, reads of
	// records already terminal, uploads).
	saved, err := c.cfg.Store.Watermarks(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("shipsync client: read checkpoints to commit", "err", err)
		}
		return
	}
	c.mu.Lock()
	offs := map[string]map[int32]kgo.EpochOffset{}
	for tp, w := range saved {
		next := w.TerminalNext
		if done, ok := c.committed[tp]; ok && done >= next {
			continue
		}
		if offs[tp.Topic] == nil {
			offs[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		offs[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: next}
	}
	c.mu.Unlock()
	if len(offs) == 0 {
		return
	}
	faultpoint.Hit(faultpoint.ShipsyncClientBeforeOffsetCommit)
	// Bounded: the group serialises commits, so one that never got an
	// answer would hold back every later one, silently.
	cctx, cancel := context.WithTimeout(ctx, commitTimeout)
	c.kc.CommitOffsets(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		defer cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("shipsync client: consumer group commit failed", "err", err)
			}
			return
		}
		var refused error
		c.mu.Lock()
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				tp := TP{Topic: t.Topic, Partition: p.Partition}
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					refused = fmt.Errorf("%s: %w", tp, err)
					continue
				}
				c.committed[tp] = max(c.committed[tp], offs[t.Topic][p.Partition].Offset)
			}
		}
		c.mu.Unlock()
		if refused != nil {
			c.log.Warn("shipsync client: consumer group commit refused; retrying after the next pull", "err", refused)
		}
		c.commits.Add(1)
	})
}

func resultName(r pb.EventResult) string {
	switch r {
	case pb.EventResult_EVENT_RESULT_APPLIED:
		return "APPLIED"
	case pb.EventResult_EVENT_RESULT_CONFLICT_RECORDED:
		return "CONFLICT_RECORDED"
	case pb.EventResult_EVENT_RESULT_REJECTED:
		return "REJECTED"
	case pb.EventResult_EVENT_RESULT_EXPIRED_APPROVED:
		return "EXPIRED_APPROVED"
	case pb.EventResult_EVENT_RESULT_FORWARDED:
		return "FORWARDED"
	default:
		return r.String()
	}
}

// Parts are what Build assembles a Client from.
type Parts struct {
	NodeID      string
	ConnectorID string
	ReplayEpoch uint32
	Rules       *normalize.RuleSet
	Store       *Store
	Transport   *Transport
	Clock       relaytype.Clock
	Logger      *slog.Logger
	// Types types the columns of schema-less envelopes (see cdc.Config).
	Types cdc.TypeMap
	// Wrap, when set, wraps the normaliser Build makes (the snapshot
	// catch-up filter, snapshot.Filter).
	Wrap func(Normalizer) Normalizer
}

// Build assembles a Client from parts and cfg: the decoder, the
// normaliser (with the store as its applied-command lookup) and the
// codec with their defaults.
func Build(parts Parts, cfg Config) (*Client, error) {
	dec, err := cdc.New(cdc.Config{Types: parts.Types})
	if err != nil {
		return nil, err
	}
	// The rule runtime reads what ran last from the local state file.
	n, err := NewRuleRuntime(context.Background(), normalize.Config{NodeID: parts.NodeID, ConnectorID: parts.ConnectorID,
		ReplayEpoch: parts.ReplayEpoch}, parts.Rules, parts.Store, parts.Store)
	if err != nil {
		return nil, err
	}
	codec, err := wire.NewCodec(wire.Config{})
	if err != nil {
		return nil, err
	}
	cfg.NodeID, cfg.Store, cfg.Transport, cfg.Clock, cfg.Logger = parts.NodeID, parts.Store, parts.Transport, parts.Clock, parts.Logger
	cfg.Decoder, cfg.Normalizer, cfg.Codec = dec, n, codec
	if parts.Wrap != nil {
		cfg.Normalizer = parts.Wrap(n)
	}
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	c.rules = n
	return c, nil
}

// Progress is a one-line summary of the counters.
func (c *Client) Progress() string {
	s := c.Stats()
	line := fmt.Sprintf("read %d, produced %d, skipped %d, blocked %d; uploaded %d in %d batches (%d resent, %d failures), "+
		"received %d, terminal %d; %d B on the wire for %d B of events; waiting %d",
		s.Read, s.Produced, s.Skipped, s.Blocked, s.Uploaded, s.Batches, s.Resends, s.UploadFailures, s.Received,
		s.Terminal, s.WireBytes, s.RawBytes, c.Waiting())
	if c.cfg.Remote == nil {
		return line
	}
	return line + fmt.Sprintf("; downlink: %d commands stored, %d applied, %d acknowledged (%d failures), "+
		"checkpoint %d", s.CommandsStored, s.CommandsApplied, s.CommandsAcked, s.DownlinkFailures, s.DownlinkCheckpoint)
}

// refused reports whether err is the shore refusing a request it read (a
// 4xx other than 429): sending the same again would be refused again.
func refused(err error) bool {
	var re *RequestError
	return errors.As(err, &re) && re.Status >= 400 && re.Status < 500 && re.Status != http.StatusTooManyRequests
}

// heartbeats reports the node's health and backlog to the shore, and
// re-anchors the clock-jump guard on the shore's time.
func (c *Client) heartbeats(ctx context.Context) error {
	every := cmp.Or(c.cfg.HeartbeatEvery, 60*time.Second)
	var cadence backlogCadence
	for {
		backlog, err := c.backlogGroups(ctx, &cadence)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s := c.Stats()
		overall := pb.HealthState_HEALTH_STATE_HEALTHY
		if s.Blocked > 0 {
			overall = pb.HealthState_HEALTH_STATE_BLOCKED
		} else if s.UploadFailures > 0 && s.Received == 0 {
			overall = pb.HealthState_HEALTH_STATE_DEGRADED
		}
		now := c.cfg.Clock.Now()
		iv, ratio, measured := c.xfer.Take(now)
		for _, b := range backlog {
			b.EstimatedCompressedBytes = uint64(float64(b.RawBytes) * ratio)
		}
		hb := &pb.Heartbeat{ProtocolVersion: wire.CurrentVersion.String(), NodeId: c.cfg.NodeID,
			ClientVersion: c.cfg.Version, SentAt: timestamppb.New(now), Overall: overall, Backlog: backlog,
			Interval: iv, CompressionRatio: ratio, CompressionRatioMeasured: measured, UploadRateLimit: float64(c.cfg.UploadRate)}
		if iv.ActiveSeconds > 0 {
			hb.EffectiveBytesPerSecond = float64(iv.EffectiveBytes) / iv.ActiveSeconds
			hb.PhysicalBytesPerSecond = float64(iv.PhysicalBytes) / iv.ActiveSeconds
		}
		if w := c.cfg.BulkWindow; w != nil && !w.Always() {
			hb.TransferWindow, hb.TransferWindowZone = w.String(), w.Location().String()
		}
		if n, err := c.cfg.Store.diskBytes(ctx); err == nil {
			hb.StateDiskBytes = uint64(n)
		}
		uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if hb.UnreadEvents, hb.UnreadRawBytes, err = c.unread(uctx); err != nil && ctx.Err() == nil {
			c.log.Warn("shipsync client: reading the topics' end offsets failed; the unread backlog is not reported", "err", err)
		}
		cancel()
		if err := c.rulesHeartbeat(ctx, hb); err != nil {
			c.log.Warn("shipsync client: expiry reports", "err", err)
		}
		resp, err := c.cfg.Transport.Heartbeat(ctx, hb)
		switch {
		case err != nil && ctx.Err() != nil:
			c.xfer.GiveBack(iv)
			return nil
		case err != nil && refused(err):
			// The shore refused what it read: the same figures would be
			// refused again, so this stretch is not carried into the next.
			c.log.Error("shipsync client: heartbeat refused; its transfer figures are dropped", "err", err)
		case err != nil:
			c.xfer.GiveBack(iv)
			c.log.Warn("shipsync client: heartbeat failed", "err", err)
		default:
			if c.guard != nil && resp.ServerTime != nil {
				c.mu.Lock()
				c.guard.Anchor(resp.ServerTime.AsTime(), c.cfg.Clock.Now(), c.cfg.Monotonic())
				c.mu.Unlock()
			}
			c.uploadMinor.Store(resp.UploadMinor)
			c.receiptPage.Store(resp.ReceiptPageMax)
			if err := c.followConfig(ctx, resp.ConfigVersion); err != nil && ctx.Err() == nil {
				c.log.Warn("shipsync client: config not taken; retried after the next heartbeat", "err", err)
			}
			if resp.HeartbeatIntervalSeconds > 0 {
				every = time.Duration(resp.HeartbeatIntervalSeconds) * time.Second
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.cfg.Clock.After(every):
		}
	}
}
