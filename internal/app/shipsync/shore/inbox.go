package shore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// ruleKey is a rule version.
type ruleKey struct {
	id      string
	version uint64
}

// Inbox is the shore's receive inbox in PostgreSQL. It is safe for
// concurrent use.
type Inbox struct {
	reg          *Registry
	d            *relaypgx.Driver
	pool         *pgxpool.Pool
	clock        relaytype.Clock
	codec        *wire.Codec
	engine       *relay.Engine // producer of ApplyQueue
	urgentEngine *relay.Engine // producer of UrgentApplyQueue

	onRelease func()
	maxHeld   int
	urgent    map[string]bool // rule ids released to UrgentApplyQueue

	// insertRetries counts the batches whose plain insert violated a unique
	// index and ran again with ON CONFLICT DO NOTHING (insertEvents).
	insertRetries atomic.Int64
}

// SetUrgentRules names the rules whose events are released to
// UrgentApplyQueue, which the applier runs with workers of its own, so
// they are applied at once however long the ApplyQueue backlog of other
// rules is (a ship's CRITICAL and HIGH rules overtaking a BULK backlog on
// the shore as on the link). A record belongs to one rule, so its events
// stay in one queue and in order — as long as the set does not change
// while the rule has events waiting (change it with the rule drained).
// Every shore process must be given the same set. Set it before serving.
func (in *Inbox) SetUrgentRules(ids []string) {
	in.urgent = make(map[string]bool, len(ids))
	for _, id := range ids {
		in.urgent[id] = true
	}
}

// MaxHeldDefault is how many events a stream may hold past a gap before
// more events past it are refused for now (Inbox.LimitHeld).
const MaxHeldDefault = 100_000

// LimitHeld sets how many events one stream may hold past a gap (default
// MaxHeldDefault). Once a stream holds that many, a new event that would be
// held too is answered RETRYABLE_FAILURE (OVERLOADED, on source_sequence)
// and not stored — the node must send the missing range first — while
// events that fill the gap, and resends, are received as ever. A batch may
// take a stream over the limit by its own events once. Set it before
// serving.
func (in *Inbox) LimitHeld(n int) { in.maxHeld = n }

// OnRelease sets f to be called after a batch is committed (so an applier in
// the same process can look for released events at once). Set it before
// serving.
func (in *Inbox) OnRelease(f func()) { in.onRelease = f }

// NewInbox returns the inbox on d's database; codec validates events (its
// supported majors), clock stamps received_at. Events are accepted only for
// the rule versions the node is allowed (Registry.AllowRule). Received events
// are released to the engine queue ApplyQueue in their streams' order (see
// Receive); the schema must hold MigrationLines.
func NewInbox(d *relaypgx.Driver, codec *wire.Codec, clock relaytype.Clock) (*Inbox, error) {
	engine, err := relay.NewEngine(d, relay.Config{Queue: ApplyQueue, Mode: relay.ModePerKey, Clock: clock})
	if err != nil {
		return nil, fmt.Errorf("shore: inbox: %w", err)
	}
	urgent, err := relay.NewEngine(d, relay.Config{Queue: UrgentApplyQueue, Mode: relay.ModePerKey, Clock: clock})
	if err != nil {
		return nil, fmt.Errorf("shore: inbox: %w", err)
	}
	pool := d.Pool()
	return &Inbox{reg: &Registry{pool: pool, clock: clock}, d: d, pool: pool, codec: codec, clock: clock,
		engine: engine, urgentEngine: urgent, maxHeld: MaxHeldDefault}, nil
}

// ErrStore wraps a failure of the inbox's database: nothing of the batch was
// stored and the sender should retry with backoff.
var ErrStore = errors.New("shore: inbox store unavailable")

