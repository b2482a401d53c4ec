package snapshot

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/relaytype"
)

// ChunkReader reads a table's rows in key order (capture.SnapshotReader).
type ChunkReader interface {
	Chunk(ctx context.Context, after [][]byte, limit int, at time.Time) ([]capture.SnapshotRecord, error)
}

// Config configures a Runner. Every field without a default is required.
type Config struct {
	NodeID string
	Store  *Store
	// Rules are the node's rules (the ones its normaliser runs).
	Rules *normalize.RuleSet
	// Normalizer and Decoder are the client's: a snapshot row is decoded
	// and normalised like a change.
	Normalizer client.Normalizer
	Decoder    *cdc.Decoder
	Codec      *wire.Codec
	// TopicPrefix is the CDC topics' prefix (client.Config.TopicPrefix): a
	// rule's topic is TopicPrefix + database + "." + table.
	TopicPrefix string
	// Reader opens the chunk reader of a table (ctx governs the opening).
	Reader func(ctx context.Context, database, table string) (ChunkReader, error)
	// Ends returns the end offsets (next offset to be written) of every
	// partition of topic.
	Ends func(ctx context.Context, topic string) (map[int32]int64, error)
	// Terminal returns the client's uplink checkpoints
	// (client.Store.Watermarks).
	Terminal func(ctx context.Context) (map[client.TP]client.Watermark, error)
	// Upload sends one encoded batch (client.Transport.Upload).
	Upload func(ctx context.Context, body []byte) (*pb.UploadResponse, error)
	// MayTransfer, when set, says whether a rule of that priority may send
	// now (client.Client.MayTransfer: a BULK rule only inside its transfer
	// window); a task whose rule may not waits, reading nothing.
	MayTransfer func(normalize.Priority) bool
	// ChunkRows is how many rows one chunk reads and one batch carries
	// (default ChunkRowsDefault; at most wire's 500 events per batch).
	ChunkRows int
	// Every is how often Run steps the tasks when nothing moved (default 1 s).
	Every  time.Duration
	Clock  relaytype.Clock
	Logger *slog.Logger
	// Fault, when set, is called at each of the runner's fault points (the
	// faultpoint names of this package); an error stops the step there as
	// a crash would. Tests use it; the crash harness uses RELAY_FAULTPOINTS.
	Fault func(point string) error
}

// Defaults of Config.
const (
	ChunkRowsDefault    = 200
	LagThresholdDefault = 100
)

// Runner runs the node's snapshot tasks and is the client's catch-up
// barrier (Hold) and filter (Filter). Safe for concurrent use.
type Runner struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	tasks []Task // unfinished ones, and the latest finished one per rule
}

// New returns a Runner with cfg's tasks loaded (ctx governs the load).
func New(ctx context.Context, cfg Config) (*Runner, error) {
	switch {
	case cfg.NodeID == "" || cfg.Store == nil || cfg.Rules == nil || cfg.Normalizer == nil || cfg.Decoder == nil ||
		cfg.Codec == nil || cfg.Reader == nil || cfg.Ends == nil || cfg.Terminal == nil || cfg.Upload == nil || cfg.Clock == nil:
		return nil, errors.New("snapshot: config needs NodeID, Store, Rules, Normalizer, Decoder, Codec, Reader, Ends, Terminal, Upload and Clock")
	case cfg.ChunkRows < 0 || cfg.ChunkRows > 500:
		return nil, fmt.Errorf("snapshot: config ChunkRows %d: must be 0 (default) to 500", cfg.ChunkRows)
	}
	cfg.ChunkRows = cmp.Or(cfg.ChunkRows, ChunkRowsDefault)
	cfg.Every = cmp.Or(cfg.Every, time.Second)
	r := &Runner{cfg: cfg, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))}
	if _, err := r.refresh(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// refresh reloads the tasks and returns the unfinished ones.
func (r *Runner) refresh(ctx context.Context) ([]Task, error) {
	all, err := r.cfg.Store.Tasks(ctx)
	if err != nil {
		return nil, err
	}
	latest := map[string]int{}
	var keep []Task
	for _, t := range all {
		if t.State == Failed {
			continue
		}
		if i, ok := latest[t.RuleID]; ok {
			keep[i] = t // tasks are oldest first: the later one wins
			continue
		}
		latest[t.RuleID] = len(keep)
		keep = append(keep, t)
	}
	r.mu.Lock()
	r.tasks = keep
	r.mu.Unlock()
	var open []Task
	for _, t := range all {
		if !t.State.Finished() {
			open = append(open, t)
		}
	}
	return open, nil
}

// Topic is the CDC topic of database.table.
func (r *Runner) Topic(database, table string) string {
	return r.cfg.TopicPrefix + database + "." + table
}

// Hold reports whether the client must not yet process the record at
// tp/offset: a task of the record's table holds its rule's changes from
// the pinned position on until the shore applied the baseline (the whole
// topic while the position is not pinned yet).
func (r *Runner) Hold(tp client.TP, offset int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.tasks {
		t := &r.tasks[i]
		if !t.State.Holding() || r.Topic(t.Database, t.Table) != tp.Topic {
			continue
		}
		if pin, ok := t.Pinned(tp.Topic, tp.Partition); !ok || offset >= pin {
			return true
		}
	}
	return false
}

// Run steps the tasks until ctx ends (then nil). A step that fails — the
// queue, the ship database or the state store unreachable for a while — is
// logged and tried again after Every: every step starts from the stored
// state, so a failed one is a restart in small.
func (r *Runner) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		moved, err := r.Step(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "shipsync snapshot: step failed; trying again", "err", err, "wait", r.cfg.Every)
			moved = false
		}
		if moved {
			continue
		}
		select {
		case <-ctx.Done():
		case <-r.cfg.Clock.After(r.cfg.Every):
		}
	}
	return nil
}

