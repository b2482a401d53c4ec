// Package etasim checks the backlog ETA against the truth: a node's
// offline backlog is drained over a simulated throttled, noisy link that is
// only allowed in a transfer window, with new capture arriving all along,
// in simulated time. The measuring is the real one — the client's
// TransferMeter, the wire codec's compressed batches, the shore registry's
// heartbeat samples in PostgreSQL and its ETA — so what is checked is the
// estimate an operator would read. At 10 %, 50 % and 90 % of the drain
// the shore's P50 and P90 are recorded, and once the backlog is empty the
// time they predicted is set against the time it took.
package etasim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/flow"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

// Setup migrates d's schema to the shore's, starts a fake clock at start
// and registers node (a development certificate made in dir): what Run
// needs.
func Setup(ctx context.Context, d *relaypgx.Driver, start time.Time, dir, node string) (*shore.Registry, *relayclock.Fake, error) {
	clock := relayclock.NewFake(start)
	if _, err := relaymigrate.Up(ctx, d, clock, shore.MigrationLines(d)...); err != nil {
		return nil, nil, err
	}
	reg := shore.NewRegistry(d.Pool(), clock)
	p := pki.Dir{Path: filepath.Join(dir, "pki"), Clock: clock}
	if _, err := p.InitCA(); err != nil {
		return nil, nil, err
	}
	cert, err := p.IssueNode(node, "")
	if err != nil {
		return nil, nil, err
	}
	if _, err := reg.Add(ctx, cert, shore.Audit{Actor: "etasim", Reason: "ETA accuracy run"}); err != nil {
		return nil, nil, err
	}
	return reg, clock, nil
}

// Options are the simulated node, link and window.
type Options struct {
	// Registry is the shore registry (Setup); Node is registered in it.
	Registry *shore.Registry
	Clock    *relayclock.Fake
	Node     string
	// Seed makes a run repeatable.
	Seed uint64
	// Backlog is how many events wait when the run starts (default
	// 200,000).
	Backlog int
	// LinkRate is the link's capacity in wire bytes per second (default
	// 256: the share of a satellite link a low-priority class gets); each
	// batch goes at a random 50–100 % of it.
	LinkRate float64
	// OutagesPerDay is how many 20-minute link outages a day brings on
	// average (default 2).
	OutagesPerDay float64
	// Window is when transfer is allowed (default "00:00-06:00,12:00-18:00"
	// UTC).
	Window string
	// IncomingPerHour is how many new events are captured per hour, all day
	// (default 600).
	IncomingPerHour float64
	// Heartbeat is the heartbeat interval (default one minute).
	Heartbeat time.Duration
	// Progress, when set, gets a line per simulated hour.
	Progress io.Writer
}

// Point is the estimate at one stage of the drain, against the truth.
type Point struct {
	// Fraction of the starting backlog's events sent when the estimate was
	// read (the first heartbeat at or past it).
	Fraction float64
	At       time.Time
	// Predicted and PredictedP90 are the remaining times the P50 and P90
	// estimates gave; Actual the remaining time the drain took.
	Predicted, PredictedP90, Actual time.Duration
	LowConfidence                   bool
	// Inputs of the estimate.
	RemainingBytes              int64
	Effective, Incoming, Active float64
}

// Error is (Predicted − Actual) / Actual.
func (p Point) Error() float64 {
	return (p.Predicted.Seconds() - p.Actual.Seconds()) / p.Actual.Seconds()
}

// Result is a run's outcome.
type Result struct {
	Points          []Point
	Start, Drained  time.Time
	Events          int
	WireBytes       int64
	Batches, Failed int
}

// Fractions are where the estimate is read.
var Fractions = []float64{0.10, 0.50, 0.90}

// event is one queued change: its size raw (serialized) and the event.
type event struct {
	ev  *pb.ChangeEvent
	raw int
}