// Receive stores the valid events of b, sent by the authenticated node
// sender, and returns the per-event answer. Every accepted event is inserted
// keyed (origin_node_id, event_id) — an event stored before is left as it is
// and answered RECEIVED again — and the answer itself is stored under
// (sender, batch_id), all in one transaction; the answer is returned only
// after it commits. A batch id answered before gets the stored answer
// (replayed true) and nothing is written. An error (wrapping ErrStore) means
// nothing was stored. ctx bounds the transaction.
func (in *Inbox) Receive(ctx context.Context, sender string, b *wire.Batch) (resp *pb.UploadResponse, replayed bool, err error) {
	if resp, err := in.stored(ctx, sender, b.BatchID); err != nil || resp != nil {
		return resp, resp != nil, err
	}
	rules, err := in.reg.Rules(ctx, in.pool, sender)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrStore, err)
	}
	allowed := make(map[ruleKey]bool, len(rules))
	for _, r := range rules {
		allowed[ruleKey{r.RuleId, r.RuleVersion}] = true
	}
	now := in.clock.Now()
	resp = &pb.UploadResponse{BatchId: b.BatchID, ReceivedAt: timestamppb.New(now)}
	var cols eventColumns
	rows := make([]*inboxRow, len(b.Events))
	// event_id (lower case: PostgreSQL's uuid ignores case, so must we) →
	// index of its first occurrence.
	first := make(map[string]int, len(b.Events))
	hashes := make([][]byte, len(b.Events))
	var queued []int // indexes of the events inserted, in batch order
	// burns: the sequence numbers given up by this batch, per stream.
	burns := map[streamKey]burnedSeqs{}
	for i, ev := range b.Events {
		st := &pb.EventStatus{EventId: ev.GetEventId(), Status: pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED}
		resp.Statuses = append(resp.Statuses, st)
		row, reject := in.row(ev, sender, allowed)
		if reject != nil {
			st.Status, st.Reason, st.Field = pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED, reject.Reason, reject.Field
			if reject.Reason == pb.RejectReason_REJECT_REASON_RULE_NOT_AUTHORIZED {
				// A valid event of this node, numbered in its stream, that
				// the node may not send: its number is given up so the
				// stream's later events are not held behind it for ever.
				// (Every check before the rule's passed: the event and its
				// stream fields are valid and its origin is the sender.)
				k := streamKey{ev.SourceConnectorId, ev.SourcePartition}
				if burns[k] == nil {
					burns[k] = burnedSeqs{}
				}
				if _, dup := burns[k][ev.SourceSequence]; !dup {
					burns[k][ev.SourceSequence] = strings.ToLower(ev.EventId)
				}
			}
			continue
		}
		hashes[i] = row.contentHash
		if j, dup := first[strings.ToLower(ev.EventId)]; dup {
			// The same event twice in one batch: answered like its first
			// occurrence when identical, refused when the content differs.
			if !bytes.Equal(hashes[j], hashes[i]) {
				st.Status, st.Reason = pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED, pb.RejectReason_REJECT_REASON_DUPLICATE_IN_BATCH
				st.Field = "event_id"
			} else {
				st.Status, st.Reason, st.Field = resp.Statuses[j].Status, resp.Statuses[j].Reason, resp.Statuses[j].Field
			}
			continue
		}
		first[strings.ToLower(ev.EventId)] = i
		queued = append(queued, i)
		rows[i] = row
	}
	err = pgx.BeginTxFunc(ctx, in.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if len(queued) > 0 || len(burns) > 0 {
			if err := in.store(ctx, tx, sender, b, queued, rows, &cols, first, hashes, burns, resp, now); err != nil {
				return err
			}
		}
		answer, err := proto.Marshal(resp)
		if err != nil {
			return fmt.Errorf("marshal answer: %w", err)
		}
		tag, err := tx.Exec(ctx, stmts["BatchInsert"], sender, b.BatchID, strconv.FormatUint(b.Sequence, 10),
			len(b.Events), answer, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errAnsweredMeanwhile
		}
		return nil
	})
	if errors.Is(err, errAnsweredMeanwhile) {
		// A concurrent request with the same batch id committed first: its
		// answer is the answer.
		resp, err := in.stored(ctx, sender, b.BatchID)
		return resp, true, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrStore, err)
	}
	return resp, false, nil
}

