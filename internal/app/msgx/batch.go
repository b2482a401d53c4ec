package msgx

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

var _ relay.BatchHandler = (*Processor)(nil)

// batchable reports whether m is decided from flight state alone — SCHD
// DNLD/ADFT, FLOP, FDEL — and so can share a batch's snapshot. A SCHD-RESP
// (request guard) and REFD-RESP go through Handle.
func batchable(m *sisxml.Message) bool {
	switch m.Kind {
	case sisxml.KindSchd:
		return m.Schd != nil && m.Schd.Subtype != "RESP"
	case sisxml.KindFlop:
		return m.Flop != nil
	case sisxml.KindFdel:
		return m.Fdel != nil
	}
	return false
}

// HandleBatch applies a run of FIFO heads in one transaction (relay.BatchHandler).
// The flight messages are decided one after another, in order, by the same
// pure decision Handle uses, against one snapshot loaded (with PIPELINE_LOCK)
// in a single round trip for the whole run and updated in memory after each
// decision; the final states, every change notice, each changed flight's
// latest state and the schedule traces are then written once. A message of
// another kind first flushes what is pending and then goes through Handle.
// The first message that does not succeed ends the batch: the engine rolls
// back and runs the prefix again (see relay.BatchHandler), so a rejected
// package never leaves half a batch behind.
func (p *Processor) HandleBatch(ctx context.Context, tx relay.Tx, ds []*relay.Delivery) []relay.Result {
	out := make([]relay.Result, len(ds))
	failAt := func(i int, r relay.Result) []relay.Result {
		for j := i; j < len(out); j++ {
			out[j] = r
		}
		return out
	}
	ptx, err := relaypgx.PgxTx(tx)
	if err != nil {
		return failAt(0, relay.Retry(relaytype.ClassInternal, fmt.Errorf("msgx runs on PostgreSQL: %w", err)))
	}
	b := &batchRun{p: p, tx: tx, ptx: ptx}
	for i, d := range ds {
		m, ok := decodedMessage(d)
		if !ok || !batchable(m) {
			if err := b.flush(ctx); err != nil {
				return failAt(0, infra(err))
			}
			out[i] = p.Handle(ctx, tx, d)
			b.snap = nil // Handle may have changed flights: reload for what follows
			if !out[i].Commits() {
				return failAt(i+1, out[i])
			}
			continue
		}
		if b.snap == nil {
			if err := b.load(ctx, batchableMessages(ds[i:])); err != nil {
				return failAt(0, infra(err))
			}
		}
		out[i] = b.decide(ctx, &call{p: p, tx: tx, ptx: ptx, msg: m, id: d.Message.ID, identity: d.Decoded.Identity,
			now: p.clock.Now()})
		if !out[i].Commits() {
			return failAt(i+1, out[i])
		}
	}
	if err := b.flush(ctx); err != nil {
		return failAt(0, storeFailure(err))
	}
	return out
}

// batchableMessages returns the decoded messages of ds that batchable accepts.
func batchableMessages(ds []*relay.Delivery) []*sisxml.Message {
	var out []*sisxml.Message
	for _, d := range ds {
		if m, ok := decodedMessage(d); ok && batchable(m) {
			out = append(out, m)
		}
	}
	return out
}

// decodedMessage returns the delivery's decoded SIS message.
func decodedMessage(d *relay.Delivery) (*sisxml.Message, bool) {
	if d.Decoded == nil {
		return nil, false
	}
	m, ok := d.Decoded.Value.(*sisxml.Message)
	return m, ok
}

// batchRun is one HandleBatch call's in-memory state.
type batchRun struct {
	p     *Processor
	tx    relay.Tx
	ptx   pgx.Tx
	snap  map[string]*flight.State // current state of every loaded flight, as of the last decision
	base  map[string]*flight.State // what the store holds for those flights in this transaction
	dirty map[string]*flight.State // flights changed since the last flush, final states
	evs   []*relay.OutboxEvent     // KAFKA:msg notices since the last flush, in order
	logs  []*flightstore.SnapLogEntry
}

// load takes PIPELINE_LOCK and loads, in one round trip, what every message
// of msgs needs: the flights they name or point to (MAIDs they carry), the
// current masters of those and all their children — the snapshot
// flight.Decide needs (Involved + children).
func (b *batchRun) load(ctx context.Context, msgs []*sisxml.Message) error {
	set := map[string]struct{}{}
	for _, m := range msgs {
		for _, f := range flight.Involved(m, nil) {
			set[f] = struct{}{}
		}
	}
	snap, err := flightstore.LoadWith(ctx, b.ptx, slices.Sorted(maps.Keys(set)),
		flightstore.LoadOpts{LockPipeline: true, Masters: true, Children: true, Cache: b.p.cache})
	if err != nil {
		return err
	}
	b.snap, b.base = snap, maps.Clone(snap)
	return nil
}

