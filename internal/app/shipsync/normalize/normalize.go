package normalize

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// The platform's columns of a revisioned table (seed 004 §5.2): the
// revision token the row is at, the node of its last business change, the
// remote event the platform applied to it last (NULL after a local write),
// and when the platform wrote it. Matched case-insensitively; never carried
// in an event (the shore refuses them).
const (
	ColumnRevision  = "_sync_revision"
	ColumnOrigin    = "_sync_origin"
	ColumnEventID   = "_sync_event_id"
	ColumnUpdatedAt = "_sync_updated_at"
)

// Config configures a Normalizer.
type Config struct {
	// NodeID is this ship's node id: the origin of its local writes and of
	// every event it emits. Required.
	NodeID string
	// ConnectorID is the capture instance (source_connector_id). Required.
	ConnectorID string
	// ReplayEpoch is the controlled replay generation, part of every event
	// id: rebuilding a topic, resetting the connector or a manual replay
	// must use a new epoch (seed 004 §7.4). Zero is a valid epoch.
	ReplayEpoch uint32
	// SchemaVersion is written into every event (default
	// wire.CurrentVersion).
	SchemaVersion string
	// BlockUnknownTables makes a change of a table no rule selects a Block
	// ("no-rule") instead of the default Skip. The default is Skip because
	// the connector's table include list decides what is captured, and a
	// captured table without a rule is simply not synced; a deployment that
	// wants every captured table accounted for turns this on.
	BlockUnknownTables bool
	// SupportedMajors are the schema majors the emitted events are checked
	// against (default wire.SupportedMajorsDefault).
	SupportedMajors []uint32
	// Side is where the captured database is: SideShip (the default), whose
	// rules emit for UPLINK and BOTH, or SideShore, whose rules emit for
	// DOWNLINK and BOTH (the shore's local writes become downlink commands).
	Side Side
}

// Side is which end of the link a Normalizer captures.
type Side int

// Sides. The zero value is the ship.
const (
	SideShip Side = iota
	SideShore
)

// emits reports whether a rule of direction d produces events on side s.
func (s Side) emits(r *Rule) bool {
	if s == SideShore {
		return r.Direction == DirectionDownlink || r.Direction == DirectionBoth
	}
	return r.Uplink()
}

// Source is where the raw record was read: its queue topic, partition and
// offset.
type Source struct {
	Topic     string
	Partition int32
	Offset    int64
}

// AppliedCommand is what this node recorded when it applied a downlink
// command (its applied_command row): the operation it applied and the
// revision it wrote (for a DELETE, the tombstone revision).
type AppliedCommand struct {
	Operation      pb.Operation
	ResultRevision string
}

// AppliedLookup finds a remote change this side applied, by the id the
// applier stamped into _sync_event_id and the _sync_origin it wrote beside
// it: on a ship, a downlink command in applied_command (the origin is the
// shore's and may be ignored); on the shore, an uplink event of that origin
// node in the inbox. found is false when there is none; err only for a
// failed lookup (ctx governs it).
type AppliedLookup interface {
	Applied(ctx context.Context, origin, eventID string) (cmd AppliedCommand, found bool, err error)
}

// Disposition is what the client does with a normalised record.
type Disposition int

// Dispositions. The zero value is not a disposition.
const (
	// Emit: Outcome.Event is to be queued for upload (the client assigns
	// its source_sequence).
	Emit Disposition = iota + 1
	// Skip: nothing to send, by design (Outcome.Reason says why); the
	// record is done and its offset may be passed.
	Skip
	// Block: the record cannot be sent as is and must not be dropped: the
	// client records it in its blocked queue with Reason and Detail, alerts,
	// and does not let the partition's checkpoint pass it.
	Block
)

// String returns "emit", "skip" or "block".
func (d Disposition) String() string {
	switch d {
	case Emit:
		return "emit"
	case Skip:
		return "skip"
	case Block:
		return "block"
	}
	return "unknown"
}

