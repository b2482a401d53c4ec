package relayintake

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// ErrNotSeeded is returned when the queue has no cursor. Seeding is an
// explicit cutover decision (min, zero, max or an id; see Intake.Seed) and is
// never made by default.
var ErrNotSeeded = errors.New("relayintake: queue has no watermark; seed it explicitly first (cutover mode min, zero, max or an id)")

// ErrCursorMoved is returned when the cursor changed between the start of a
// round and its save: another intake is running on the same queue, which
// must never happen (run the intake under the queue lock). Nothing of the
// round is saved.
var ErrCursorMoved = errors.New("relayintake: cursor changed during the round; is another intake running on this queue?")

// rollbackTimeout bounds the rollback of a failed round, which runs even when
// the round's ctx was cancelled.
const rollbackTimeout = 5 * time.Second

// Intake runs the watermark intake of one queue over one SequenceSource
// (see the package doc for its rules). Rounds of one Intake are serialised; it
// is safe for concurrent use, but a queue must have only one active Intake.
//
// Metrics, when Config.Registerer is set, all labelled queue:
// relay_watermark_lag (gauge, source max id − W), relay_watermark (gauge, W),
// relay_permanent_holes_total (counter of released ids),
// relay_intake_rows_total (counter of enqueued rows),
// relay_intake_errors_total (counter of failed rounds and late-row checks) and
// relay_intake_late_rows_total (counter of rows found in released holes).
type Intake struct {
	driver relaydriver.Driver
	src    relaysource.SequenceSource
	cfg    Config
	m      *metrics

	mu sync.Mutex // serialises rounds and seeding; guards cur
	// cur is the cursor as this Intake last read or saved it (nil: unknown, read
	// it). A round starts from it instead of reading the store, and checks it
	// once, inside its transaction, before it saves; any failure drops it.
	cur *relaytype.Cursor
	// lateChecked is when the last late-row check ran (zero: never); guarded
	// by mu.
	lateChecked time.Time
	// prober is the source's HoleProber when Config.ProbeHoles is set;
	// probe is the hole it marked (guarded by mu).
	prober relaysource.HoleProber
	probe  struct {
		first, mark int64
		marked      bool // mark holds a mark of this hole
		failed      bool // a probe of this hole failed (logged once)
	}
}

// probeHole reports whether the hole starting at first is settled. The
// first round that sees a hole marks it (a later round, when that failed:
// a later mark only makes the answer later); the rounds after ask whether
// every transaction open at the mark has ended. A failed call is logged
// once per hole and answers false: the hole then waits the maximum commit
// delay, as without a prober, unless a later call works.
func (in *Intake) probeHole(ctx context.Context, first int64) bool {
	if in.probe.first != first {
		in.probe.first, in.probe.marked, in.probe.failed = first, false, false
	}
	var err error
	if !in.probe.marked {
		if in.probe.mark, err = in.prober.HoleMark(ctx); err == nil {
			in.probe.marked = true
			return false
		}
	} else {
		var settled bool
		if settled, err = in.prober.HoleSettled(ctx, in.probe.mark); err == nil {
			return settled
		}
	}
	if !in.probe.failed {
		in.probe.failed = true
		in.cfg.Logger.WarnContext(ctx, "intake: hole probe failed; the hole waits the max commit delay unless a later probe works",
			"queue", in.cfg.Queue, "hole_at", first, "err", err)
	}
	return false
}

// New returns an Intake for cfg.Queue. It validates cfg (the error names the
// bad field) and registers the metrics; it does no I/O.
func New(driver relaydriver.Driver, src relaysource.SequenceSource, cfg Config) (*Intake, error) {
	if driver == nil {
		return nil, errors.New("relayintake: New: driver is nil")
	}
	if src == nil {
		return nil, errors.New("relayintake: New: source is nil")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer, cfg.Queue)
	if err != nil {
		return nil, err
	}
	in := &Intake{driver: driver, src: src, cfg: cfg, m: m}
	if cfg.ProbeHoles {
		p, ok := src.(relaysource.HoleProber)
		if !ok {
			return nil, fmt.Errorf("relayintake: Config.ProbeHoles: the source (%T) is not a relaysource.HoleProber", src)
		}
		in.prober = p
	}
	return in, nil
}

// SetNotify replaces Config.Notify: fn is called after every round that
// committed (nil: nobody). relayservice calls it with the engine's Notify.
// Safe to call at any time; it waits for a round in progress to end.
func (in *Intake) SetNotify(fn func()) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.cfg.Notify = fn
}

