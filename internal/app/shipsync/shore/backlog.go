package shore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/eta"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/flow"
)

// ErrBadHeartbeat classifies a heartbeat whose figures cannot be true
// (negative or not finite, more active time than elapsed, a transfer window
// that does not parse); it is refused with the field named and nothing of
// it is kept.
var ErrBadHeartbeat = errors.New("shore: bad heartbeat")

// badHeartbeat is ErrBadHeartbeat naming the field.
type badHeartbeat struct{ field, why string }

func (e *badHeartbeat) Error() string {
	return fmt.Sprintf("%v: %s %s", ErrBadHeartbeat, e.field, e.why)
}
func (e *badHeartbeat) Unwrap() error { return ErrBadHeartbeat }

// Field is the heartbeat field at fault.
func (e *badHeartbeat) Field() string { return e.field }

// checkHeartbeat returns the first impossible figure of hb.
func checkHeartbeat(hb *pb.Heartbeat) error {
	bad := func(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }
	if bad(hb.CompressionRatio) || hb.CompressionRatio > 100 {
		return &badHeartbeat{"compression_ratio", "is out of range"}
	}
	if bad(hb.UploadRateLimit) {
		return &badHeartbeat{"upload_rate_limit", "is negative or not finite"}
	}
	if iv := hb.Interval; iv != nil {
		if bad(iv.ElapsedSeconds) || bad(iv.ActiveSeconds) {
			return &badHeartbeat{"interval", "has a negative or non-finite time"}
		}
		if iv.ActiveSeconds > iv.ElapsedSeconds+1 {
			return &badHeartbeat{"interval.active_seconds", "exceeds elapsed_seconds"}
		}
		if iv.EffectiveBytes > math.MaxInt64 || iv.PhysicalBytes > math.MaxInt64 || iv.IncomingRawBytes > math.MaxInt64 {
			return &badHeartbeat{"interval", "has a byte count out of range"}
		}
	}
	if hb.UnreadEvents > math.MaxInt64 || hb.UnreadRawBytes > math.MaxInt64 {
		return &badHeartbeat{"unread_events", "is out of range"}
	}
	for _, b := range hb.Backlog {
		if b.Events > math.MaxInt64 || b.RawBytes > math.MaxInt64 || b.EstimatedCompressedBytes > math.MaxInt64 {
			return &badHeartbeat{"backlog", "has a count out of range"}
		}
		if len(b.RuleId) == 0 || len(b.RuleId) > 200 {
			return &badHeartbeat{"backlog.rule_id", "is empty or longer than 200 bytes"}
		}
	}
	if _, err := transferWindow(hb.TransferWindow, hb.TransferWindowZone); err != nil {
		return &badHeartbeat{"transfer_window", "does not parse"}
	}
	return nil
}

// transferWindow parses a node's reported window (nil: always open).
func transferWindow(spec, zone string) (*flow.Window, error) {
	if spec == "" {
		return nil, nil
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, err
	}
	return flow.ParseWindow(spec, loc)
}

// Heartbeat records node's heartbeat at the clock's now, in one
// transaction: its health and config version, the window, limit and
// compression ratio it reports, its backlog per rule (replacing the last
// report) and, when it carries a transfer interval, one sample of the
// throughput history. A heartbeat with impossible figures is refused with
// ErrBadHeartbeat and changes nothing.
func (r *Registry) Heartbeat(ctx context.Context, node string, hb *pb.Heartbeat) error {
	if err := checkHeartbeat(hb); err != nil {
		return err
	}
	now := r.clock.Now()
	var events, raw int64
	n := len(hb.Backlog)
	dirs, rules, states := make([]string, n), make([]string, n), make([]string, n)
	prios := make([]int32, n)
	evs, raws, ests := make([]int64, n), make([]int64, n), make([]int64, n)
	oldest, newest, oldBiz, newBiz := make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
	at := func(ts *timestamppb.Timestamp) *time.Time {
		if ts == nil {
			return nil
		}
		t := ts.AsTime()
		return &t
	}
	for i, b := range hb.Backlog {
		dirs[i], rules[i], prios[i], states[i] = b.Direction, b.RuleId, b.Priority, b.State
		evs[i], raws[i], ests[i] = int64(b.Events), int64(b.RawBytes), int64(b.EstimatedCompressedBytes)
		oldest[i], newest[i] = at(b.OldestCapturedAt), at(b.NewestCapturedAt)
		oldBiz[i], newBiz[i] = at(b.OldestBusinessAt), at(b.NewestBusinessAt)
		events, raw = events+evs[i], raw+raws[i]
	}
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, stmts["NodeHeartbeat"], node, now, hb.Overall.String(),
			strconv.FormatUint(hb.ConfigVersion, 10), hb.TransferWindow, hb.TransferWindowZone, hb.UploadRateLimit,
			hb.CompressionRatio, hb.CompressionRatioMeasured, int64(hb.UnreadEvents), int64(hb.UnreadRawBytes),
			int64(hb.StateDiskBytes)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, stmts["NodeBacklogClear"], node); err != nil {
			return err
		}
		if n > 0 {
			if _, err := tx.Exec(ctx, stmts["NodeBacklogInsert"], node, dirs, rules, prios, states, evs, raws, ests,
				oldest, newest, oldBiz, newBiz, now); err != nil {
				return err
			}
		}
		if iv := hb.Interval; iv != nil {
			if _, err := tx.Exec(ctx, stmts["NodeSampleInsert"], node, now, iv.ElapsedSeconds, iv.ActiveSeconds,
				int64(iv.EffectiveBytes), int64(iv.PhysicalBytes), int64(iv.IncomingRawBytes), events, raw); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: heartbeat: %w", ErrStore, err)
	}
	return nil
}