// Step moves every unfinished task one step and reports whether any moved.
// A task's own failure (a row that cannot be sent, a refused event, a rule
// version changed under it) fails that task; the error is for what may
// pass (the state store, the queue's offsets, the ship database) and for a
// fault point: the next step resumes from the stored state.
func (r *Runner) Step(ctx context.Context) (bool, error) {
	open, err := r.refresh(ctx)
	if err != nil {
		return false, err
	}
	moved := false
	for i := range open {
		m, err := r.step(ctx, &open[i])
		var te *taskError
		if errors.As(err, &te) {
			r.log.ErrorContext(ctx, "shipsync snapshot: task failed", "task", open[i].ID, "rule", open[i].RuleID, "err", te.msg)
			if err := r.cfg.Store.setState(ctx, open[i].ID, Failed, open[i].Lag, te.msg); err != nil {
				return moved, err
			}
			moved = true
			continue
		}
		if err != nil {
			return moved, err
		}
		moved = moved || m
	}
	if moved {
		_, err = r.refresh(ctx)
	}
	return moved, err
}

// taskError fails one task (its message is bounded and payload-free).
type taskError struct{ msg string }

func (e *taskError) Error() string { return "snapshot: " + e.msg }

func failTask(format string, args ...any) error { return &taskError{msg: fmt.Sprintf(format, args...)} }

// fault passes a fault point.
func (r *Runner) fault(point string) error {
	faultpoint.Hit(point)
	if r.cfg.Fault != nil {
		return r.cfg.Fault(point)
	}
	return nil
}

func (r *Runner) step(ctx context.Context, t *Task) (bool, error) {
	switch t.State {
	case Pending:
		return r.pending(ctx, t)
	case Baseline:
		return r.baseline(ctx, t)
	case CatchingUp:
		return r.catchUp(ctx, t)
	}
	return false, nil
}

// pending pins the start position (the barrier holds the whole topic
// until then: everything read before is below the end offsets read now),
// then waits until every change before it is final — so that no older
// change of a record can reach the shore after its snapshot row.
func (r *Runner) pending(ctx context.Context, t *Task) (bool, error) {
	pinned := false
	if t.Positions == nil {
		topic := r.Topic(t.Database, t.Table)
		ends, err := r.cfg.Ends(ctx, topic)
		if err != nil {
			return false, fmt.Errorf("snapshot: task %s: end offsets of %s: %w", t.ID, topic, err)
		}
		ps := make([]Position, 0, len(ends))
		for p, off := range ends {
			ps = append(ps, Position{Topic: topic, Partition: p, Offset: off})
		}
		sortPositions(ps)
		if err := r.cfg.Store.pin(ctx, t.ID, ps); err != nil {
			return false, err
		}
		t.Positions, pinned = ps, true
		if err := r.fault(faultpoint.ShipsyncSnapshotAfterPin); err != nil {
			return true, err
		}
	}
	terminal, err := r.terminal(ctx)
	if err != nil {
		return pinned, err
	}
	if !t.Drained(terminal) {
		return pinned, nil // a new pin is a move: the barrier narrows to it
	}
	return true, r.cfg.Store.setState(ctx, t.ID, Baseline, 0, "")
}

func (r *Runner) terminal(ctx context.Context) (map[Position]int64, error) {
	wms, err := r.cfg.Terminal(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[Position]int64, len(wms))
	for tp, w := range wms {
		out[Position{Topic: tp.Topic, Partition: tp.Partition}] = w.TerminalNext
	}
	return out, nil
}