// RoundResult reports one intake round.
type RoundResult struct {
	// Read is how many rows the source returned (at most Config.BatchSize).
	Read int
	// Enqueued is how many of them were inserted as new messages; rows already
	// present (a re-scan, or a row another writer enqueued above W) are not
	// counted.
	Enqueued int
	// PreviousWatermark is W before the round; Watermark is W after it (never
	// smaller).
	PreviousWatermark int64
	Watermark         int64
	// HoleAt is the first missing id the watermark waits at (Watermark+1), or 0
	// when no hole is waiting. HoleSince is when that hole was first observed
	// (zero when none).
	HoleAt    int64
	HoleSince time.Time
	// ReleasedFirst..ReleasedLast is the permanent hole released this round (both
	// 0 when none). Every id in the range was logged with HoleInsert.
	ReleasedFirst int64
	ReleasedLast  int64
	// ReleasedSettled: the hole was released because the source's prober
	// found it settled (Config.ProbeHoles), before the max commit delay.
	ReleasedSettled bool
	// More reports that another round would make progress at once: the batch was
	// full and contiguous, or a hole was released (the rows after it are enqueued
	// by the next round).
	More bool
	// Lag is the source's max id minus Watermark (0 when caught up), or -1 when the
	// source's bounds could not be read after the round.
	Lag int64
	// LateFound is how many late rows this round's late-row check found (rows
	// in released holes, see IngestLate); the check runs at most every
	// Config.LateCheckInterval, after the round itself.
	LateFound int
}

// decision is the pure outcome of one batch: where W goes and what happens to
// the hole at W+1.
type decision struct {
	watermark int64     // the new W
	holeSince time.Time // the new holeSince (zero: none)
	enqueue   int       // rows[:enqueue] are inserted
	// holeFirst..holeLast is the hole at the end of the contiguous run (0: none).
	holeFirst, holeLast int64
	// released: the hole aged out (or settled); firstSeen is when it was
	// first observed.
	released  bool
	firstSeen time.Time
	// settled: released because the source's prober found every
	// transaction open at the first sighting ended, not by age.
	settled bool
}

// decide counts the contiguous ids after w and times or releases the hole
// that ends them, for a batch read after w. rows must be
// ascending with ids > w. It never returns a watermark below w.
//
// settled releases the hole at once: the source's HoleProber found that no
// transaction open when it was first seen is still open, so its row can no
// longer appear.
func decide(w int64, holeSince time.Time, rows []relaysource.Row, now time.Time, maxCommitDelay time.Duration, settled bool) decision {
	// Count contiguous ids from W+1; stop at the first missing id.
	n := 0
	for n < len(rows) && rows[n].ID == w+int64(n)+1 {
		n++
	}
	d := decision{watermark: w + int64(n), enqueue: n}
	if n == len(rows) {
		// The hole rule applies only when the batch has rows after a missing id. Without
		// them no hole is observed, so there is nothing to time.
		return d
	}
	d.holeFirst, d.holeLast = d.watermark+1, rows[n].ID-1
	if n > 0 || holeSince.IsZero() {
		// A hole seen for the first time — including a new hole after W moved past
		// an old one: it is timed afresh, never inheriting the old wait.
		d.holeSince = now
	} else {
		d.holeSince = holeSince
	}
	if settled || now.Sub(d.holeSince) >= maxCommitDelay {
		// Permanent: release only the hole itself. W stops just before the first
		// row after it, so no existing row is skipped; those rows are enqueued by
		// the next round (one hole per round).
		d.released, d.firstSeen, d.settled = true, d.holeSince, settled && now.Sub(d.holeSince) < maxCommitDelay
		d.watermark = rows[n].ID - 1
		d.holeSince = time.Time{}
	}
	return d
}

// checkBatch holds the source to its contract before any decision is taken: a
// violation is an error that leaves W unchanged.
func checkBatch(rows []relaysource.Row, after int64, limit int) error {
	if len(rows) > limit {
		return fmt.Errorf("source returned %d rows for a limit of %d", len(rows), limit)
	}
	prev := after
	for _, r := range rows {
		if r.ID <= prev {
			return fmt.Errorf("source returned id %d after id %d (ids must be ascending and above the watermark %d)", r.ID, prev, after)
		}
		prev = r.ID
	}
	return nil
}