// Run drains the backlog and returns the estimates against the truth.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Registry == nil || o.Clock == nil || o.Node == "" {
		return nil, errors.New("etasim: Registry, Clock and Node are required")
	}
	if o.Backlog <= 0 {
		o.Backlog = 200_000
	}
	if o.LinkRate <= 0 {
		o.LinkRate = 256
	}
	if o.OutagesPerDay < 0 {
		return nil, errors.New("etasim: OutagesPerDay must not be negative")
	}
	if o.OutagesPerDay == 0 {
		o.OutagesPerDay = 2
	}
	if o.Window == "" {
		o.Window = "00:00-06:00,12:00-18:00"
	}
	if o.IncomingPerHour <= 0 {
		o.IncomingPerHour = 600
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = time.Minute
	}
	win, err := flow.ParseWindow(o.Window, time.UTC)
	if err != nil {
		return nil, fmt.Errorf("etasim: %w", err)
	}
	codec, err := wire.NewCodec(wire.Config{})
	if err != nil {
		return nil, err
	}
	s := &sim{o: o, rng: mrand.New(mrand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), win: win, codec: codec}
	return s.run(ctx)
}

type sim struct {
	o     Options
	rng   *mrand.Rand
	win   *flow.Window
	codec *wire.Codec
	meter *client.TransferMeter
	queue []event
	seq   int
	now   time.Time
	// nextBeat is the next heartbeat; nextCapture the next new event;
	// outageUntil the end of the current outage.
	nextBeat, nextCapture, nextOutage, outageUntil time.Time
	sentOld, old                                   int
	res                                            Result
	pending                                        []int // indices into Fractions not yet read
}

func (s *sim) run(ctx context.Context) (*Result, error) {
	s.now = s.o.Clock.Now()
	s.res.Start = s.now
	s.meter = client.NewTransferMeter(s.now)
	for range s.o.Backlog {
		s.queue = append(s.queue, s.newEvent(s.now.Add(-time.Duration(s.rng.IntN(30*24))*time.Hour)))
	}
	s.old = len(s.queue)
	s.res.Events = s.old
	s.nextBeat = s.now.Add(s.o.Heartbeat)
	s.nextCapture = s.now.Add(s.gap(s.o.IncomingPerHour))
	s.nextOutage = s.now.Add(s.gap(s.o.OutagesPerDay / 24))
	s.pending = []int{0, 1, 2}
	lastHour := s.now
	for len(s.queue) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.now.Sub(lastHour) >= time.Hour && s.o.Progress != nil {
			lastHour = s.now
			fmt.Fprintf(s.o.Progress, "  %s: %d of %d old events sent, %d queued\n", s.now.Format("Jan 2 15:04"),
				s.sentOld, s.old, len(s.queue))
		}
		if !s.win.Open(s.now) {
			if err := s.advance(ctx, s.win.NextChange(s.now)); err != nil {
				return nil, err
			}
			continue
		}
		if s.now.Before(s.outageUntil) {
			if err := s.attempt(ctx, false); err != nil {
				return nil, err
			}
			continue
		}
		if !s.now.Before(s.nextOutage) {
			s.outageUntil = s.nextOutage.Add(20 * time.Minute)
			s.nextOutage = s.outageUntil.Add(s.gap(s.o.OutagesPerDay / 24))
			continue
		}
		if err := s.attempt(ctx, true); err != nil {
			return nil, err
		}
	}
	s.res.Drained = s.now
	for i := range s.res.Points {
		p := &s.res.Points[i]
		p.Actual = s.res.Drained.Sub(p.At)
	}
	return &s.res, nil
}

// gap is the time to the next of events arriving perHour on average
// (exponential: a Poisson process).
func (s *sim) gap(perHour float64) time.Duration {
	return time.Duration(s.rng.ExpFloat64() / perHour * float64(time.Hour))
}

