package shorecrash

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// The rule and table of the harness's events.
const (
	ruleID     = "crash-item"
	table      = "item"
	node       = "ship-1"
	connector  = "crash-capture"
	noteMaxLen = 40
)

// Expected results of an event, as the model of the record says.
const (
	expectApplied  = "APPLIED"
	expectConflict = "CONFLICT_RECORDED"
	expectRejected = "REJECTED"
)

// planned is one event of the workload and what must become of it.
type planned struct {
	ev     *pb.ChangeEvent
	expect string
}

// record is the model of one record: what the shore database must hold.
type record struct {
	id      int64
	exists  bool
	rev     string
	note    string
	eventID string // the last event that wrote the row (insert or update)
}

// workload is every event of a run, per stream in sequence order, and the
// records' final states.
type workload struct {
	streams map[string][]planned // partition → events in sequence order
	records []*record
	total   int
}

// uuidOf is a stable UUID (version-5 shaped) of parts.
func uuidOf(parts ...any) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(parts...)))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newWorkload plans n records over streams partitions: each record gets an
// insert and then steps chosen by rng — updates, a delete and a re-insert,
// a stale update (made over a revision the shore never had: a conflict),
// an update whose note the target refuses (too long: rejected). Events of
// one record stay in one stream, in order; records interleave.
func newWorkload(n, steps, streams int, tag string, rng *rand.Rand, now time.Time) *workload {
	w := &workload{streams: map[string][]planned{}}
	type cursor struct {
		r    *record
		left int
	}
	var live []*cursor
	for i := range n {
		r := &record{id: int64(i + 1)}
		w.records = append(w.records, r)
		live = append(live, &cursor{r: r, left: steps})
	}
	seqs := map[string]uint64{}
	k := 0
	for len(live) > 0 {
		j := rng.IntN(len(live))
		c := live[j]
		r := c.r
		part := fmt.Sprintf("%s/%d", table, int(r.id)%streams)
		k++
		eid := uuidOf(tag, "event", k)
		ev := &pb.ChangeEvent{SchemaVersion: "1.0", EventId: eid, OriginNodeId: node, SourceConnectorId: connector,
			SourcePartition: part, RuleId: ruleID, RuleVersion: 1, Database: "ship", Table: table,
			PrimaryKey:     []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: r.id}}},
			ResultRevision: uuidOf(tag, "rev", k), CapturedAt: timestamppb.New(now), TraceId: fmt.Sprintf("crash-%d", k)}
		seqs[part]++
		ev.SourceSequence = seqs[part]
		ev.SourcePosition = proto.Uint64(seqs[part] * 3) // positions need not be contiguous
		note := fmt.Sprintf("r%d step %d", r.id, steps-c.left)
		row := func(note string) *pb.RowImage {
			return &pb.RowImage{Columns: []*pb.ColumnValue{
				{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: r.id}},
				{Name: "note", Value: &pb.ColumnValue_StringValue{StringValue: note}}}}
		}
		p := planned{ev: ev, expect: expectApplied}
		switch x := rng.IntN(100); {
		case !r.exists:
			ev.Operation, ev.After = pb.Operation_OPERATION_INSERT, row(note)
			r.exists, r.rev, r.note, r.eventID = true, ev.ResultRevision, note, eid
		case x < 8:
			ev.Operation, ev.After, ev.BaseRevision = pb.Operation_OPERATION_UPDATE, row(note), uuidOf(tag, "stale", k)
			p.expect = expectConflict
		case x < 14:
			long := note + " " + strings.Repeat("x", noteMaxLen)
			ev.Operation, ev.After, ev.BaseRevision = pb.Operation_OPERATION_UPDATE, row(long), r.rev
			p.expect = expectRejected
		case x < 26:
			ev.Operation, ev.BaseRevision = pb.Operation_OPERATION_DELETE, r.rev
			r.exists, r.rev, r.note, r.eventID = false, ev.ResultRevision, "", ""
		default:
			ev.Operation, ev.After, ev.BaseRevision = pb.Operation_OPERATION_UPDATE, row(note), r.rev
			r.rev, r.note, r.eventID = ev.ResultRevision, note, eid
		}
		w.streams[part] = append(w.streams[part], p)
		w.total++
		c.left--
		if c.left == 0 {
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
	}
	return w
}

// expected maps each event id to its expected result.
func (w *workload) expected() map[string]planned {
	out := make(map[string]planned, w.total)
	for _, evs := range w.streams {
		for _, p := range evs {
			out[p.ev.EventId] = p
		}
	}
	return out
}