// RunOnce runs one intake round: take the cursor, read up to BatchSize rows
// with id > W, advance W over contiguous ids, time or release the hole at W+1,
// and in one transaction insert every row up to the new W (insert if absent)
// and save (W, holeSince). After the commit it calls Config.Notify. ctx governs
// every call.
//
// The cursor is read from the store at most once per round: the Intake keeps
// what it last read or saved, and a round that saves re-reads it inside its
// transaction to check that nobody else moved it (ErrCursorMoved). A round
// that changes nothing reads no cursor at all; the first round of an Intake,
// and the first after a failed one, read it before they start.
//
// Without a cursor it returns ErrNotSeeded. When the source cannot be read, or
// anything fails before the commit, it returns the error and nothing moved: W
// and holeSince stay as they were. A round that changes
// nothing writes nothing.
func (in *Intake) RunOnce(ctx context.Context) (*RoundResult, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	res, saved, err := in.round(ctx)
	if err != nil {
		in.cur = nil // read it afresh next round
		in.m.errors.Inc()
		return nil, err
	}
	if saved && in.cfg.Notify != nil {
		in.cfg.Notify()
	}
	if now := in.cfg.Clock.Now(); in.lateDue(now) {
		// A failed check never fails the round: intake goes on, and the check
		// runs again after the interval.
		in.lateChecked = now
		if res.LateFound, err = in.checkLate(ctx, now); err != nil {
			in.m.errors.Inc()
			in.cfg.Logger.WarnContext(ctx, "intake: late-row check failed; retrying after the late check interval",
				"queue", in.cfg.Queue, "late_check_interval", in.cfg.LateCheckInterval, "err", err)
		}
	}
	return res, nil
}

// cursor returns the cursor the round starts from: the cached one, or the
// store's.
func (in *Intake) cursor(ctx context.Context) (*relaytype.Cursor, error) {
	if in.cur != nil {
		return in.cur, nil
	}
	p := in.cfg.Queue
	cur, err := in.driver.GetExecutor().CursorGet(ctx, p)
	if errors.Is(err, relaytype.ErrNotFound) {
		return nil, fmt.Errorf("queue %q: %w", p, ErrNotSeeded)
	}
	if err != nil {
		return nil, fmt.Errorf("relayintake: queue %q: read cursor: %w", p, err)
	}
	in.cur = cur
	return cur, nil
}

// round runs one round; saved reports a committed save.
func (in *Intake) round(ctx context.Context) (res *RoundResult, saved bool, err error) {
	p := in.cfg.Queue
	cur, err := in.cursor(ctx)
	if err != nil {
		return nil, false, err
	}
	w := cur.Watermark

	// An unreadable source is an infrastructure failure, never "no new
	// messages": return before anything is written.
	rows, err := in.src.ReadAfter(ctx, w, in.cfg.BatchSize)
	if err != nil {
		return nil, false, fmt.Errorf("relayintake: queue %q: read source after %d (watermark unchanged): %w", p, w, err)
	}
	if err := checkBatch(rows, w, in.cfg.BatchSize); err != nil {
		return nil, false, fmt.Errorf("relayintake: queue %q (watermark unchanged): %w", p, err)
	}

	now := in.cfg.Clock.Now()
	d := decide(w, cur.HoleSince, rows, now, in.cfg.MaxCommitDelay, false)
	if !d.released && d.holeFirst != 0 && in.prober != nil && in.probeHole(ctx, d.holeFirst) {
		d = decide(w, cur.HoleSince, rows, now, in.cfg.MaxCommitDelay, true)
	}
	res = &RoundResult{Read: len(rows), PreviousWatermark: w, Watermark: d.watermark, Lag: -1}
	if d.released {
		res.ReleasedFirst, res.ReleasedLast, res.ReleasedSettled = d.holeFirst, d.holeLast, d.settled
	} else if d.holeFirst != 0 {
		res.HoleAt, res.HoleSince = d.holeFirst, d.holeSince
	}
	res.More = d.released || (d.enqueue == len(rows) && len(rows) == in.cfg.BatchSize)

	if d.watermark != w || !d.holeSince.Equal(cur.HoleSince) {
		if res.Enqueued, err = in.save(ctx, cur, rows[:d.enqueue], d, now); err != nil {
			return nil, false, err
		}
		saved = true
		in.cur = &relaytype.Cursor{Queue: p, Watermark: d.watermark, HoleSince: d.holeSince,
			SeededAt: cur.SeededAt, SeedMode: cur.SeedMode, UpdatedAt: now}
	}
	in.observe(ctx, res, rows, cur.HoleSince, d, now)
	return res, saved, nil
}