// Reason codes of Skip and Block outcomes: stable, low-cardinality (metric
// labels), documented in docs/shipsync/normalize.md.
const (
	// Skip reasons.
	ReasonTombstone      = "tombstone"       // Debezium's compaction marker after a delete
	ReasonNoRule         = "no-rule"         // no rule selects the table (Block with Config.BlockUnknownTables)
	ReasonDirection      = "direction"       // the rule does not sync this side's changes
	ReasonFiltered       = "filtered"        // the row fails the rule's row filter
	ReasonOutsideWindow  = "outside-window"  // business time before the dataset window's start
	ReasonLoopSuppressed = "loop-suppressed" // the change is this node's remote applier's own write

	// Block reasons.
	ReasonTruncate            = "truncate"              // TRUNCATE of a synced table: no per-row events
	ReasonUnknownOrigin       = "unknown-origin"        // origin cannot be confirmed (alert)
	ReasonMissingRevision     = "missing-revision"      // _sync_revision absent, NULL, empty or not a UUID
	ReasonRevisionUnchanged   = "revision-unchanged"    // an UPDATE that did not produce a new revision
	ReasonBusinessTimeInvalid = "business-time-invalid" // NULL / unreadable / future business time under a window, or unreadable
	ReasonColumnMissing       = "column-missing"        // a column the rule names is not in the row image
	ReasonKeyMismatch         = "key-mismatch"          // the record's key columns are not the rule's key_columns
	ReasonFilterInvalid       = "filter-invalid"        // a filter value does not read as the column's type
	ReasonTransformInvalid    = "transform-invalid"     // a transform met a value type it does not handle
	ReasonUnrevisionedDelete  = "unrevisioned-delete"   // a DELETE under a rule that is not revisioned
	ReasonCaptureTimeMissing  = "capture-time-missing"  // neither source.ts nor ts_ms
	ReasonUnsupportedOp       = "unsupported-op"        // an op this package does not know
	ReasonInvalidEvent        = "invalid-event"         // the built event fails wire.ValidateEvent (Detail: field and problem)
)

// Outcome is the result of normalising one record.
type Outcome struct {
	Disposition Disposition
	// Reason is a Reason... code when Disposition is not Emit.
	Reason string
	// Detail is a bounded, payload-free explanation (column names and
	// field paths, never a row value or a whole key).
	Detail string
	// Event is set when Disposition is Emit; its SourceSequence is 0 (the
	// client assigns it).
	Event *pb.ChangeEvent
	// Rule is the rule that selected the record (nil for "no-rule" and
	// "tombstone").
	Rule *Rule
	// Priority is Rule's priority (0 without a rule).
	Priority Priority
	// RawBytes is proto.Size(Event) (without the source_sequence the
	// client adds: at most 11 bytes more).
	RawBytes int
}

// ErrNoTrustedTime: a rule with a dataset window needs a trusted now, and
// the caller passed the zero time (the client has not established one).
var ErrNoTrustedTime = errors.New("normalize: no trusted time for a windowed rule")

// maxDetail bounds Outcome.Detail.
const maxDetail = 200

// Normalizer is the ship-side rule runtime: it turns one decoded Debezium
// record into a ChangeEvent or a disposition. It is pure (no I/O, no clock:
// the trusted now is an argument; the applied-command lookup is the
// caller's) and safe for concurrent use.
type Normalizer struct {
	cfg     Config
	rules   *RuleSet
	applied AppliedLookup
}

// New returns a Normalizer, or an error naming the bad Config field.
// applied is required when any rule is revisioned (loop suppression needs
// it).
func New(cfg Config, rules *RuleSet, applied AppliedLookup) (*Normalizer, error) {
	cfg.SchemaVersion = cmp.Or(cfg.SchemaVersion, wire.CurrentVersion.String())
	if len(cfg.SupportedMajors) == 0 {
		cfg.SupportedMajors = wire.SupportedMajorsDefault
	}
	switch {
	case !ident(cfg.NodeID):
		return nil, errors.New("normalize: config NodeID: must be 1–256 printable characters")
	case !ident(cfg.ConnectorID):
		return nil, errors.New("normalize: config ConnectorID: must be 1–256 printable characters")
	}
	if _, err := wire.CheckVersion(cfg.SchemaVersion, cfg.SupportedMajors); err != nil {
		return nil, fmt.Errorf("normalize: config SchemaVersion: %w", err)
	}
	if applied == nil {
		for _, r := range rules.Rules() {
			if r.Revisioned && cfg.Side.emits(r) {
				return nil, fmt.Errorf("normalize: applied lookup is nil but rule %q is revisioned", bound(r.ID, 64))
			}
		}
	}
	return &Normalizer{cfg: cfg, rules: rules, applied: applied}, nil
}

