package msgx

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// Outbox targets (seed 000 §1.2 MSG_EVENT.TARGET).
const (
	// TargetMsg is the change-notice target: events in per-FLID commit order.
	TargetMsg = "KAFKA:msg"
	// TargetSchd is the latest-state target: one row per FLID, only forward by
	// STATE_VERSION (seed 000 §8.2).
	TargetSchd = "KAFKA:schd"
)

// Processor is the msgx message processor (seed 000 §5.2 MessageProcessor):
// the engine's Decoder and Handler. Decode maps the raw SIS XML to a
// sisxml.Message with its identity and TYPE-STYP kind; Handle dispatches by
// kind to the coordinators, which take PIPELINE_LOCK in the engine's
// transaction, load the current states, run the pure flight decision and
// write the next states, the events and (through the engine) the terminal
// state and acknowledgement intent in that one transaction (§5.3, INV-17).
//
// It is safe for concurrent use, though msgx runs it from the single FIFO pump.
type Processor struct {
	cfg Config
	// traceDB receives SCHD_SNAP_LOG rows of rejected packages outside the
	// rolled-back business transaction (seed 000 §7.1 step 4: the trace is
	// appended outside it). nil: rejected packages leave no trace.
	traceDB flightstore.Querier
	clock   relaytype.Clock
	log     *slog.Logger
	// cache serves the pipeline's flight loads (nil: every load reads the
	// store); see flightstore.Cache.
	cache *flightstore.Cache
	// sends finds the REQT of a request still PENDING (nil: such a request
	// is not matched).
	sends SendLookup
}

// SendLookup finds the outbound mailbox row of a request's REQT: its id and
// CREATETIME, or found false when it is not there. *Requester implements it.
type SendLookup interface {
	FindSent(ctx context.Context, q *flightstore.Request) (id int64, at time.Time, found bool, err error)
}

// ProcessorDeps are a Processor's collaborators.
type ProcessorDeps struct {
	// Clock stamps processing times (UPDATED_AT, request completion). Required.
	Clock relaytype.Clock
	// Logger receives warnings (never payloads). Default slog.Default().
	Logger *slog.Logger
	// TraceDB, when set, receives the SCHD_SNAP_LOG rows of rejected packages
	// outside the rolled-back transaction (seed 000 §7.1).
	TraceDB flightstore.Querier
	// Sends, when set, lets a response that echoes a request still PENDING —
	// its REQT written to COUTMSGS, the SENT mark lost to a crash or not yet
	// written — find that row and record the send before it is matched
	// (seed 000 §7.2 compensation). Without it such a response is SKIPPED
	// resp-guard:not-sent.
	Sends SendLookup
}

// NewProcessor returns a processor for cfg, which must be valid.
func NewProcessor(cfg Config, deps ProcessorDeps) *Processor {
	p := &Processor{cfg: cfg, clock: deps.Clock, traceDB: deps.TraceDB, sends: deps.Sends, log: cmp.Or(deps.Logger, slog.Default())}
	if cfg.StateCacheFlights > 0 {
		p.cache = flightstore.NewCache(cfg.StateCacheFlights)
	}
	return p
}

var (
	_ relay.Handler = (*Processor)(nil)
	_ relay.Decoder = (*Processor)(nil)
)

// Decode decodes the stored raw content (seed 000 §5.2 steps 1–2): missing
// content and invalid XML are MALFORMED (DEAD at once), what a fixed codec
// could read is CODEC_ERROR (retried).
func (p *Processor) Decode(_ context.Context, m *relaytype.Message) (*relay.Decoded, error) {
	msg, err := sisxml.Decode(m.Payload)
	if err != nil {
		return nil, err
	}
	return &relay.Decoded{
		Identity: sisxml.Identity(msg.Meta, p.cfg.IncludeDayBoundary),
		Kind:     msg.Meta.Kind(),
		Value:    msg,
	}, nil
}