// store inserts the queued events of b (rows, by batch position) in tx and
// releases the ones their streams allow (seed 004 §10.4): the sender's
// streams are locked first, so the release order of a stream is its
// sequence order whatever batches race. An event stored before (not
// inserted) is checked against what is stored.
func (in *Inbox) store(ctx context.Context, tx pgx.Tx, sender string, b *wire.Batch, queued []int, rows []*inboxRow,
	cols *eventColumns, first map[string]int, hashes [][]byte, burns map[streamKey]burnedSeqs, resp *pb.UploadResponse,
	now time.Time) error {
	seqs := make(map[streamKey][]uint64)
	for _, i := range queued {
		k := streamKey{rows[i].connector, rows[i].partition}
		seqs[k] = append(seqs[k], rows[i].seq)
	}
	for k, bs := range burns {
		for s := range bs {
			seqs[k] = append(seqs[k], s)
		}
	}
	streams, err := lockStreams(ctx, tx, sender, seqs, now)
	if err != nil {
		return err
	}
	pre := guessReleased(streams, queued, rows, burns)
	queued = in.refuseOverHeld(streams, queued, rows, pre, b, hashes, resp)
	if len(queued) == 0 {
		return in.settleStreams(ctx, tx, sender, streams, nil, rows, nil, pre, burns, now)
	}
	for _, i := range queued {
		cols.add(rows[i], pre[i])
	}
	byID, err := in.insertEvents(ctx, tx, cols.args(sender, b.BatchID, now), len(queued))
	if err != nil {
		return err
	}
	inserted := make(map[int]int64, len(byID))
	var existing []string
	for _, i := range queued {
		eid := strings.ToLower(b.Events[i].EventId)
		if id, ok := byID[eid]; ok {
			inserted[i] = id
		} else {
			existing = append(existing, eid)
		}
	}
	if len(existing) > 0 {
		if err := in.checkExisting(ctx, tx, sender, existing, first, hashes, resp); err != nil {
			return err
		}
	}
	return in.settleStreams(ctx, tx, sender, streams, queued, rows, inserted, pre, burns, now)
}

// insertEvents inserts a batch's events (EventInsertMany's arguments, n
// events) in tx and returns the inbox id of each event inserted, by event
// id (lower case); an event left out was stored before or its sequence
// number is taken. Most batches bring only events not stored yet, so they
// are first inserted plainly (eventInsertNew) under a savepoint, the three
// statements pipelined in one round trip: that costs PostgreSQL about
// 40 % less CPU per event than ON CONFLICT DO NOTHING (docs/benchmarks.md).
// When the plain insert violates a unique index — an event sent before, a
// sequence number used by another event, a concurrent batch with the same
// events that committed first — it is rolled back to the savepoint and
// EventInsertMany skips those rows.
func (in *Inbox) insertEvents(ctx context.Context, tx pgx.Tx, args []any, n int) (map[string]int64, error) {
	byID := make(map[string]int64, n)
	var id int64
	var eventID string
	read := func(rows pgx.Rows, err error) error {
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, []any{&id, &eventID}, func() error {
			byID[eventID] = id
			return nil
		})
		return err
	}
	b := &pgx.Batch{}
	b.Queue(stmts["EventSavepoint"])
	b.Queue(eventInsertNew, args...)
	b.Queue(stmts["EventSavepointRelease"])
	br := tx.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = read(br.Query())
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if !isUnique(err) {
		return byID, err
	}
	in.insertRetries.Add(1)
	clear(byID)
	// On its own (and without arguments, so by the simple protocol): a
	// batch would first prepare its statements, which the aborted
	// transaction refuses.
	if _, err := tx.Exec(ctx, stmts["EventSavepointRollback"]); err != nil {
		return nil, err
	}
	b = &pgx.Batch{}
	b.Queue(stmts["EventSavepointRelease"])
	b.Queue(stmts["EventInsertMany"], args...)
	br = tx.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		err = read(br.Query())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return byID, err
}