func ident(s string) bool { return s != "" && len(s) <= wire.MaxIdentLen && printable(s) }

// Normalize turns one decoded record read at src into an Outcome, with
// trustedNow the client's last trusted time (used only by dataset windows;
// zero is refused for a windowed rule with ErrNoTrustedTime). Everything
// about the data is an Outcome; the error is only for infrastructure: the
// applied-command lookup failed (ctx governs it), no trusted time, or a
// caller bug (nil event, a Source without topic or with a negative
// partition or offset). The decoded event is not modified.
//
// The steps follow seed 004 §8.3: rule and direction; origin and loop
// suppression; row filter and dataset window; column selection, mapping
// and transforms; the event, its id and size. Every emitted event passes
// wire.ValidateEvent (with a source_sequence set).
func (n *Normalizer) Normalize(ctx context.Context, src Source, ev *cdc.Event, trustedNow time.Time) (Outcome, error) {
	switch {
	case ev == nil:
		return Outcome{}, errors.New("normalize: nil event")
	case src.Topic == "" || src.Partition < 0 || src.Offset < 0:
		return Outcome{}, errors.New("normalize: source needs a topic, a partition ≥ 0 and an offset ≥ 0")
	}
	if ev.Op == cdc.OpTombstone {
		return Outcome{Disposition: Skip, Reason: ReasonTombstone}, nil
	}
	rule := n.rules.Lookup(ev.Source.DB, ev.Source.Table)
	if rule == nil {
		d := Skip
		if n.cfg.BlockUnknownTables {
			d = Block
		}
		return Outcome{Disposition: d, Reason: ReasonNoRule, Detail: "no rule selects the table"}, nil
	}
	r := &run{n: n, rule: rule, ev: ev, src: src, now: trustedNow}
	return r.do(ctx)
}

// run is one Normalize call.
type run struct {
	n    *Normalizer
	rule *Rule
	ev   *cdc.Event
	src  Source
	now  time.Time
	op   pb.Operation
	// image is the row the rule reads (after; before for DELETE).
	image *pb.RowImage
	base  string
	res   string
}

func (r *run) out(d Disposition, reason, detail string) Outcome {
	return Outcome{Disposition: d, Reason: reason, Detail: bound(detail, maxDetail), Rule: r.rule, Priority: r.rule.Priority}
}

func (r *run) do(ctx context.Context) (Outcome, error) {
	if !r.n.cfg.Side.emits(r.rule) {
		if r.n.cfg.Side == SideShore {
			return r.out(Skip, ReasonDirection, "the rule is UPLINK only"), nil
		}
		return r.out(Skip, ReasonDirection, "the rule is DOWNLINK only"), nil
	}
	switch r.ev.Op {
	case cdc.OpTruncate:
		return r.out(Block, ReasonTruncate, "TRUNCATE of a synced table has no per-row events; resync the table"), nil
	case cdc.OpCreate:
		r.op, r.image = pb.Operation_OPERATION_INSERT, r.ev.After
	case cdc.OpUpdate:
		r.op, r.image = pb.Operation_OPERATION_UPDATE, r.ev.After
	case cdc.OpDelete:
		r.op, r.image = pb.Operation_OPERATION_DELETE, r.ev.Before
	case cdc.OpRead:
		r.op, r.image = pb.Operation_OPERATION_SNAPSHOT, r.ev.After
	default:
		return r.out(Block, ReasonUnsupportedOp, "op "+strconv.Quote(bound(r.ev.Op.String(), 8))), nil
	}
	if r.image == nil {
		return r.out(Block, ReasonColumnMissing, "no row image for the op"), nil
	}
	if o, ok := r.checkKey(); !ok {
		return o, nil
	}
	if r.rule.Revisioned {
		if o, ok := r.revisions(); !ok {
			return o, nil
		}
		if o, ok, err := r.origin(ctx); err != nil || !ok {
			return o, err
		}
		// After the origin check: the remote applier's stamp before a
		// delete is an UPDATE that keeps the revision, and is suppressed.
		if r.op == pb.Operation_OPERATION_UPDATE && strings.EqualFold(r.base, r.res) {
			return r.out(Block, ReasonRevisionUnchanged, "UPDATE whose after._sync_revision equals before's: the write made no new revision"), nil
		}
	} else if r.op == pb.Operation_OPERATION_DELETE {
		return r.out(Block, ReasonUnrevisionedDelete, "a rule that is not revisioned has no base revision to delete over"), nil
	}
	if o, ok := r.filter(); !ok {
		return o, nil
	}
	business, o, ok, err := r.businessTime()
	if err != nil || !ok {
		return o, err
	}
	return r.build(business), nil
}

