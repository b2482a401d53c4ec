package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// ruleID is the rule of the backlogs (shipbench.ShoreRules[0]: table tank).
const ruleID = "tank"

// receiptPage is how many receipts a node asks for at once.
const receiptPage = 500

// node is one lightweight ship: its transport (its own certificate and
// connections), its backlog and what it has learnt. Only its goroutine
// touches it until the run is over.
type node struct {
	r      *run
	id     string
	tr     *client.Transport
	codec  *wire.Codec
	evs    []*pb.ChangeEvent
	ids    []string
	sent   map[string]bool // the ids
	rnd    *rand.Rand
	jitter time.Duration

	start, caught, lastHeartbeat time.Time
	seq                          uint64
	// notBefore is the earliest time the last 429's Retry-After allows the
	// next request (zero: no 429 pending); limitedAt when it came.
	notBefore, limitedAt time.Time
	// results are the terminal results received, by event id; dup and
	// unknown count receipts received twice or for events not sent.
	results      map[string]string
	dup, unknown int64
}

// newNode makes node i with its backlog of o.Events INSERTs: its own rows
// (ids i×10⁶ + k), one stream numbered 1…Events.
func newNode(r *run, p pki.Dir, i int) (*node, error) {
	id := NodeID(i)
	tc, err := p.ClientTLS("node-" + id)
	if err != nil {
		return nil, fmt.Errorf("fleet: node %s: %w", id, err)
	}
	tr, err := client.NewTransport(r.url, tc, time.Minute)
	if err != nil {
		return nil, err
	}
	codec, err := wire.NewCodec(wire.Config{})
	if err != nil {
		return nil, err
	}
	n := &node{r: r, id: id, tr: tr, codec: codec, results: make(map[string]string, r.o.Events),
		sent: make(map[string]bool, r.o.Events)}
	captured := timestamppb.New(r.o.Clock.Now())
	for k := 1; k <= r.o.Events; k++ {
		key := int64(i)*1_000_000 + int64(k)
		ev := &pb.ChangeEvent{
			SchemaVersion:     "1.0",
			EventId:           fmt.Sprintf("%08x-0000-4000-8000-%012x", i, k),
			OriginNodeId:      id,
			SourceConnectorId: "fleet-capture",
			SourcePartition:   "sync.cdc.fleet.ship.tank/0",
			SourcePosition:    proto.Uint64(uint64(k)),
			SourceSequence:    uint64(k),
			RuleId:            ruleID,
			RuleVersion:       1,
			Database:          "ship",
			Table:             "tank",
			PrimaryKey:        []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: key}}},
			Operation:         pb.Operation_OPERATION_INSERT,
			After: &pb.RowImage{Columns: []*pb.ColumnValue{
				{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: key}},
				{Name: "level", Value: &pb.ColumnValue_IntValue{IntValue: int64(k % 90_000)}},
				{Name: "note", Value: &pb.ColumnValue_StringValue{StringValue: "fleet"}},
			}},
			ResultRevision: fmt.Sprintf("%08x-0001-4000-8000-%012x", i, k),
			CapturedAt:     captured,
			TraceId:        fmt.Sprintf("fleet-%d-%d", i, k),
		}
		n.evs = append(n.evs, ev)
		n.ids = append(n.ids, ev.EventId)
		n.sent[ev.EventId] = true
	}
	return n, nil
}

// run waits the node's jitter, then heartbeats, uploads its backlog and
// pulls receipts until it holds a terminal result for every event.
func (n *node) run(ctx context.Context) error {
	clock := n.r.o.Clock
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-clock.After(n.jitter):
	}
	n.start = clock.Now()
	n.r.started.Add(1)
	if err := n.heartbeat(ctx); err != nil {
		return err
	}
	pending := n.evs
	for len(pending) > 0 {
		chunk := pending[:min(n.r.o.Batch, len(pending))]
		again, err := n.upload(ctx, chunk)
		if err != nil {
			return err
		}
		pending = append(again, pending[len(chunk):]...)
	}
	cursor := ""
	for len(n.results) < len(n.ids) {
		if err := n.heartbeatIfDue(ctx); err != nil {
			return err
		}
		var page *pb.ReceiptPage
		err := n.call(ctx, func(ctx context.Context) (err error) {
			page, err = n.tr.Receipts(ctx, cursor, receiptPage)
			return err
		})
		if err != nil {
			return fmt.Errorf("receipts: %w", err)
		}
		rs, err := wire.ExpandReceipts(page, n.id)
		if err != nil {
			return err
		}
		n.take(rs)
		cursor = page.NextCursor
		if !page.More && len(n.results) < len(n.ids) {
			if err := n.wait(ctx, n.r.o.Poll+time.Duration(n.rnd.Int64N(int64(n.r.o.Poll)))); err != nil {
				return err
			}
		}
	}
	n.caught = clock.Now()
	n.r.caughtUp.Add(1)
	return nil
}