// RuleBacklog is one rule's backlog at a node, as its last heartbeat
// reported it.
type RuleBacklog struct {
	// Direction ("up", "down"), Priority and State (READY, RETRY_WAIT,
	// RECEIVED, BLOCKED) group the events; "", 0 and "" from a node that
	// reports per rule only.
	Direction      string
	RuleID         string
	Priority       int32
	State          string
	Events         int64
	RawBytes       int64
	EstimatedBytes int64
	// Capture and business times of the oldest and newest event (zero
	// when the node did not say).
	OldestCaptured, NewestCaptured time.Time
	OldestBusiness, NewestBusiness time.Time
	ReportedAt                     time.Time
}

// ToSend reports whether the group still has to cross the link to the
// shore: uplink events not yet received (RECEIVED ones only wait for their
// result; BLOCKED ones wait for an operator).
func (b RuleBacklog) ToSend() bool {
	return (b.Direction == "" || b.Direction == "up") && (b.State == "" || b.State == "READY" || b.State == "RETRY_WAIT")
}

// NodeBacklog is a node's backlog and the ETA of its drain, with every
// input the estimate was made from.
type NodeBacklog struct {
	Node  string
	Rules []RuleBacklog
	// Events and RawBytes are the sums over Rules.
	Events, RawBytes int64
	// UnreadEvents and UnreadRawBytes are the CDC backlog past the node's
	// read positions (raw size estimated by the node); the ETA counts them.
	UnreadEvents, UnreadRawBytes int64
	// DiskBytes is what the node's platform state takes on its disk.
	DiskBytes int64
	// LastHeartbeat is when the node last reported (zero: never).
	LastHeartbeat time.Time
	ETA           eta.Estimate
}

// Backlog returns node's backlog and ETA at the clock's now: the
// throughput history is its samples of the last 24 hours (each one an
// interval ending when the shore received it), the incoming rate the new
// capture of the samples in the throughput window, the window and limit
// what the node last reported.
func (r *Registry) Backlog(ctx context.Context, node string) (NodeBacklog, error) {
	now := r.clock.Now()
	out := NodeBacklog{Node: node}
	var spec, zone string
	var limit, ratio float64
	var measured bool
	var last *time.Time
	err := r.pool.QueryRow(ctx, stmts["NodeTransfer"], node).Scan(&spec, &zone, &limit, &ratio, &measured, &last,
		&out.UnreadEvents, &out.UnreadRawBytes, &out.DiskBytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, fmt.Errorf("%w %q", ErrUnknownNode, node)
	}
	if err != nil {
		return out, fmt.Errorf("%w: backlog: %w", ErrStore, err)
	}
	if last != nil {
		out.LastHeartbeat = *last
	}
	rows, err := r.pool.Query(ctx, stmts["NodeBacklog"], node)
	if err != nil {
		return out, fmt.Errorf("%w: backlog: %w", ErrStore, err)
	}
	out.Rules, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (RuleBacklog, error) {
		var b RuleBacklog
		var oldest, newest, oldBiz, newBiz *time.Time
		err := row.Scan(&b.Direction, &b.RuleID, &b.Priority, &b.State, &b.Events, &b.RawBytes, &b.EstimatedBytes,
			&oldest, &newest, &oldBiz, &newBiz, &b.ReportedAt)
		for _, x := range []struct {
			from *time.Time
			to   *time.Time
		}{{oldest, &b.OldestCaptured}, {newest, &b.NewestCaptured}, {oldBiz, &b.OldestBusiness}, {newBiz, &b.NewestBusiness}} {
			if x.from != nil {
				*x.to = *x.from
			}
		}
		return b, err
	})
	if err != nil {
		return out, fmt.Errorf("%w: backlog: %w", ErrStore, err)
	}
	var toSend int64
	for _, b := range out.Rules {
		out.Events, out.RawBytes = out.Events+b.Events, out.RawBytes+b.RawBytes
		if b.ToSend() {
			toSend += b.RawBytes
		}
	}
	// The window was checked when the heartbeat was stored; one that no
	// longer parses (a time zone gone from the system) counts as always.
	win, _ := transferWindow(spec, zone)
	meter := &eta.Meter{}
	rows, err = r.pool.Query(ctx, stmts["NodeSamples"], node, now.Add(-eta.HistoryDefault))
	if err != nil {
		return out, fmt.Errorf("%w: backlog: %w", ErrStore, err)
	}
	var at time.Time
	var el, ac, elapsed float64
	var eff, phys, inc, incoming, backlog int64
	from := now.Add(-eta.WindowDefault)
	_, err = pgx.ForEachRow(rows, []any{&at, &el, &ac, &eff, &phys, &inc, &backlog}, func() error {
		iv := eta.Interval{End: at, Active: seconds(ac), Effective: eff, Physical: phys}
		if backlog > 0 { // transfer was wanted: the allowed part of the stretch
			iv.Open = seconds(el)
			if win != nil {
				iv.Open = win.OpenDuration(at.Add(-seconds(el)), at)
			}
		}
		meter.Add(iv)
		if at.After(from) {
			elapsed, incoming = elapsed+el, incoming+inc
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("%w: backlog: %w", ErrStore, err)
	}
	in := eta.Input{Now: now, RemainingRaw: toSend + out.UnreadRawBytes, Ratio: eta.Known(ratio, measured), Meter: meter, RateLimit: limit,
		Window: win}
	if elapsed > 0 {
		in.IncomingRate = float64(incoming) / elapsed
	}
	out.ETA = eta.Compute(in)
	return out, nil
}

// seconds is s seconds as a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