// save writes the round: the inserts, the permanent hole's log rows
// and the cursor in one transaction. It returns how many messages were new.
func (in *Intake) save(ctx context.Context, cur *relaytype.Cursor, rows []relaysource.Row, d decision, now time.Time) (int, error) {
	p := in.cfg.Queue
	tx, err := in.driver.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("relayintake: queue %q: begin: %w", p, err)
	}
	inserted, err := in.saveTx(ctx, tx, cur, rows, d, now)
	if err == nil {
		if err = tx.Commit(ctx); err == nil {
			return inserted, nil
		}
		err = fmt.Errorf("relayintake: queue %q: commit: %w", p, err)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	if rerr := tx.Rollback(rctx); rerr != nil {
		err = errors.Join(err, fmt.Errorf("relayintake: queue %q: rollback: %w", p, rerr))
	}
	return 0, err
}

func (in *Intake) saveTx(ctx context.Context, tx relaydriver.ExecutorTx, cur *relaytype.Cursor, rows []relaysource.Row, d decision, now time.Time) (int, error) {
	p := in.cfg.Queue
	// The cursor is a single overwritten row; refuse to overwrite a value
	// another writer saved since this round took it (that could move W back).
	// This is the round's one read of the cursor when it started from the cache.
	again, err := tx.CursorGet(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("relayintake: queue %q: re-read cursor: %w", p, err)
	}
	if again.Watermark != cur.Watermark {
		return 0, fmt.Errorf("queue %q: watermark %d became %d: %w", p, cur.Watermark, again.Watermark, ErrCursorMoved)
	}

	inserted := 0
	if len(rows) > 0 {
		eps := make([]*relay.EnqueueParams, len(rows))
		for i, r := range rows {
			eps[i] = &relay.EnqueueParams{ID: r.ID, Key: r.Key, Payload: r.Payload, ReceivedAt: r.ReceivedAt}
		}
		// The engine's own insert parameters: the intake enqueues exactly as
		// Engine.EnqueueTx does, with the source's id and received-at.
		params, err := relay.InsertParams(p, now, eps...)
		if err != nil {
			return 0, fmt.Errorf("relayintake: queue %q: %w", p, err)
		}
		// Insert if absent. A row already present (a re-scan, or a row another
		// writer enqueued above W) is neither counted nor an error.
		res, err := tx.MessageInsertMany(ctx, params)
		if err != nil {
			return 0, fmt.Errorf("relayintake: queue %q: enqueue ids %d..%d: %w", p, rows[0].ID, rows[len(rows)-1].ID, err)
		}
		inserted = res.Inserted
	}
	if d.released {
		// A permanent hole is logged durably, in the same transaction that
		// moves W past it, so no id is passed without a record.
		for id := d.holeFirst; id <= d.holeLast; id++ {
			hole := &relaytype.Hole{Queue: p, ID: id, FirstSeenAt: d.firstSeen, ReleasedAt: now}
			if err := tx.HoleInsert(ctx, hole); err != nil {
				return 0, fmt.Errorf("relayintake: queue %q: log permanent hole %d: %w", p, id, err)
			}
		}
	}
	err = tx.CursorSave(ctx, &relaydriver.CursorSaveParams{
		Queue:     p,
		Watermark: d.watermark,
		HoleSince: d.holeSince,
		Now:       now,
	})
	if err != nil {
		return 0, fmt.Errorf("relayintake: queue %q: save cursor W=%d: %w", p, d.watermark, err)
	}
	return inserted, nil
}