// baseline sends what waits in the outbox, then reads and sends the next
// chunk; once the table is read and every SNAPSHOT event has its final
// result, the barrier lifts (CATCHING_UP).
func (r *Runner) baseline(ctx context.Context, t *Task) (bool, error) {
	if rule := r.cfg.Rules.Lookup(t.Database, t.Table); rule != nil && r.cfg.MayTransfer != nil &&
		!r.cfg.MayTransfer(rule.Priority) {
		return false, nil // outside the rule's transfer window: nothing read, nothing sent
	}
	pending, err := r.cfg.Store.outbox(ctx, t.ID)
	if err != nil {
		return false, err
	}
	for _, e := range pending {
		ok, err := r.send(ctx, t, e)
		if err != nil || !ok {
			return false, err
		}
	}
	if !t.ReadDone {
		c, err := r.read(ctx, t)
		if err != nil {
			return false, err
		}
		if err := r.cfg.Store.saveChunk(ctx, t, c); err != nil {
			return false, err
		}
		if err := r.fault(faultpoint.ShipsyncSnapshotAfterChunk); err != nil {
			return true, err
		}
		if c.Events != nil {
			if _, err := r.send(ctx, t, outboxEntry{No: c.No, Events: c.Events}); err != nil {
				return true, err
			}
		}
		return true, nil
	}
	n, err := r.cfg.Store.open(ctx, t)
	if err != nil || n > 0 {
		return false, err
	}
	return true, r.cfg.Store.setState(ctx, t.ID, CatchingUp, 0, "")
}

// read reads the task's next chunk and builds its events: each row decoded
// and normalised like a change, read at the task's own stream so that the
// same row of the same task always gets the same event id, and numbered in
// that stream.
func (r *Runner) read(ctx context.Context, t *Task) (chunk, error) {
	rd, err := r.cfg.Reader(ctx, t.Database, t.Table)
	if err != nil {
		var te *capture.TableError
		if errors.As(err, &te) {
			return chunk{}, failTask("table cannot be read: %v", err)
		}
		return chunk{}, err
	}
	now := r.cfg.Clock.Now()
	// A windowed task judges every row against its fixed boundary.
	judgeAt := now
	if !t.WindowNow.IsZero() {
		if rule := r.cfg.Rules.Lookup(t.Database, t.Table); rule == nil || !rule.HasWindow() {
			return chunk{}, failTask("a window reconcile's snapshot needs its rule to have a dataset window")
		}
		judgeAt = t.WindowNow
	}
	recs, err := rd.Chunk(ctx, t.Cursor, r.cfg.ChunkRows, now)
	if err != nil {
		return chunk{}, fmt.Errorf("snapshot: task %s: %w", t.ID, err)
	}
	c := chunk{No: t.Chunks, Cursor: t.Cursor, Done: len(recs) < r.cfg.ChunkRows, Rows: len(recs), NextSeq: t.NextSeq}
	topic := r.Topic(t.Database, t.Table)
	var evs []*pb.ChangeEvent
	for _, rec := range recs {
		c.Cursor = rec.Cursor
		ev, err := r.cfg.Decoder.Decode(cdc.Message{Topic: topic, Key: rec.Key, Value: rec.Value})
		if err != nil {
			return chunk{}, failTask("a row of %s.%s does not decode: %v", t.Database, t.Table, err)
		}
		o, err := r.cfg.Normalizer.Normalize(ctx, normalize.Source{Topic: t.Topic()}, ev, judgeAt)
		if err != nil {
			return chunk{}, err
		}
		hash := KeyHash(ev.Key)
		switch o.Disposition {
		case normalize.Skip:
			// Not synced (filtered, outside the window, the node's own
			// remote apply): nothing to send, but its revision is noted so
			// that the catch-up applies the record's later changes.
			c.Index = append(c.Index, chunkEvent{KeyHash: hash, Revision: rowRevision(ev)})
			continue
		case normalize.Block:
			if !t.WindowNow.IsZero() && o.Reason == normalize.ReasonBusinessTimeInvalid {
				// Neither inside nor outside the window: not sent, listed.
				c.Index = append(c.Index, chunkEvent{KeyHash: hash, Revision: rowRevision(ev), Problem: o.Detail})
				continue
			}
			return chunk{}, failTask("a row of %s.%s cannot be sent: %s (%s)", t.Database, t.Table, o.Reason, o.Detail)
		}
		e := o.Event
		if e.RuleId != t.RuleID || e.RuleVersion != t.RuleVersion {
			return chunk{}, failTask("the rule changed to %s version %d since the task began (version %d): start a new snapshot",
				e.RuleId, e.RuleVersion, t.RuleVersion)
		}
		e.SourceSequence = c.NextSeq
		e.SourcePosition = proto.Uint64(c.NextSeq)
		ce := chunkEvent{ID: e.EventId, Seq: c.NextSeq, RuleID: e.RuleId, RuleVersion: e.RuleVersion,
			Priority: int(o.Priority), RawBytes: o.RawBytes, CapturedAt: e.CapturedAt.AsTime(), KeyHash: hash,
			Revision: e.ResultRevision}
		if e.BusinessOccurredAt != nil {
			ce.BusinessAt = e.BusinessOccurredAt.AsTime()
		}
		c.NextSeq++
		c.Index = append(c.Index, ce)
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		return c, nil // only skipped rows (or none): nothing to send
	}
	if c.Events, err = proto.Marshal(&pb.EventList{Events: evs}); err != nil {
		return chunk{}, fmt.Errorf("snapshot: task %s: encode chunk: %w", t.ID, err)
	}
	return c, nil
}