// checkKey requires the record's key columns to be the rule's, in order.
func (r *run) checkKey() (Outcome, bool) {
	if len(r.ev.Key) != len(r.rule.KeyColumns) {
		return r.out(Block, ReasonKeyMismatch, fmt.Sprintf("the record has %d key columns, the rule %d", len(r.ev.Key), len(r.rule.KeyColumns))), false
	}
	for i, c := range r.ev.Key {
		if c.GetName() != r.rule.KeyColumns[i] {
			return r.out(Block, ReasonKeyMismatch, fmt.Sprintf("key column %d is not key_columns[%d]", i, i)), false
		}
	}
	return Outcome{}, true
}

// revisions reads base and result revisions (seed 004 §5.2): base =
// before._sync_revision, result = after._sync_revision; a DELETE's result is
// its tombstone. Nothing is guessed: a missing revision blocks.
func (r *run) revisions() (Outcome, bool) {
	var err string
	switch r.op {
	case pb.Operation_OPERATION_INSERT, pb.Operation_OPERATION_SNAPSHOT:
		r.res, err = revision(r.ev.After, "after")
	case pb.Operation_OPERATION_UPDATE:
		if r.ev.Before == nil {
			return r.out(Block, ReasonMissingRevision, "UPDATE without a before image (binlog_row_image must be FULL)"), false
		}
		if r.base, err = revision(r.ev.Before, "before"); err == "" {
			r.res, err = revision(r.ev.After, "after")
		}
	case pb.Operation_OPERATION_DELETE:
		if r.base, err = revision(r.ev.Before, "before"); err == "" {
			r.res = TombstoneRevision(r.n.cfg.NodeID, r.base, r.ev.Key)
		}
	}
	if err != "" {
		return r.out(Block, ReasonMissingRevision, err), false
	}
	return Outcome{}, true
}

// revision reads img's _sync_revision: CHAR(36) UUID text as stored, or
// BINARY(16) as canonical text. "" error text when fine.
func revision(img *pb.RowImage, side string) (string, string) {
	c := syncColumn(img, ColumnRevision)
	if c == nil {
		return "", side + " has no _sync_revision column"
	}
	if _, null := c.Value.(*pb.ColumnValue_Null); null {
		return "", side + "._sync_revision is NULL"
	}
	v, ok := uuidText(c)
	if !ok {
		return "", side + "._sync_revision is empty or not a UUID"
	}
	return v, ""
}

// uuidText reads a UUID column: 8-4-4-4-12 text (kept as written) or 16
// bytes.
func uuidText(c *pb.ColumnValue) (string, bool) {
	switch x := c.Value.(type) {
	case *pb.ColumnValue_StringValue:
		if len(x.StringValue) == 36 {
			if _, err := uuid.Parse(x.StringValue); err == nil {
				return x.StringValue, true
			}
		}
	case *pb.ColumnValue_BytesValue:
		if u, err := uuid.FromBytes(x.BytesValue); err == nil {
			return u.String(), true
		}
	}
	return "", false
}

// syncColumn finds a platform column (case-insensitive) in img.
func syncColumn(img *pb.RowImage, name string) *pb.ColumnValue {
	for _, c := range img.GetColumns() {
		if strings.EqualFold(c.GetName(), name) {
			return c
		}
	}
	return nil
}