// decide runs the pure decision for c's message against the snapshot and
// records its effects for the next flush.
func (b *batchRun) decide(ctx context.Context, c *call) relay.Result {
	m := c.msg
	fm := flight.Msg{ID: c.id, Kind: m.Meta.Kind(), Now: c.now}
	ch, err := flight.Decide(b.snap, m, fm, b.p.cfg.Flight)
	var perr *flight.ProtocolError
	if errors.As(err, &perr) {
		c.traceRejected(ctx, perr)
		return relay.Dead(relaytype.ClassProtocol, err)
	}
	if err != nil {
		return relay.Retry(relaytype.ClassInternal, err)
	}
	if b.dirty == nil {
		b.dirty = make(map[string]*flight.State)
	}
	for _, s := range ch.Saved {
		b.snap[s.FLID] = s
		b.dirty[s.FLID] = s
	}
	b.evs = append(b.evs, c.notices(ch, fm)...)
	skipped := len(ch.Saved) == 0 && ch.Skipped != ""
	if m.Kind == sisxml.KindSchd {
		outcome := "SUCCEEDED"
		if skipped {
			outcome = "SKIPPED"
		}
		b.logs = append(b.logs, c.snapEntry(len(ch.Saved), outcome))
	}
	if skipped {
		return relay.Skip(ch.Skipped)
	}
	return relay.Succeeded()
}

// flush writes what the decisions since the last flush produced: the final
// state of each changed flight (one save, rewriting only the collections that
// differ from what the store holds), every notice (one append), each changed
// flight's latest state and the schedule traces.
func (b *batchRun) flush(ctx context.Context) error {
	if len(b.dirty) == 0 && len(b.logs) == 0 {
		return nil
	}
	states := make([]*flight.State, 0, len(b.dirty))
	for _, k := range slices.Sorted(maps.Keys(b.dirty)) {
		states = append(states, b.dirty[k])
	}
	if err := flightstore.SaveWith(ctx, b.ptx, states, flightstore.SaveOpts{Base: b.base, Cache: b.p.cache}); err != nil {
		return err
	}
	for _, s := range states {
		b.base[s.FLID] = s
	}
	if _, err := relay.AppendEventsTx(ctx, b.tx, b.evs...); err != nil {
		return err
	}
	if err := upsertLatest(ctx, b.tx, b.p.cfg, states, b.snap); err != nil {
		return err
	}
	for _, e := range b.logs {
		if err := flightstore.AppendSnapLog(ctx, b.ptx, e); err != nil {
			return err
		}
	}
	b.dirty, b.evs, b.logs = nil, nil, nil
	return nil
}

// notices are the KAFKA:msg events of one decision: the event id is the
// message's identity and the flight, the same on every re-run of the message
// (consumers dedupe by it).
func (c *call) notices(ch *flight.Change, fm flight.Msg) []*relay.OutboxEvent {
	events := make([]*relay.OutboxEvent, 0, len(ch.Notices))
	for _, n := range ch.Notices {
		events = append(events, &relay.OutboxEvent{
			ID:     c.identity + "#" + n.FLID,
			Target: TargetMsg, Topic: c.p.cfg.MsgTopic, Key: n.FLID,
			Headers: map[string]string{"msgx-action": n.Action, "msgx-state-version": strconv.FormatInt(n.Version, 10)},
			Payload: flight.NoticeDocument(n, fm),
		})
	}
	return events
}

// upsertLatest writes each state as its flight's KAFKA:schd latest state —
// the full document (a master's with its MAFL from states) or, for a DELETED
// flight, a tombstone.
func upsertLatest(ctx context.Context, tx relay.Tx, cfg Config, saved []*flight.State, states map[string]*flight.State) error {
	// The children of every saved master, from one pass over states (a batch's
	// snapshot holds every flight of its run: one pass per master was
	// quadratic in the batch).
	kids := make(map[string][]*flight.State)
	for _, s := range saved {
		if s.MAID == "" && s.Status != flight.Deleted {
			kids[s.FLID] = nil
		}
	}
	if len(kids) > 0 {
		for _, c := range states {
			if c != nil && c.Status == flight.Active && c.MAID != "" && c.MAID != c.FLID {
				if k, ok := kids[c.MAID]; ok {
					kids[c.MAID] = append(k, c)
				}
			}
		}
	}
	evs := make([]*relay.LatestEvent, len(saved))
	for i, s := range saved {
		ev := &relay.LatestEvent{Target: TargetSchd, Topic: cfg.SchdTopic, Key: s.FLID, Version: s.Version,
			Headers: map[string]string{"msgx-state-version": strconv.FormatInt(s.Version, 10)}}
		if s.Status == flight.Deleted {
			ev.Type = relaysink.Tombstone
		} else {
			ev.Payload = flight.Document(s, kids[s.FLID], cfg.Flight.MessageLocation()) // Document orders them by FLID
		}
		evs[i] = ev
	}
	// One statement for all flights (saved holds each FLID once).
	_, err := relay.UpsertLatestManyTx(ctx, tx, evs)
	return err
}