// refuseOverHeld answers RETRYABLE_FAILURE for the queued events that a
// stream at its held limit would have to hold (new, past its gap, not
// released by this batch), with every later copy of them in the batch, and
// returns the queued events left to store.
func (in *Inbox) refuseOverHeld(streams map[streamKey]*streamState, queued []int, rows []*inboxRow, pre map[int]bool,
	b *wire.Batch, hashes [][]byte, resp *pb.UploadResponse) []int {
	kept := queued[:0:0]
	for _, i := range queued {
		r := rows[i]
		st := streams[streamKey{r.connector, r.partition}]
		_, resent := st.held[r.seq]
		if pre[i] || resent || r.seq < st.next || st.heldCount < in.maxHeld {
			kept = append(kept, i)
			continue
		}
		for j, s := range resp.Statuses {
			if j >= i && strings.EqualFold(b.Events[j].GetEventId(), b.Events[i].EventId) && bytes.Equal(hashes[j], hashes[i]) {
				s.Status, s.Reason, s.Field = pb.ReceiveStatus_RECEIVE_STATUS_RETRYABLE_FAILURE,
					pb.RejectReason_REJECT_REASON_OVERLOADED, "source_sequence"
			}
		}
	}
	return kept
}

// eventColumns holds the EventInsertMany arrays: one element per event.
type eventColumns struct {
	origin, eventID, rule, pkText, connector, partition, position, sequence, schema []string
	ruleVersion                                                                     []int64
	pkHash, contentHash, event                                                      [][]byte
	released                                                                        []bool
}

// add appends r, inserted as released when released.
func (c *eventColumns) add(r *inboxRow, released bool) {
	c.released = append(c.released, released)
	c.origin = append(c.origin, r.origin)
	c.eventID = append(c.eventID, r.eventID)
	c.rule = append(c.rule, r.rule)
	c.ruleVersion = append(c.ruleVersion, r.ruleVersion)
	c.pkHash = append(c.pkHash, r.pkHash)
	c.pkText = append(c.pkText, r.pkText)
	c.connector = append(c.connector, r.connector)
	c.partition = append(c.partition, r.partition)
	c.position = append(c.position, r.position)
	c.sequence = append(c.sequence, r.sequence)
	c.schema = append(c.schema, r.schema)
	c.contentHash = append(c.contentHash, r.contentHash)
	c.event = append(c.event, r.event)
}

// inboxRow is one event as the inbox stores it.
type inboxRow struct {
	origin, eventID, rule, pkText, connector, partition string
	// position and sequence are uint64 in decimal (numeric(20) columns).
	position, sequence, schema string
	seq                        uint64
	ruleVersion                int64
	pkHash, contentHash, event []byte
}

// args are EventInsertMany's parameters.
func (c *eventColumns) args(sender, batchID string, now any) []any {
	return []any{c.origin, c.eventID, sender, batchID, c.rule, c.ruleVersion, c.pkHash, c.pkText, c.connector,
		c.partition, c.position, c.sequence, c.schema, c.contentHash, c.event, now, c.released}
}

// checkExisting compares the events of ids, stored before, with the ones
// received now: the same content is RECEIVED (a resend), other content under
// the same id is refused — events are immutable, so the node reused an id —
// and an event not stored under its id at all was refused by its stream's
// sequence number, used already by another event. Later copies of such an event in the batch get the same status. ids are
// lower case.
func (in *Inbox) checkExisting(ctx context.Context, tx pgx.Tx, sender string, ids []string, first map[string]int,
	hashes [][]byte, resp *pb.UploadResponse) error {
	rows, err := tx.Query(ctx, stmts["EventHashes"], sender, ids)
	if err != nil {
		return err
	}
	stored := make(map[string][]byte, len(ids))
	var id string
	var h []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &h}, func() error {
		stored[id] = bytes.Clone(h)
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		i := first[id]
		h, ok := stored[id]
		field := "event_id"
		switch {
		case ok && bytes.Equal(h, hashes[i]):
			continue // a resend: RECEIVED
		case !ok:
			// Not stored under its id, yet not inserted: its stream already
			// has another event with its sequence number.
			field = "source_sequence"
		}
		for j, st := range resp.Statuses {
			if strings.EqualFold(st.EventId, id) && st.Status == pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED && bytes.Equal(hashes[j], hashes[i]) {
				st.Status, st.Reason, st.Field = pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED,
					pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, field
			}
		}
	}
	return nil
}