// origin checks who made the change (seed 004 §12). A row the remote
// applier wrote carries the command's event id in _sync_event_id: if this
// node applied that command and the row is still at the revision it wrote,
// the change is the applier's own — suppressed; otherwise it cannot be
// explained and blocks. A local write clears _sync_event_id and must carry
// this node as _sync_origin (an empty _sync_event_id counts as cleared, like
// NULL). A DELETE is the applier's own when the row was
// stamped with an applied DELETE command's id just before it was deleted; a
// delete of a row last written remotely by another command is a local
// delete.
func (r *run) origin(ctx context.Context) (Outcome, bool, error) {
	img := r.image
	side := "after"
	if r.op == pb.Operation_OPERATION_DELETE {
		side = "before"
	}
	ec := syncColumn(img, ColumnEventID)
	if ec == nil {
		return r.out(Block, ReasonUnknownOrigin, side+" has no _sync_event_id column"), false, nil
	}
	if !cleared(ec) {
		id, ok := uuidText(ec)
		if !ok {
			return r.out(Block, ReasonUnknownOrigin, side+"._sync_event_id is not a UUID"), false, nil
		}
		var origin string
		if oc, ok := syncColumn(img, ColumnOrigin).GetValue().(*pb.ColumnValue_StringValue); ok {
			origin = oc.StringValue
		}
		cmd, found, err := r.n.applied.Applied(ctx, origin, id)
		if err != nil {
			return Outcome{}, false, fmt.Errorf("normalize: applied-command lookup: %w", err)
		}
		del := cmd.Operation == pb.Operation_OPERATION_DELETE
		switch {
		case !found:
			return r.out(Block, ReasonUnknownOrigin, side+"._sync_event_id names a command this node did not apply (alert: a remote write of unknown origin)"), false, nil
		case r.op == pb.Operation_OPERATION_DELETE && del:
			return r.out(Skip, ReasonLoopSuppressed, "the row was deleted by an applied downlink DELETE"), false, nil
		case r.op == pb.Operation_OPERATION_DELETE:
			return Outcome{}, true, nil // a local delete of a row last written remotely
		case r.op == pb.Operation_OPERATION_UPDATE && del:
			// The applier's stamp of the command's id just before its delete.
			return r.out(Skip, ReasonLoopSuppressed, "the remote applier's stamp before an applied downlink DELETE"), false, nil
		case strings.EqualFold(cmd.ResultRevision, r.res): // UUIDs: case does not matter
			return r.out(Skip, ReasonLoopSuppressed, "the row is as an applied downlink command wrote it"), false, nil
		default:
			return r.out(Block, ReasonUnknownOrigin, "after._sync_revision differs from the applied command's result but _sync_event_id was kept (alert: a local write must clear it)"), false, nil
		}
	}
	if r.op == pb.Operation_OPERATION_DELETE {
		return Outcome{}, true, nil
	}
	oc := syncColumn(img, ColumnOrigin)
	if oc == nil {
		return r.out(Block, ReasonUnknownOrigin, "after has no _sync_origin column"), false, nil
	}
	if s, ok := oc.Value.(*pb.ColumnValue_StringValue); !ok || s.StringValue != r.n.cfg.NodeID {
		return r.out(Block, ReasonUnknownOrigin, "after._sync_origin is not this node and _sync_event_id is NULL (alert)"), false, nil
	}
	return Outcome{}, true, nil
}

// cleared reports whether a _sync_event_id holds no event: NULL, or the
// empty string some applications write when they clear it.
func cleared(c *pb.ColumnValue) bool {
	switch x := c.Value.(type) {
	case *pb.ColumnValue_Null:
		return true
	case *pb.ColumnValue_StringValue:
		return x.StringValue == ""
	case *pb.ColumnValue_BytesValue:
		return len(x.BytesValue) == 0
	}
	return false
}

// filter evaluates the rule's row filter on the rule's image.
func (r *run) filter() (Outcome, bool) {
	for i, c := range r.rule.c.filter {
		v := column(r.image, c.column)
		if v == nil {
			return r.out(Block, ReasonColumnMissing, fmt.Sprintf("row_filter[%d] column %s is not in the row", i, quoteName(c.column))), false
		}
		ok, err := c.match(v)
		if err != nil {
			return r.out(Block, ReasonFilterInvalid, fmt.Sprintf("row_filter[%d]: %v", i, err)), false
		}
		if !ok {
			return r.out(Skip, ReasonFiltered, fmt.Sprintf("row_filter[%d] does not hold", i)), false
		}
	}
	return Outcome{}, true
}