// advance moves the clock to t, capturing new events and sending the
// heartbeats due on the way.
func (s *sim) advance(ctx context.Context, t time.Time) error {
	for {
		next := t
		if s.nextBeat.Before(next) {
			next = s.nextBeat
		}
		if s.nextCapture.Before(next) {
			next = s.nextCapture
		}
		s.now = next
		if !s.nextCapture.After(s.now) {
			e := s.newEvent(s.now)
			s.queue = append(s.queue, e)
			s.meter.Captured(s.now, e.raw)
			s.nextCapture = s.now.Add(s.gap(s.o.IncomingPerHour))
		}
		if !s.nextBeat.After(s.now) {
			if err := s.heartbeat(ctx); err != nil {
				return err
			}
			s.nextBeat = s.now.Add(s.o.Heartbeat)
		}
		if !s.now.Before(t) {
			return nil
		}
	}
}

// attempt sends the next batch over the link (up) or fails it (an outage:
// the request times out after 30 s, then the uploader backs off 30 s).
func (s *sim) attempt(ctx context.Context, up bool) error {
	n := min(len(s.queue), 500)
	evs := make([]*pb.ChangeEvent, n)
	raw := 0
	for i := range n {
		evs[i] = s.queue[i].ev
		raw += s.queue[i].raw
	}
	s.seq++
	body, err := s.codec.Encode(&wire.Batch{NodeID: s.o.Node, BatchID: wire.FormatUUID(s.uuid()), Sequence: uint64(s.seq),
		CreatedAt: s.now, Events: evs})
	if err != nil {
		return err
	}
	start := s.now
	s.meter.Begin(start)
	if !up {
		if err := s.advance(ctx, start.Add(30*time.Second)); err != nil {
			return err
		}
		s.meter.Sent(start, s.now, int64(len(body)), int64(raw), false, 0, n)
		s.res.Failed++
		return s.advance(ctx, s.now.Add(30*time.Second))
	}
	// The link delivers 50–100 % of its rate, drawn per batch.
	rate := s.o.LinkRate * (0.5 + 0.5*s.rng.Float64())
	d := time.Duration(float64(len(body)) / rate * float64(time.Second))
	if err := s.advance(ctx, start.Add(d)); err != nil {
		return err
	}
	s.meter.Sent(start, s.now, int64(len(body)), int64(raw), true, n, n)
	for i := range n {
		if s.queue[i].ev.CapturedAt.AsTime().Before(s.res.Start) {
			s.sentOld++
		}
	}
	s.queue = s.queue[n:]
	s.res.Batches++
	s.res.WireBytes += int64(len(body))
	return nil
}

// heartbeat reports the node to the shore and, at a pending fraction,
// reads the shore's estimate.
func (s *sim) heartbeat(ctx context.Context) error {
	iv, ratio, measured := s.meter.Take(s.now)
	var events, raw uint64
	for _, e := range s.queue {
		events++
		raw += uint64(e.raw)
	}
	s.o.Clock.Set(s.now)
	hb := &pb.Heartbeat{NodeId: s.o.Node, SentAt: timestamppb.New(s.now), Interval: iv, CompressionRatio: ratio,
		CompressionRatioMeasured: measured, TransferWindow: s.win.String(), TransferWindowZone: "UTC",
		Backlog: []*pb.BacklogSummary{{RuleId: "tank-level", Events: events, RawBytes: raw,
			EstimatedCompressedBytes: uint64(float64(raw) * ratio)}}}
	if err := s.o.Registry.Heartbeat(ctx, s.o.Node, hb); err != nil {
		return err
	}
	for len(s.pending) > 0 && float64(s.sentOld) >= Fractions[s.pending[0]]*float64(s.old) {
		nb, err := s.o.Registry.Backlog(ctx, s.o.Node)
		if err != nil {
			return err
		}
		e := nb.ETA
		p := Point{Fraction: Fractions[s.pending[0]], At: s.now, LowConfidence: e.LowConfidence,
			RemainingBytes: e.RemainingBytes, Effective: e.Effective, Incoming: e.Incoming, Active: e.Active.Seconds()}
		if e.Predictable {
			p.Predicted, p.PredictedP90 = e.P50.Sub(s.now), e.P90.Sub(s.now)
		} else {
			p.Predicted = time.Duration(math.MaxInt64)
		}
		s.res.Points = append(s.res.Points, p)
		s.pending = s.pending[1:]
	}
	return nil
}

