package converge

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/kafkaread"
)

// history tells the story of record id of table t on both sides, for a
// failed convergence check: every change either side's capture saw (its
// revisions, stamp and note), every event the shore received from the ship
// with its result, and every command sent to the ship with its answer —
// each line marked with when it happened, so a reader can see which write
// was last where. Errors become a line of their own: this is a diagnostic.
func (r *run) history(ctx context.Context, t, id string) string {
	type line struct {
		at   time.Time
		text string
	}
	var out []line
	add := func(at time.Time, format string, args ...any) {
		out = append(out, line{at, fmt.Sprintf(format, args...)})
	}
	for _, side := range []struct{ name, logical, db string }{{"ship", shipdemo.Logical, r.shipName}, {"shore", "shore", r.shoreName}} {
		topic := capture.TopicPrefixDefault + "." + side.logical + "." + side.db + "." + t
		recs, err := kafkaread.All(ctx, r.brokers, topic)
		if err != nil {
			add(time.Time{}, "%s capture: %v", side.name, err)
			continue
		}
		for _, rec := range recs {
			if c, ok := captured(rec, id); ok {
				add(c.at, "%s wrote %s %s→%s stamp %s/%s%s (offset %d)", side.name, c.op, short(c.before), short(c.after),
					c.origin, short(c.eventID), c.note, rec.Offset)
			}
		}
	}
	rows, err := r.pool.Query(ctx, `SELECT i.event, i.received_at, coalesce(x.result, 'no receipt'), coalesce(x.decided_at, i.received_at)
		FROM sync_inbox_event i LEFT JOIN sync_event_receipt x USING (origin_node_id, event_id)
		WHERE i.rule_id = $1 AND i.pk_text LIKE '%"' || $2 || '"%'`, t, id)
	if err == nil {
		var body []byte
		var received, decided time.Time
		var result string
		_, err = pgx.ForEachRow(rows, []any{&body, &received, &result, &decided}, func() error {
			var ev pb.ChangeEvent
			if err := proto.Unmarshal(body, &ev); err != nil {
				return err
			}
			add(received, "shore received event %s %s %s→%s; %s at %s", short(ev.EventId), opName(ev.Operation),
				short(ev.BaseRevision), short(ev.ResultRevision), result, decided.Format("15:04:05.000"))
			return nil
		})
	}
	if err != nil {
		add(time.Time{}, "shore inbox: %v", err)
	}
	rows, err = r.pool.Query(ctx, `SELECT sequence, kind, body, created_at, coalesce(result, 'UNANSWERED'), current_revision,
		coalesce(node_acked_at, created_at) FROM sync_downlink_command WHERE rule_id = $1 ORDER BY sequence`, t)
	if err == nil {
		var seq int64
		var kind, result, current string
		var body []byte
		var created, acked time.Time
		_, err = pgx.ForEachRow(rows, []any{&seq, &kind, &body, &created, &result, &current, &acked}, func() error {
			var c pb.Command
			if err := proto.Unmarshal(body, &c); err != nil {
				return err
			}
			var key []*pb.ColumnValue
			var what string
			switch b := c.Body.(type) {
			case *pb.Command_Change:
				key = b.Change.GetPrimaryKey()
				what = fmt.Sprintf("change %s %s→%s", opName(b.Change.GetOperation()), short(b.Change.GetBaseRevision()),
					short(b.Change.GetResultRevision()))
			case *pb.Command_Decision:
				key = b.Decision.GetRecordKey()
				what = fmt.Sprintf("decision expects %s, decides %s", short(b.Decision.GetExpectedLocalRevision()),
					short(b.Decision.GetDecidedRevision()))
			}
			if !keyIs(key, id) {
				return nil
			}
			answer := result
			if current != "" {
				answer += " (ship at " + short(current) + ")"
			}
			add(created, "command %d %s %s; %s at %s", seq, short(c.CommandId), what, answer, acked.Format("15:04:05.000"))
			return nil
		})
	}
	if err != nil {
		add(time.Time{}, "downlink commands: %v", err)
	}
	slices.SortStableFunc(out, func(a, b line) int { return a.at.Compare(b.at) })
	var b strings.Builder
	for _, l := range out {
		fmt.Fprintf(&b, "\n      %s %s", l.at.UTC().Format("15:04:05.000"), l.text)
	}
	return b.String()
}

// change is one captured change of a record.
type change struct {
	at                                       time.Time
	op, before, after, origin, eventID, note string
}

// captured decodes rec, a capture record, when it is a change of record
// id (its key's id).
func captured(rec kafkaread.Record, id string) (change, bool) {
	var k struct {
		Payload map[string]any `json:"payload"`
	}
	if json.Unmarshal([]byte(rec.Key), &k) != nil || fmt.Sprint(k.Payload["id"]) != id {
		return change{}, false
	}
	var v struct {
		Payload struct {
			Op     string         `json:"op"`
			Before map[string]any `json:"before"`
			After  map[string]any `json:"after"`
			Source struct {
				TsMs int64 `json:"ts_ms"`
			} `json:"source"`
		} `json:"payload"`
	}
	if rec.Value == nil || json.Unmarshal(rec.Value, &v) != nil {
		return change{}, false
	}
	p := v.Payload
	c := change{at: time.UnixMilli(p.Source.TsMs), op: p.Op}
	str := func(m map[string]any, k string) string {
		if s, ok := m[k].(string); ok {
			return s
		}
		return ""
	}
	c.before, c.after = str(p.Before, "_sync_revision"), str(p.After, "_sync_revision")
	img := p.After
	if img == nil {
		img = p.Before
	}
	c.origin, c.eventID = str(img, "_sync_origin"), str(img, "_sync_event_id")
	if n := str(p.After, "note"); n != "" {
		c.note = " note " + fmt.Sprintf("%q", n)
	}
	return c, true
}

// keyIs reports whether key is the record whose id is id.
func keyIs(key []*pb.ColumnValue, id string) bool {
	for _, k := range key {
		if k.GetName() != "id" {
			continue
		}
		switch v := k.Value.(type) {
		case *pb.ColumnValue_IntValue:
			return fmt.Sprint(v.IntValue) == id
		case *pb.ColumnValue_UintValue:
			return fmt.Sprint(v.UintValue) == id
		case *pb.ColumnValue_StringValue:
			return v.StringValue == id
		}
	}
	return false
}

func opName(op pb.Operation) string { return strings.TrimPrefix(op.String(), "OPERATION_") }

// short is a revision or id cut to its first 8 characters ("-" for none).
func short(s string) string {
	if s == "" {
		return "-"
	}
	return s[:min(8, len(s))]
}