// take records receipts: terminal results of the node's events, each once.
func (n *node) take(rs []*pb.Receipt) {
	for _, rc := range rs {
		switch _, had := n.results[rc.EventId]; {
		case rc.OriginNodeId != n.id || !n.sent[rc.EventId]:
			n.unknown++
		case had:
			n.dup++
		default:
			n.results[rc.EventId] = rc.Result.String()
		}
	}
}

// upload sends one batch until the shore answers it, and returns the
// events it asks to be sent again (RETRYABLE_FAILURE).
func (n *node) upload(ctx context.Context, evs []*pb.ChangeEvent) ([]*pb.ChangeEvent, error) {
	if err := n.heartbeatIfDue(ctx); err != nil {
		return nil, err
	}
	n.seq++
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.EventId
	}
	body, err := n.codec.Encode(&wire.Batch{NodeID: n.id, BatchID: uuid.NewString(), Sequence: n.seq,
		CreatedAt: n.r.o.Clock.Now(), Events: evs})
	if err != nil {
		return nil, err
	}
	var resp *pb.UploadResponse
	if err := n.call(ctx, func(ctx context.Context) (err error) {
		resp, err = n.tr.Upload(ctx, body)
		return err
	}); err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	sts, err := wire.ExpandStatuses(resp, ids)
	if err != nil {
		return nil, err
	}
	var again []*pb.ChangeEvent
	for i, st := range sts {
		switch st.Status {
		case pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED:
		case pb.ReceiveStatus_RECEIVE_STATUS_RETRYABLE_FAILURE:
			again = append(again, evs[i])
		default:
			return nil, fmt.Errorf("event %d of its backlog answered %s (%s, field %q)", i+1, st.Status, st.Reason, st.Field)
		}
	}
	if len(again) > 0 {
		if err := n.wait(ctx, n.r.o.Poll); err != nil {
			return nil, err
		}
	}
	return again, nil
}

func (n *node) heartbeatIfDue(ctx context.Context) error {
	if n.r.o.Clock.Now().Sub(n.lastHeartbeat) < n.r.o.Heartbeat {
		return nil
	}
	return n.heartbeat(ctx)
}

// heartbeat reports the node healthy with its backlog's size.
func (n *node) heartbeat(ctx context.Context) error {
	now := n.r.o.Clock.Now()
	hb := &pb.Heartbeat{ProtocolVersion: wire.CurrentVersion.String(), NodeId: n.id, ClientVersion: "fleet-simulation",
		SentAt: timestamppb.New(now), Overall: pb.HealthState_HEALTH_STATE_HEALTHY, ConfigVersion: 1}
	if err := n.call(ctx, func(ctx context.Context) error {
		_, err := n.tr.Heartbeat(ctx, hb)
		return err
	}); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	n.lastHeartbeat = now
	return nil
}

// call sends one request until it is answered: a 429 is retried after its
// Retry-After plus up to half as much again of jitter (so that the nodes
// refused in the same second do not all come back in the same instant),
// other retryable failures after the client's backoff; anything else is
// returned.
func (n *node) call(ctx context.Context, fn func(context.Context) error) error {
	r, clock := n.r, n.r.o.Clock
	backoff := client.Backoff{Rand: n.rnd}
	for attempt := 0; ; attempt++ {
		now := clock.Now()
		if !n.notBefore.IsZero() {
			if now.Before(n.notBefore) {
				r.early.Add(1)
			} else {
				r.honoured.Add(1)
			}
			r.waitedNS.Add(int64(now.Sub(n.limitedAt)))
			n.notBefore = time.Time{}
		}
		r.requests.Add(1)
		raise(&r.openPeak, r.open.Add(1))
		err := fn(ctx)
		r.open.Add(-1)
		if err == nil {
			r.ok.Add(1)
			return nil
		}
		var re *client.RequestError
		if !errors.As(err, &re) || !re.Retryable {
			return err
		}
		d := backoff.Delay(attempt, err)
		if re.Status == http.StatusTooManyRequests {
			r.limited.Add(1)
			r.sawRetryAfter(re.RetryAfter)
			n.limitedAt = clock.Now()
			n.notBefore = n.limitedAt.Add(re.RetryAfter)
			d = re.RetryAfter + time.Duration(n.rnd.Int64N(int64(re.RetryAfter)/2+1))
		} else {
			r.failed.Add(1)
		}
		if err := n.wait(ctx, d); err != nil {
			return err
		}
	}
}

func (n *node) wait(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-n.r.o.Clock.After(d):
		return nil
	}
}

func (r *run) sawRetryAfter(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.raMin == 0 || d < r.raMin {
		r.raMin = d
	}
	r.raMax = max(r.raMax, d)
}