// column finds a column by exact name.
func column(img *pb.RowImage, name string) *pb.ColumnValue {
	for _, c := range img.GetColumns() {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

func quoteName(s string) string { return strconv.Quote(bound(s, 64)) }

// businessTime reads the rule's business time and applies its dataset
// window (seed 004 §14.1): eligible when business time ≥ trustedNow −
// window (left-closed). Under a window a NULL, unreadable or future (past
// the skew) business time blocks; it is never replaced by the capture time.
// Without a window a NULL leaves business_occurred_at absent and an
// unreadable value blocks.
func (r *run) businessTime() (*timestamppb.Timestamp, Outcome, bool, error) {
	col := r.rule.BusinessTimeColumn
	if col == "" {
		return nil, Outcome{}, true, nil
	}
	win := r.rule.HasWindow()
	if win && r.now.IsZero() {
		return nil, Outcome{}, false, ErrNoTrustedTime
	}
	v := column(r.image, col)
	if v == nil {
		return nil, r.out(Block, ReasonColumnMissing, "business_time_column "+quoteName(col)+" is not in the row"), false, nil
	}
	t, null, ok := r.instant(v)
	switch {
	case null && !win:
		return nil, Outcome{}, true, nil
	case null:
		return nil, r.out(Block, ReasonBusinessTimeInvalid, "business time is NULL under a dataset window"), false, nil
	case !ok:
		return nil, r.out(Block, ReasonBusinessTimeInvalid, "business time does not read as a time"), false, nil
	}
	ts := timestamppb.New(t)
	if ts.CheckValid() != nil {
		return nil, r.out(Block, ReasonBusinessTimeInvalid, "business time out of range"), false, nil
	}
	if win {
		if t.After(r.now.Add(r.rule.c.skew)) {
			return nil, r.out(Block, ReasonBusinessTimeInvalid, "business time is further in the future than future_skew"), false, nil
		}
		if t.Before(r.rule.WindowStart(r.now)) {
			return nil, r.out(Skip, ReasonOutsideWindow, "business time before the dataset window's start"), false, nil
		}
	}
	return ts, Outcome{}, true, nil
}

// instant reads a business time: a timestamp as is, a DATE as its midnight
// in the rule's zone, text as RFC 3339 with an offset.
func (r *run) instant(v *pb.ColumnValue) (t time.Time, null, ok bool) {
	switch x := v.Value.(type) {
	case *pb.ColumnValue_Null:
		return time.Time{}, true, false
	case *pb.ColumnValue_TimestampValue:
		if x.TimestampValue.CheckValid() != nil {
			return time.Time{}, false, false
		}
		return x.TimestampValue.AsTime(), false, true
	case *pb.ColumnValue_DateValue:
		d, err := time.ParseInLocation(time.DateOnly, x.DateValue, r.rule.c.zone)
		return d, false, err == nil
	case *pb.ColumnValue_StringValue:
		d, err := time.Parse(time.RFC3339Nano, x.StringValue)
		return d, false, err == nil
	}
	return time.Time{}, false, false
}

// project selects, transforms and renames an image's columns for the
// event: _sync_* columns are dropped, then included/excluded columns
// applied, transforms run and mappings renamed. The decoded image is not
// modified.
func (r *run) project(img *pb.RowImage, side string) (*pb.RowImage, Outcome, bool) {
	rc := &r.rule.c
	out := &pb.RowImage{Columns: make([]*pb.ColumnValue, 0, len(img.GetColumns()))}
	seen := 0
	for _, c := range img.GetColumns() {
		name := c.GetName()
		if isSyncColumn(name) || rc.excluded[name] || (len(rc.included) > 0 && !rc.included[name]) {
			continue
		}
		if rc.included[name] {
			seen++
		}
		v := c
		for i, t := range rc.transforms[name] {
			if _, null := v.Value.(*pb.ColumnValue_Null); null {
				break
			}
			nv, err := t.t.Apply(v, t.args)
			if err != nil {
				return nil, r.out(Block, ReasonTransformInvalid, fmt.Sprintf("%s column %s transform %d: %v", side, quoteName(name), i, err)), false
			}
			v = nv
		}
		if v == c {
			v = proto.Clone(c).(*pb.ColumnValue)
		}
		if to, ok := r.rule.FieldMappings[name]; ok {
			v.Name = to
		}
		out.Columns = append(out.Columns, v)
	}
	if seen < len(rc.included) {
		for _, name := range r.rule.IncludedColumns {
			if column(img, name) == nil {
				return nil, r.out(Block, ReasonColumnMissing, fmt.Sprintf("included column %s is not in the %s image", quoteName(name), side)), false
			}
		}
	}
	return out, Outcome{}, true
}

// build assembles, identifies and checks the event.
func (r *run) build(business *timestamppb.Timestamp) Outcome {
	ev, cfg := r.ev, r.n.cfg
	id := EventID(IDInput{Origin: cfg.NodeID, ReplayEpoch: cfg.ReplayEpoch, Topic: r.src.Topic, Partition: r.src.Partition,
		Offset: r.src.Offset, Database: ev.Source.DB, Table: ev.Source.Table, Key: ev.Key, Operation: r.op})
	captured := ev.Source.Timestamp
	if captured.IsZero() {
		captured = ev.ProcessedAt
	}
	if captured.IsZero() {
		return r.out(Block, ReasonCaptureTimeMissing, "neither source.ts_ms nor ts_ms is set")
	}
	ce := &pb.ChangeEvent{
		SchemaVersion:      cfg.SchemaVersion,
		EventId:            id.String(),
		OriginNodeId:       cfg.NodeID,
		SourceConnectorId:  cfg.ConnectorID,
		SourcePartition:    r.src.Topic + "/" + strconv.Itoa(int(r.src.Partition)),
		SourcePosition:     proto.Uint64(uint64(r.src.Offset)),
		RuleId:             r.rule.ID,
		RuleVersion:        r.rule.Version,
		Database:           ev.Source.DB,
		Table:              ev.Source.Table,
		Operation:          r.op,
		BaseRevision:       r.base,
		ResultRevision:     r.res,
		BusinessOccurredAt: business,
		CapturedAt:         timestamppb.New(captured),
		TraceId:            TraceID(id),
	}
	if !r.rule.Revisioned {
		ce.ResultRevision = OverwriteRevision(id)
		if r.op == pb.Operation_OPERATION_UPDATE {
			// An overwrite: the row as it now is, with no base to be
			// conditional on (see Rule.Revisioned).
			ce.Operation = pb.Operation_OPERATION_SNAPSHOT
		}
	}
	if t := ev.Transaction; t != nil && t.ID != "" {
		ce.TransactionId = t.ID
		ce.TransactionOrder = proto.Uint64(t.TotalOrder)
	}
	ce.PrimaryKey = make([]*pb.ColumnValue, len(ev.Key))
	for i, k := range ev.Key {
		c := proto.Clone(k).(*pb.ColumnValue)
		if to, ok := r.rule.FieldMappings[c.Name]; ok {
			c.Name = to
		}
		ce.PrimaryKey[i] = c
	}
	if ce.Operation != pb.Operation_OPERATION_DELETE {
		img, o, ok := r.project(ev.After, "after")
		if !ok {
			return o
		}
		ce.After = img
	}
	if ce.Operation == pb.Operation_OPERATION_UPDATE || ce.Operation == pb.Operation_OPERATION_DELETE {
		if ev.Before != nil {
			img, o, ok := r.project(ev.Before, "before")
			if !ok {
				return o
			}
			ce.Before = img
		}
	}
	ce.SourceSequence = 1
	err := wire.ValidateEvent(ce, cfg.SupportedMajors)
	ce.SourceSequence = 0
	if err != nil {
		var fe *wire.FieldError
		detail := "the event fails validation"
		if errors.As(err, &fe) {
			detail = fe.Field + ": " + fe.Problem
		}
		return r.out(Block, ReasonInvalidEvent, detail)
	}
	o := r.out(Emit, "", pkChangeDetail(ev))
	o.Event = ce
	o.RawBytes = proto.Size(ce)
	return o
}

// pkChangeDetail notes the halves of a primary-key change (Debezium's
// DELETE with __debezium.newkey and CREATE with __debezium.oldkey): each is
// emitted as what it is, DELETE of the old key and INSERT of the new.
func pkChangeDetail(ev *cdc.Event) string {
	if _, ok := ev.Header(cdc.HeaderNewKey); ok && ev.Op == cdc.OpDelete {
		return "primary-key change: delete of the old key"
	}
	if _, ok := ev.Header(cdc.HeaderOldKey); ok && ev.Op == cdc.OpCreate {
		return "primary-key change: insert of the new key"
	}
	return ""
}