// sortPositions orders positions by topic and partition.
func sortPositions(ps []Position) {
	slices.SortFunc(ps, func(a, b Position) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
}

// rowRevision is a row's _sync_revision as text ("" when it has none).
func rowRevision(ev *cdc.Event) string {
	for _, c := range ev.After.GetColumns() {
		if c.Name == normalize.ColumnRevision {
			return c.GetStringValue()
		}
	}
	return ""
}

// KeyHash is the SHA-256 of a record's source key (normalize.CanonicalKey).
func KeyHash(key []*pb.ColumnValue) []byte {
	h := sha256.Sum256(normalize.CanonicalKey(key))
	return h[:]
}

// send uploads one stored chunk and records the answer; ok when the shore
// received all of it. A chunk is sent again unchanged until it is: the
// shore stores each event once.
func (r *Runner) send(ctx context.Context, t *Task, e outboxEntry) (bool, error) {
	var list pb.EventList
	if err := proto.Unmarshal(e.Events, &list); err != nil {
		return false, failTask("stored chunk %d does not decode", e.No)
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	id[6], id[8] = id[6]&0x0f|0x40, id[8]&0x3f|0x80
	body, err := r.cfg.Codec.Encode(&wire.Batch{NodeID: r.cfg.NodeID, BatchID: wire.FormatUUID(id),
		Sequence: uint64(e.No) + 1, CreatedAt: r.cfg.Clock.Now(), Events: list.Events})
	if err != nil {
		return false, failTask("chunk %d does not encode: %v", e.No, err)
	}
	ur, err := r.cfg.Upload(ctx, body)
	if err != nil {
		r.log.WarnContext(ctx, "shipsync snapshot: upload failed; sent again on the next step", "task", t.ID, "chunk", e.No, "err", err)
		return false, nil
	}
	if err := r.fault(faultpoint.ShipsyncSnapshotAfterUpload); err != nil {
		return false, err
	}
	ids := make([]string, len(list.Events))
	for i, ev := range list.Events {
		ids[i] = ev.EventId
	}
	statuses, err := wire.ExpandStatuses(ur, ids)
	if err != nil || len(statuses) != len(ids) {
		r.log.WarnContext(ctx, "shipsync snapshot: upload answer unreadable; sent again", "task", t.ID, "chunk", e.No)
		return false, nil
	}
	var received []string
	refused := map[string]string{}
	retry := false
	for i, st := range statuses {
		switch st.Status {
		case pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED:
			received = append(received, ids[i])
		case pb.ReceiveStatus_RECEIVE_STATUS_RETRYABLE_FAILURE:
			retry = true
		default:
			refused[ids[i]] = st.Reason.String()
		}
	}
	if err := r.cfg.Store.received(ctx, t.ID, e.No, received, refused, !retry); err != nil {
		return false, err
	}
	for _, id := range ids {
		if why, ok := refused[id]; ok {
			return false, failTask("the shore refused %d SNAPSHOT event(s) of chunk %d (first: %s)", len(refused), e.No, why)
		}
	}
	return !retry, nil
}

// catchUp measures the lag of the rule's partitions from the pinned
// position on; under the threshold the task is COMPLETED.
func (r *Runner) catchUp(ctx context.Context, t *Task) (bool, error) {
	topic := r.Topic(t.Database, t.Table)
	ends, err := r.cfg.Ends(ctx, topic)
	if err != nil {
		return false, fmt.Errorf("snapshot: task %s: end offsets of %s: %w", t.ID, topic, err)
	}
	end := make(map[Position]int64, len(ends))
	for p, off := range ends {
		end[Position{Topic: topic, Partition: p}] = off
	}
	terminal, err := r.terminal(ctx)
	if err != nil {
		return false, err
	}
	lag := t.LagOf(end, terminal)
	if lag <= t.LagThreshold {
		return true, r.cfg.Store.setState(ctx, t.ID, Completed, lag, "")
	}
	if lag != t.Lag {
		return false, r.cfg.Store.setState(ctx, t.ID, CatchingUp, lag, "")
	}
	return false, nil
}