// observe updates metrics and logs after a successful round. It reads the
// source's bounds only when the batch was full: otherwise the batch itself holds
// every visible id above the old W, so its last id is the source max.
func (in *Intake) observe(ctx context.Context, res *RoundResult, rows []relaysource.Row, oldHoleSince time.Time, d decision, now time.Time) {
	p := in.cfg.Queue
	log := in.cfg.Logger
	in.m.rows.Add(float64(res.Enqueued))
	in.m.watermark.Set(float64(res.Watermark))

	if d.released {
		n := d.holeLast - d.holeFirst + 1
		in.m.holes.Add(float64(n))
		why := "aged past the max commit delay"
		if d.settled {
			why = "every transaction open when it was seen has ended"
		}
		log.WarnContext(ctx, "intake: permanent hole released",
			"queue", p, "hole_first", d.holeFirst, "hole_last", d.holeLast, "ids", n,
			"first_seen_at", d.firstSeen, "waited", now.Sub(d.firstSeen), "why", why,
			"watermark", res.Watermark)
	} else if res.HoleAt != 0 && !res.HoleSince.Equal(oldHoleSince) {
		log.InfoContext(ctx, "intake: hole observed; waiting for it to commit or age out",
			"queue", p, "hole_first", d.holeFirst, "hole_last", d.holeLast,
			"hole_since", res.HoleSince, "max_commit_delay", in.cfg.MaxCommitDelay, "watermark", res.Watermark)
	}
	if res.Watermark != res.PreviousWatermark {
		log.DebugContext(ctx, "intake: watermark advanced",
			"queue", p, "watermark", res.Watermark, "previous", res.PreviousWatermark,
			"rows_read", res.Read, "enqueued", res.Enqueued)
	}

	var maxID int64
	switch {
	case len(rows) < in.cfg.BatchSize && len(rows) > 0:
		maxID = rows[len(rows)-1].ID
	case len(rows) == 0:
		maxID = res.PreviousWatermark
	default:
		_, hi, ok, err := in.src.Bounds(ctx)
		if err != nil {
			in.m.errors.Inc()
			log.WarnContext(ctx, "intake: read source bounds for the lag metric", "queue", p, "err", err)
			return
		}
		if ok {
			maxID = hi
		}
	}
	res.Lag = max(0, maxID-res.Watermark)
	in.m.lag.Set(float64(res.Lag))
}

// Run runs rounds until ctx is done, then returns nil. After a round that made
// progress with a full batch (or released a hole) it starts the next round at
// once; otherwise it waits PollInterval on the configured clock. A failed round
// is logged (never with payloads) and retried after PollInterval: an unreadable
// source only delays intake, it never moves W. Run returns
// ErrNotSeeded at once when the queue has no cursor: seeding is the operator's
// decision.
func (in *Intake) Run(ctx context.Context) error {
	in.mu.Lock()
	in.cur = nil // another instance may have run the queue since the last round
	in.mu.Unlock()
	for {
		res, err := in.RunOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(err, ErrNotSeeded):
			return err
		case err != nil:
			in.cfg.Logger.ErrorContext(ctx, "intake: round failed; watermark unchanged, retrying after the poll interval",
				"queue", in.cfg.Queue, "poll_interval", in.cfg.PollInterval, "err", err)
		case res.More:
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-in.cfg.Clock.After(in.cfg.PollInterval):
		}
	}
}

// Stats is a snapshot of an intake's progress, read from the store.
type Stats struct {
	// Cursor is the queue's watermark row; nil before the queue was
	// seeded.
	Cursor *relaytype.Cursor
	// PermanentHoles counts the ids released as permanent holes (skipped
	// after waiting out the maximum commit delay).
	PermanentHoles int
	// HoleAge is how long, on the intake's clock, the hole at watermark+1
	// has been waited for; 0 when there is none.
	HoleAge time.Duration
	// LateRows counts the permanent holes whose row was found after their
	// release (committed later than the max commit delay), and
	// LateRowsNotIngested those of them not ingested yet (see IngestLate).
	LateRows            int
	LateRowsNotIngested int
}

// Stats reads the intake's progress from the store: its cursor and the
// number of permanent holes. It does not run a round, takes no lock and is
// safe to call while Run runs (from any instance). ctx governs the reads.
func (in *Intake) Stats(ctx context.Context) (*Stats, error) {
	p := in.cfg.Queue
	ex := in.driver.GetExecutor()
	st := &Stats{}
	cur, err := ex.CursorGet(ctx, p)
	switch {
	case errors.Is(err, relaytype.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("relayintake: stats of %q: cursor: %w", p, err)
	default:
		st.Cursor = cur
		if !cur.HoleSince.IsZero() {
			st.HoleAge = max(in.cfg.Clock.Now().Sub(cur.HoleSince), 0)
		}
	}
	holes, err := ex.HoleList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("relayintake: stats of %q: holes: %w", p, err)
	}
	st.PermanentHoles = len(holes)
	for _, h := range holes {
		if !h.FoundAt.IsZero() {
			st.LateRows++
			if h.IngestedAt.IsZero() {
				st.LateRowsNotIngested++
			}
		}
	}
	return st, nil
}