var errAnsweredMeanwhile = errors.New("batch answered meanwhile")

// stored returns the stored answer of (node, batchID), or nil.
func (in *Inbox) stored(ctx context.Context, node, batchID string) (*pb.UploadResponse, error) {
	var raw []byte
	err := in.pool.QueryRow(ctx, stmts["BatchAnswer"], node, batchID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read batch answer: %w", ErrStore, err)
	}
	var resp pb.UploadResponse
	if err := proto.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("shore: stored answer of batch %s: %w", batchID, err)
	}
	return &resp, nil
}

// row validates ev and returns its inbox row, or the reason it
// is refused for good.
func (in *Inbox) row(ev *pb.ChangeEvent, sender string, allowed map[ruleKey]bool) (*inboxRow, *wire.FieldError) {
	if err := in.codec.ValidateEvent(ev); err != nil {
		var fe *wire.FieldError
		if errors.As(err, &fe) {
			return nil, fe
		}
		return nil, &wire.FieldError{Field: "event", Problem: "invalid", Reason: pb.RejectReason_REJECT_REASON_INVALID_FIELD}
	}
	// seed 004 §17.1: a node uploads only what it produced; relaying other
	// nodes' events needs an authorisation this shore does not have yet.
	if ev.OriginNodeId != sender {
		return nil, &wire.FieldError{Field: "origin_node_id", Problem: "not the authenticated node",
			Reason: pb.RejectReason_REJECT_REASON_ORIGIN_NOT_AUTHORIZED}
	}
	// seed 004 §10.2, §17.1: the shore checks that the node may use the
	// event's rule, at that version.
	if !allowed[ruleKey{ev.RuleId, ev.RuleVersion}] {
		return nil, &wire.FieldError{Field: "rule_id", Problem: "rule version not allowed for this node",
			Reason: pb.RejectReason_REJECT_REASON_RULE_NOT_AUTHORIZED}
	}
	if ev.RuleVersion > math.MaxInt64 {
		return nil, &wire.FieldError{Field: "rule_version", Problem: "out of range",
			Reason: pb.RejectReason_REJECT_REASON_INVALID_FIELD}
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
	if err != nil {
		return nil, &wire.FieldError{Field: "event", Problem: "not serializable", Reason: pb.RejectReason_REJECT_REASON_INVALID_FIELD}
	}
	keyHash, keyText, err := RecordKey(ev.PrimaryKey)
	if err != nil {
		return nil, &wire.FieldError{Field: "primary_key", Problem: "not serializable", Reason: pb.RejectReason_REJECT_REASON_INVALID_FIELD}
	}
	sum := sha256.Sum256(raw)
	return &inboxRow{
		origin: ev.OriginNodeId, eventID: ev.EventId, rule: ev.RuleId, ruleVersion: int64(ev.RuleVersion),
		pkHash: keyHash, pkText: keyText, connector: ev.SourceConnectorId, partition: ev.SourcePartition,
		position: strconv.FormatUint(ev.GetSourcePosition(), 10), sequence: strconv.FormatUint(ev.SourceSequence, 10), seq: ev.SourceSequence,
		schema: ev.SchemaVersion, contentHash: sum[:], event: raw,
	}, nil
}

// InboxCount returns how many events originating at node the inbox holds.
func (in *Inbox) InboxCount(ctx context.Context, node string) (int, error) {
	var n int
	err := in.pool.QueryRow(ctx, stmts["NodeInboxCount"], node).Scan(&n)
	return n, err
}