// newEvent is a tank-level reading captured at at: an UPDATE of one of a
// thousand tanks, the kind of narrow row a ship's systems write all day.
func (s *sim) newEvent(at time.Time) event {
	tank := s.rng.IntN(1000)
	level := fmt.Sprintf("%d.%03d", s.rng.IntN(2000), s.rng.IntN(1000))
	row := func(l string) *pb.RowImage {
		return &pb.RowImage{Columns: []*pb.ColumnValue{
			{Name: "tank_id", Value: &pb.ColumnValue_IntValue{IntValue: int64(tank)}},
			{Name: "level_m3", Value: &pb.ColumnValue_DecimalValue{DecimalValue: l}},
			{Name: "status", Value: &pb.ColumnValue_StringValue{StringValue: [...]string{"normal", "filling", "draining"}[tank%3]}},
			{Name: "measured_at", Value: &pb.ColumnValue_TimestampValue{TimestampValue: timestamppb.New(at)}},
		}}
	}
	id := s.uuid()
	ev := &pb.ChangeEvent{SchemaVersion: "1.0", EventId: wire.FormatUUID(id), OriginNodeId: s.o.Node, RuleId: "tank-level",
		RuleVersion: 1, Table: "tank_level", Operation: pb.Operation_OPERATION_UPDATE, CapturedAt: timestamppb.New(at),
		PrimaryKey: []*pb.ColumnValue{{Name: "tank_id", Value: &pb.ColumnValue_IntValue{IntValue: int64(tank)}}},
		Before:     row(fmt.Sprintf("%d.%03d", s.rng.IntN(2000), s.rng.IntN(1000))), After: row(level)}
	return event{ev: ev, raw: proto.Size(ev)}
}

// uuid is a random (version 4) UUID from the run's seeded source, so a
// run repeats exactly.
func (s *sim) uuid() [16]byte {
	var id [16]byte
	binary.LittleEndian.PutUint64(id[:8], s.rng.Uint64())
	binary.LittleEndian.PutUint64(id[8:], s.rng.Uint64())
	id[6], id[8] = id[6]&0x0f|0x40, id[8]&0x3f|0x80
	return id
}

// WriteTable writes the run's estimates against the truth.
func WriteTable(w io.Writer, r *Result) {
	fmt.Fprintf(w, "%d events drained in %s (%d batches, %d failed attempts, %d wire bytes)\n", r.Events,
		r.Drained.Sub(r.Start).Round(time.Minute), r.Batches, r.Failed, r.WireBytes)
	fmt.Fprintf(w, "%-6s %-16s %-12s %-12s %-12s %-8s %-10s %-10s %s\n", "drain", "read at", "P50 left", "P90 left",
		"actual left", "error", "effective", "active", "confidence")
	for _, p := range r.Points {
		conf := "ok"
		if p.LowConfidence {
			conf = "low"
		}
		fmt.Fprintf(w, "%-6s %-16s %-12s %-12s %-12s %-8s %-10s %-10s %s\n", fmt.Sprintf("%.0f %%", p.Fraction*100),
			p.At.Format("Jan 2 15:04"), p.Predicted.Round(time.Minute), p.PredictedP90.Round(time.Minute),
			p.Actual.Round(time.Minute), fmt.Sprintf("%+.1f %%", p.Error()*100), fmt.Sprintf("%.0f B/s", p.Effective),
			(time.Duration(p.Active) * time.Second).String(), conf)
	}
}
