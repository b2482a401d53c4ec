// Package relayadmin is relay's operator surface over HTTP: JSON endpoints that
// show a queue's backlog, DEAD messages, the outbox DLQ, the intake cursor
// and holes, and that replay messages and reopen abandoned acknowledgements.
// Handler returns it as an http.Handler an app mounts on its own mux under
// /admin/ (`relay serve` serves it on a protected relayhttp listener of its
// own, --admin-addr; `relay admin` is a thin client of it). The request and answer types are exported so a client can
// decode them.
//
// Reads go to the store directly (the Read* functions, also used by the CLI's
// offline mode). Mutations go through the running instance — Engine.Replay
// and AckWriter.Reopen — so they run inside its lifecycle gate and never
// interleave with acknowledgement write-back: a replay resets the
// acknowledgement facts a concurrent write-back batch might be marking.
// Responses never carry payloads, and are bounded: a row's text fields are
// cut to relaytype.MaxErrorText bytes, a listing to MaxResponseBytes.
package relayadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaytype"
)

// Page sizes of the listings.
const (
	// LimitDefault is the page size when a request gives none.
	LimitDefault = 100
	// LimitMax is the largest page a request may ask for.
	LimitMax = relaydriver.MessageListLimitMax
)

// MaxResponseBytes bounds the JSON answer of a listing (1 MiB): rows stop
// before it would be passed — a message page then sets NextAfter, the DLQ
// Truncated. Every row's error text, key and event id is cut to
// relaytype.MaxErrorText bytes first, and the message listing reads no more
// than that many characters of error text from the store.
const MaxResponseBytes = 1 << 20

// Stats is the answer of GET /admin/stats.
type Stats struct {
	Queue string `json:"queue"`
	// Now is the instance's clock reading the ages are measured against.
	Now time.Time `json:"now"`
	// Counts holds the messages per state (ARCHIVED under its own key).
	Counts map[relaytype.State]int64 `json:"counts"`
	// Backlog is PENDING + FAILED.
	Backlog int64 `json:"backlog"`
	// OldestUnprocessedSeconds is the age of the oldest unfinished message on
	// the clock (0 when nothing is unfinished).
	OldestUnprocessedSeconds float64 `json:"oldest_unprocessed_seconds"`
	// OldestUnprocessedEnqueuedAt is that message's enqueue time (null: none).
	OldestUnprocessedEnqueuedAt *time.Time `json:"oldest_unprocessed_enqueued_at"`
	// MaxID is the largest message id.
	MaxID int64 `json:"max_id"`
	// Cursor is the intake watermark (null: the queue has no cursor).
	Cursor *Cursor `json:"cursor"`
	// PermanentHoles counts the logged permanent holes.
	PermanentHoles int `json:"permanent_holes"`
	// LateRows counts the permanent holes whose row was found after their
	// release, LateRowsNotIngested those not ingested yet (GET /admin/late).
	LateRows            int `json:"late_rows"`
	LateRowsNotIngested int `json:"late_rows_not_ingested"`
	// Outbox holds per configured target the events per state: outbox
	// events, or for a latest-state target its rows (one per key).
	Outbox []OutboxTargetStats `json:"outbox"`
}

// Cursor is the intake watermark (see package relayintake).
type Cursor struct {
	// Watermark is W: every source id in (start, W] is a message or a logged hole.
	Watermark int64 `json:"watermark"`
	// HoleSince is when the hole at W+1 was first seen (null: no hole waiting).
	HoleSince *time.Time `json:"hole_since"`
	// HoleAgeSeconds is how long that hole has waited on the clock (0: none).
	HoleAgeSeconds float64 `json:"hole_age_seconds"`
	// Seeded reports an explicit cutover seeding; SeededAt and SeedMode
	// record it.
	Seeded    bool       `json:"seeded"`
	SeededAt  *time.Time `json:"seeded_at"`
	SeedMode  string     `json:"seed_mode"`
	UpdatedAt *time.Time `json:"updated_at"`
}

// OutboxTargetStats counts one outbox target's events per state.
type OutboxTargetStats struct {
	Target  string `json:"target"`
	Pending int64  `json:"pending"`
	Sent    int64  `json:"sent"`
	Dead    int64  `json:"dead"`
}

// Message is one row of a message listing: never the payload.
type Message struct {
	ID             int64                `json:"id"`
	Key            string               `json:"key"`
	State          relaytype.State      `json:"state"`
	Class          relaytype.ErrorClass `json:"class"`
	LastError      string               `json:"last_error"`
	Attempts       int                  `json:"attempts"`
	EnqueuedAt     time.Time            `json:"enqueued_at"`
	UpdatedAt      time.Time            `json:"updated_at"`
	AckAbandonedAt *time.Time           `json:"ack_abandoned_at,omitempty"`
	AckReason      string               `json:"ack_abandon_reason,omitempty"`
	AckAttempts    int                  `json:"ack_attempts,omitempty"`
}