// Handle dispatches one decoded, identity-bound, not-ignored message by kind
// (seed 000 §5.2 step 5).
func (p *Processor) Handle(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
	if d.Decoded == nil {
		return relay.Dead(relaytype.ClassMalformed, errors.New("msgx: message was not decoded"))
	}
	m, ok := d.Decoded.Value.(*sisxml.Message)
	if !ok {
		return relay.Retry(relaytype.ClassInternal, fmt.Errorf("msgx: decoded value is %T", d.Decoded.Value))
	}
	ptx, err := relaypgx.PgxTx(tx)
	if err != nil {
		return relay.Retry(relaytype.ClassInternal, fmt.Errorf("msgx runs on PostgreSQL: %w", err))
	}
	c := &call{p: p, tx: tx, ptx: ptx, msg: m, id: d.Message.ID, identity: d.Decoded.Identity,
		now: p.clock.Now()}
	switch m.Kind {
	case sisxml.KindSchd, sisxml.KindFlop, sisxml.KindFdel:
		if m.Kind == sisxml.KindSchd && m.Schd == nil || m.Kind == sisxml.KindFlop && m.Flop == nil ||
			m.Kind == sisxml.KindFdel && m.Fdel == nil {
			return relay.Dead(relaytype.ClassMalformed, errors.New("msgx: payload missing"))
		}
		return c.flights(ctx)
	case sisxml.KindRef:
		if m.Ref == nil {
			return relay.Dead(relaytype.ClassMalformed, errors.New("msgx: payload missing"))
		}
		return c.reference(ctx)
	default:
		// seed 000 §5.2: a kind no coordinator covers is FAILED(UNSUPPORTED) and
		// retried (a deploy can pick it up), not MALFORMED. Ignored kinds never
		// get here: the engine's ignore rules skip them first.
		return relay.Retry(relaytype.ClassUnsupported, fmt.Errorf("msgx: no coordinator for %s", relaytype.QuoteValue(m.Meta.Kind())))
	}
}

// call is one Handle invocation.
type call struct {
	p        *Processor
	tx       relay.Tx
	ptx      pgx.Tx
	msg      *sisxml.Message
	id       int64
	identity string
	now      time.Time
}

// infra wraps a store error as a retried INFRA failure.
func infra(err error) relay.Result { return relay.Retry(relaytype.ClassInfra, err) }

// flights runs the flight coordinators (ScheduleProcessor, AdftProcessor,
// FlopProcessor, FdelProcessor of seed 000 §2): one transaction under
// PIPELINE_LOCK, full states in, pure decision, full states and events out.
func (c *call) flights(ctx context.Context) relay.Result {
	var req *flightstore.Request
	if c.msg.Kind == sisxml.KindSchd && c.msg.Schd.Subtype == "RESP" {
		if err := flightstore.LockPipeline(ctx, c.ptx); err != nil {
			return infra(err)
		}
		r, reason, err := c.matchRequest(ctx, "SCHD", c.msg.Schd.RQSQ)
		if err != nil {
			return infra(err)
		}
		if r == nil {
			// seed 000 §7.1 G-RESP-GUARD: no open request, expired, or older
			// than its send time — the plan is not updated.
			return relay.Skip("resp-guard:" + reason)
		}
		if perr := c.foreignDay(r); perr != nil {
			c.traceRejected(ctx, perr)
			return relay.Dead(relaytype.ClassProtocol, perr)
		}
		req = r
	}
	// The same path as HandleBatch, for a batch of one: one snapshot read,
	// the pure decision, one write.
	b := &batchRun{p: c.p, tx: c.tx, ptx: c.ptx}
	if err := b.load(ctx, []*sisxml.Message{c.msg}); err != nil {
		return infra(err)
	}
	res := b.decide(ctx, c)
	if !res.Commits() {
		return res
	}
	if err := b.flush(ctx); err != nil {
		return storeFailure(err)
	}
	if req != nil {
		// seed 000 §7.2: the request completes only with the data it asked for,
		// in the same transaction.
		if _, err := flightstore.RequestDone(ctx, c.ptx, req.ID, c.now); err != nil {
			return infra(err)
		}
	}
	return res
}

// foreignDay checks a SCHD-RESP against the operating day its request asked
// for: a record whose SODT falls on another operating day makes the package
// a protocol error (nothing written, the request stays open), as a REFD-RESP
// of another reference type is. Records without SODT keep their flight's day
// and are checked by the package validation.
func (c *call) foreignDay(r *flightstore.Request) *flight.ProtocolError {
	for _, f := range c.msg.Schd.Flights {
		if f.SODT.Presence != sisxml.Set {
			continue
		}
		if day := c.p.cfg.Flight.OperationDay(f.SODT.Value); day != r.Scope {
			return &flight.ProtocolError{FLID: f.FLID,
				Reason: fmt.Sprintf("SCHD-RESP to request %d for operating day %s carries a flight of day %s", r.ID, r.Scope, day)}
		}
	}
	return nil
}

// storeFailure classifies a failed flight write: the store's guard catching a
// decision that breaks INV-12/INV-13 is a bug, not an outage — retried as
// INTERNAL until EXHAUSTED, never forever; anything else is INFRA.
func storeFailure(err error) relay.Result {
	if errors.Is(err, flightstore.ErrStaleVersion) || errors.Is(err, flightstore.ErrOperationDayChanged) {
		return relay.Retry(relaytype.ClassInternal, err)
	}
	return infra(err)
}