// MessagePage is the answer of GET /admin/dead and GET /admin/abandoned.
type MessagePage struct {
	Items []Message `json:"items"`
	// NextAfter, when non-zero, is the `after` of the next page (the page was
	// full, or cut at MaxResponseBytes, so more may follow).
	NextAfter int64 `json:"next_after,omitempty"`
}

// OutboxEvent is one DLQ row: never the payload nor the headers.
type OutboxEvent struct {
	ID        int64     `json:"id"`
	EventID   string    `json:"event_id"`
	Target    string    `json:"target"`
	Topic     string    `json:"topic"`
	Key       string    `json:"key"`
	Seq       int64     `json:"seq"`
	Type      string    `json:"type"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// DLQ is the answer of GET /admin/dlq.
type DLQ struct {
	Items []OutboxEvent `json:"items"`
	// Truncated reports that events were left out to keep the answer under
	// MaxResponseBytes (the DLQ has no paging; ?target= lists one target's).
	Truncated bool `json:"truncated,omitempty"`
}

// Hole is one logged permanent hole.
type Hole struct {
	ID          int64     `json:"id"`
	FirstSeenAt time.Time `json:"first_seen_at"`
	ReleasedAt  time.Time `json:"released_at"`
}

// Holes is the answer of GET /admin/holes.
type Holes struct {
	Cursor *Cursor `json:"cursor"`
	// Total counts every logged hole; Items holds the first Limit of them.
	Total int    `json:"total"`
	Items []Hole `json:"items"`
}

// LateRow is a late row: a source row found in a released permanent hole,
// committed after the max commit delay (see relayintake, "Late commits").
type LateRow struct {
	ID         int64     `json:"id"`
	ReleasedAt time.Time `json:"released_at"`
	FoundAt    time.Time `json:"found_at"`
	// Ingested reports an explicit ingest (POST /admin/late/ingest);
	// IngestedAt and MessageID record it (null / 0: not ingested).
	Ingested   bool       `json:"ingested"`
	IngestedAt *time.Time `json:"ingested_at"`
	MessageID  int64      `json:"message_id"`
}

// LateRows is the answer of GET /admin/late.
type LateRows struct {
	// Total counts every late row, NotIngested those not ingested yet; Items
	// holds the first Limit of them in id order.
	Total       int       `json:"total"`
	NotIngested int       `json:"not_ingested"`
	Items       []LateRow `json:"items"`
}

// LateIngestRequest is the body of POST /admin/late/ingest: the late rows to
// enqueue (at most MaxIDs).
type LateIngestRequest struct {
	IDs []int64 `json:"ids"`
}

// LateIngestResult is the answer of POST /admin/late/ingest: one item per
// requested id, in request order (relayintake.IngestLate's outcomes).
type LateIngestResult struct {
	Items []relayintake.IngestLateResult `json:"items"`
}

// ReplayRequest is the body of POST /admin/replay: the classes to replay and,
// optionally, the ids to limit it to. With IDs and no Classes, the classes of
// those messages (FAILED/DEAD only) are used, so each must still be
// replayable.
type ReplayRequest struct {
	Classes []relaytype.ErrorClass `json:"classes"`
	IDs     []int64                `json:"ids"`
}

// ReplayResult is the answer of POST /admin/replay.
type ReplayResult struct {
	Classes  []relaytype.ErrorClass `json:"classes"`
	Replayed int                    `json:"replayed"`
}

// ReopenRequest is the body of POST /admin/reopen: IDs, or Reason
// (MISSING_ROW or TRANSIENT_DEADLINE) for every row abandoned for it.
type ReopenRequest struct {
	IDs    []int64 `json:"ids"`
	Reason string  `json:"reason"`
}

// ReopenResult is the answer of POST /admin/reopen.
type ReopenResult struct {
	Reopened int `json:"reopened"`
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
}

// ReadStats aggregates queue on store d for GET /admin/stats, measuring
// ages at now, with the delivery counts of targets: the events of an outbox
// target and the rows of a latest-state target (DispatcherConfig.Latest) alike.
func ReadStats(ctx context.Context, d relaydriver.Driver, queue string, targets []string, now time.Time) (*Stats, error) {
	ex := d.GetExecutor()
	st, err := ex.MessageStats(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("relayadmin: stats of %q: %w", queue, err)
	}
	out := &Stats{Queue: queue, Now: now, Counts: st.Counts, Backlog: st.Backlog(), MaxID: st.MaxID,
		Outbox: []OutboxTargetStats{}}
	if out.Counts == nil {
		out.Counts = map[relaytype.State]int64{}
	}
	if t := st.OldestUnfinishedEnqueuedAt; !t.IsZero() {
		out.OldestUnprocessedEnqueuedAt = &t
		out.OldestUnprocessedSeconds = max(now.Sub(t).Seconds(), 0)
	}
	if out.Cursor, err = readCursor(ctx, ex, queue, now); err != nil {
		return nil, err
	}
	holes, err := ex.HoleList(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("relayadmin: holes of %q: %w", queue, err)
	}
	out.PermanentHoles = len(holes)
	for _, h := range holes {
		if !h.FoundAt.IsZero() {
			out.LateRows++
			if h.IngestedAt.IsZero() {
				out.LateRowsNotIngested++
			}
		}
	}
	for _, target := range targets {
		// A target is delivered from the event outbox or from the latest-state
		// table (one row per key); the store does not say which, so both are
		// counted and the rows of the one it does not use are zero.
		os, err := ex.OutboxStats(ctx, target)
		if err != nil {
			return nil, fmt.Errorf("relayadmin: outbox stats of %q: %w", target, err)
		}
		ls, err := ex.LatestStats(ctx, target)
		if err != nil {
			return nil, fmt.Errorf("relayadmin: latest-state stats of %q: %w", target, err)
		}
		out.Outbox = append(out.Outbox, OutboxTargetStats{Target: target,
			Pending: os.Pending + ls.Pending, Sent: os.Sent + ls.Sent, Dead: os.Dead + ls.Dead})
	}
	return out, nil
}

// readCursor returns the queue's cursor, or nil when it has none.
func readCursor(ctx context.Context, ex relaydriver.Executor, queue string, now time.Time) (*Cursor, error) {
	c, err := ex.CursorGet(ctx, queue)
	if errors.Is(err, relaytype.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("relayadmin: cursor of %q: %w", queue, err)
	}
	out := &Cursor{Watermark: c.Watermark, Seeded: !c.SeededAt.IsZero(), SeedMode: c.SeedMode,
		HoleSince: timePtr(c.HoleSince), SeededAt: timePtr(c.SeededAt), UpdatedAt: timePtr(c.UpdatedAt)}
	if !c.HoleSince.IsZero() {
		out.HoleAgeSeconds = max(now.Sub(c.HoleSince).Seconds(), 0)
	}
	return out, nil
}

// ListParams selects a page of a message listing.
type ListParams struct {
	// Classes, when set, lists only these error classes.
	Classes []relaytype.ErrorClass
	// After starts the page after this id.
	After int64
	// Limit caps the page (<= 0: LimitDefault; at most LimitMax).
	Limit int
}

// ReadDead lists DEAD messages of queue in id order (GET /admin/dead).
func ReadDead(ctx context.Context, d relaydriver.Driver, queue string, p ListParams) (*MessagePage, error) {
	return readMessages(ctx, d, &relaydriver.MessageListParams{Queue: queue,
		States: []relaytype.State{relaytype.StateDead}, Classes: p.Classes, AfterID: p.After, Limit: p.Limit})
}

// ReadAbandoned lists messages whose acknowledgement was abandoned (not
// acknowledged) in id order (GET /admin/abandoned).
func ReadAbandoned(ctx context.Context, d relaydriver.Driver, queue string, p ListParams) (*MessagePage, error) {
	return readMessages(ctx, d, &relaydriver.MessageListParams{Queue: queue, AckAbandoned: true,
		Classes: p.Classes, AfterID: p.After, Limit: p.Limit})
}

func readMessages(ctx context.Context, d relaydriver.Driver, p *relaydriver.MessageListParams) (*MessagePage, error) {
	if p.Limit <= 0 {
		p.Limit = LimitDefault
	}
	if p.Limit > LimitMax {
		return nil, fmt.Errorf("relayadmin: limit %d above %d", p.Limit, LimitMax)
	}
	ms, err := d.GetExecutor().MessageList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("relayadmin: list messages of %q: %w", p.Queue, err)
	}
	out := &MessagePage{Items: make([]Message, 0, len(ms))}
	var b budget
	for _, m := range ms {
		item := Message{ID: m.ID, Key: bound(m.Key), State: m.State, Class: m.ErrorClass,
			LastError: bound(m.LastError), Attempts: m.Attempts, EnqueuedAt: m.EnqueuedAt, UpdatedAt: m.UpdatedAt,
			AckAbandonedAt: timePtr(m.AckAbandonedAt), AckReason: m.AckAbandonReason, AckAttempts: m.AckAttempts}
		if !b.take(item) {
			out.NextAfter = out.Items[len(out.Items)-1].ID
			return out, nil
		}
		out.Items = append(out.Items, item)
	}
	if len(ms) == p.Limit {
		out.NextAfter = ms[len(ms)-1].ID
	}
	return out, nil
}

// ReadDLQ lists the DEAD outbox events of targets (GET /admin/dlq), up to
// limit per target, without payloads or headers.
func ReadDLQ(ctx context.Context, d relaydriver.Driver, targets []string, limit int) (*DLQ, error) {
	if limit <= 0 {
		limit = LimitDefault
	}
	if limit > LimitMax {
		return nil, fmt.Errorf("relayadmin: limit %d above %d", limit, LimitMax)
	}
	out := &DLQ{Items: []OutboxEvent{}}
	var b budget
	for _, target := range targets {
		rs, err := d.GetExecutor().OutboxList(ctx, &relaydriver.OutboxListParams{Target: target,
			State: relaydriver.OutboxDead, Limit: limit})
		if err != nil {
			return nil, fmt.Errorf("relayadmin: DLQ of %q: %w", target, err)
		}
		for _, r := range rs {
			item := OutboxEvent{ID: r.RowID, EventID: bound(r.ID), Target: r.Target, Topic: r.Topic,
				Key: bound(r.Key), Seq: r.Seq, Type: string(r.Type), Attempts: r.Attempts, LastError: bound(r.LastError),
				CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
			if !b.take(item) {
				out.Truncated = true
				return out, nil
			}
			out.Items = append(out.Items, item)
		}
	}
	return out, nil
}

// bound cuts a text field of a listing row (error text, key, event id) to
// relaytype.MaxErrorText bytes.
func bound(s string) string { return relaytype.BoundText(s, relaytype.MaxErrorText) }

// budget counts the JSON bytes of a listing's rows against MaxResponseBytes,
// less a reserve for the rest of the answer.
type budget struct{ used int }

const (
	// answerReserve is kept for what a listing holds besides its rows.
	answerReserve = 4 << 10
	// rowIndent is the most the indented answer adds to a row's compact JSON:
	// 8 bytes per field line and the braces' lines.
	rowIndent = 160
)

// take reports whether row still fits the answer, counting it if so. The
// first row always fits: its text fields are bounded.
func (b *budget) take(row any) bool {
	raw, err := json.Marshal(row)
	n := len(raw) + rowIndent
	if err != nil {
		n = MaxResponseBytes // not a row of ours: never let it in after another
	}
	if b.used > 0 && b.used+n > MaxResponseBytes-answerReserve {
		return false
	}
	b.used += n
	return true
}

// ReadHoles returns the cursor and up to limit permanent holes (GET
// /admin/holes), with ages measured at now.
func ReadHoles(ctx context.Context, d relaydriver.Driver, queue string, limit int, now time.Time) (*Holes, error) {
	if limit <= 0 {
		limit = LimitDefault
	}
	if limit > LimitMax {
		return nil, fmt.Errorf("relayadmin: limit %d above %d", limit, LimitMax)
	}
	ex := d.GetExecutor()
	c, err := readCursor(ctx, ex, queue, now)
	if err != nil {
		return nil, err
	}
	hs, err := ex.HoleList(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("relayadmin: holes of %q: %w", queue, err)
	}
	out := &Holes{Cursor: c, Total: len(hs), Items: []Hole{}}
	for _, h := range hs[:min(len(hs), limit)] {
		out.Items = append(out.Items, Hole{ID: h.ID, FirstSeenAt: h.FirstSeenAt, ReleasedAt: h.ReleasedAt})
	}
	return out, nil
}

// ReadLate reads the queue's late rows (GET /admin/late): at most limit
// (LimitDefault when 0, at most LimitMax) in id order, with the totals. ctx
// governs the read.
func ReadLate(ctx context.Context, d relaydriver.Driver, queue string, limit int) (*LateRows, error) {
	if limit <= 0 {
		limit = LimitDefault
	}
	if limit > LimitMax {
		return nil, fmt.Errorf("relayadmin: limit %d above %d", limit, LimitMax)
	}
	hs, err := d.GetExecutor().HoleListFound(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("relayadmin: late rows of %q: %w", queue, err)
	}
	out := &LateRows{Total: len(hs), Items: []LateRow{}}
	for i, h := range hs {
		ingested := !h.IngestedAt.IsZero()
		if !ingested {
			out.NotIngested++
		}
		if i < limit {
			out.Items = append(out.Items, LateRow{ID: h.ID, ReleasedAt: h.ReleasedAt, FoundAt: h.FoundAt,
				Ingested: ingested, IngestedAt: timePtr(h.IngestedAt), MessageID: h.IngestedID})
		}
	}
	return out, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
