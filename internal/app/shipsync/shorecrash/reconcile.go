package shorecrash

import (
	"context"
	"database/sql"
	"fmt"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// reconcile checks every event and record against the model: the receipts
// the ship pulled, the shore's rows in PostgreSQL, and the shore database —
// its rows, its trigger-written log of every row write and the applier's
// ledger. It returns how many checks ran and the problems found (at most a
// few per check).
func reconcile(ctx context.Context, d *relaypgx.Driver, mdb *sql.DB, w *workload, s *ship) (int, []string, error) {
	var problems []string
	checks := 0
	report := func(check string, bad []string) {
		checks++
		if len(bad) > 5 {
			bad = append(bad[:5], fmt.Sprintf("… %d more", len(bad)-5))
		}
		for _, b := range bad {
			problems = append(problems, check+": "+b)
		}
	}
	want := w.expected()
	appliedBy := map[string]bool{}
	for id, p := range want {
		if p.expect == expectApplied {
			appliedBy[id] = true
		}
	}

	// 1. The ship holds exactly one receipt per event, with the expected result.
	var bad []string
	s.mu.Lock()
	for id, p := range want {
		r, ok := s.receipts[id]
		switch {
		case !ok:
			bad = append(bad, "no receipt for event "+id)
		case r.Result.String() != "EVENT_RESULT_"+p.expect:
			bad = append(bad, fmt.Sprintf("event %s: %s, want %s", id, r.Result, p.expect))
		case p.expect == expectConflict && r.ConflictId == "":
			bad = append(bad, "conflict receipt without a conflict id: "+id)
		case p.expect == expectRejected && r.Reason != pb.RejectReason_REJECT_REASON_TARGET_REFUSED:
			bad = append(bad, fmt.Sprintf("event %s rejected for %s", id, r.Reason))
		}
	}
	if len(s.receipts) != len(want) {
		bad = append(bad, fmt.Sprintf("%d receipts pulled for %d events", len(s.receipts), len(want)))
	}
	s.mu.Unlock()
	report("ship receipts", bad)

	// 2. PostgreSQL: one receipt row per event, as expected.
	bad = nil
	rows, err := d.Pool().Query(ctx, "SELECT event_id::text, result FROM sync_event_receipt")
	if err != nil {
		return 0, nil, err
	}
	seen := map[string]bool{}
	for rows.Next() {
		var id, result string
		if err := rows.Scan(&id, &result); err != nil {
			rows.Close()
			return 0, nil, err
		}
		if seen[id] {
			bad = append(bad, "two receipts for "+id)
		}
		seen[id] = true
		if p, ok := want[id]; !ok || p.expect != result {
			bad = append(bad, fmt.Sprintf("receipt %s %s, want %s", id, result, p.expect))
		}
	}
	rows.Close()
	if len(seen) != len(want) {
		bad = append(bad, fmt.Sprintf("%d receipt rows for %d events", len(seen), len(want)))
	}
	report("receipt rows", bad)

	// 3. The shore database holds exactly the model's rows.
	bad = nil
	got := map[int64][3]string{}
	mrows, err := mdb.QueryContext(ctx, "SELECT id, coalesce(note, ''), _sync_revision, coalesce(_sync_event_id, '') FROM item")
	if err != nil {
		return 0, nil, err
	}
	for mrows.Next() {
		var id int64
		var v [3]string
		if err := mrows.Scan(&id, &v[0], &v[1], &v[2]); err != nil {
			mrows.Close()
			return 0, nil, err
		}
		got[id] = v
	}
	mrows.Close()
	for _, r := range w.records {
		v, ok := got[r.id]
		switch {
		case ok != r.exists:
			bad = append(bad, fmt.Sprintf("record %d: exists %t, want %t", r.id, ok, r.exists))
		case ok && v != [3]string{r.note, r.rev, r.eventID}:
			bad = append(bad, fmt.Sprintf("record %d: %v, want note %q rev %s event %s", r.id, v, r.note, r.rev, r.eventID))
		}
		delete(got, r.id)
	}
	for id := range got {
		bad = append(bad, fmt.Sprintf("record %d should not exist", id))
	}
	report("target rows", bad)

	// 4. Every applied event wrote its row exactly once, and nothing else
	// wrote: inserts and updates by event id, deletes by the revision they
	// removed and by their stamp (an update carrying their id).
	bad = nil
	writes := map[string]int{}
	lrows, err := mdb.QueryContext(ctx, "SELECT op, coalesce(event_id, ''), revision FROM write_log")
	if err != nil {
		return 0, nil, err
	}
	for lrows.Next() {
		var op, id, rev string
		if err := lrows.Scan(&op, &id, &rev); err != nil {
			lrows.Close()
			return 0, nil, err
		}
		if op == "d" {
			writes["d/"+rev]++
		} else {
			writes[op+"/"+id]++
		}
	}
	lrows.Close()
	for id, p := range want {
		if p.expect != expectApplied {
			continue
		}
		k := map[pb.Operation]string{pb.Operation_OPERATION_INSERT: "i/" + id, pb.Operation_OPERATION_UPDATE: "u/" + id,
			pb.Operation_OPERATION_DELETE: "d/" + p.ev.BaseRevision}[p.ev.Operation]
		if writes[k] != 1 {
			bad = append(bad, fmt.Sprintf("event %s (%s) wrote %d times", id, p.ev.Operation, writes[k]))
		}
		delete(writes, k)
		if p.ev.Operation == pb.Operation_OPERATION_DELETE {
			// The applier stamps the row with the delete's id just before
			// it deletes it, in the same transaction.
			if writes["u/"+id] != 1 {
				bad = append(bad, fmt.Sprintf("event %s (DELETE) stamped %d times", id, writes["u/"+id]))
			}
			delete(writes, "u/"+id)
		}
	}
	for k, n := range writes {
		bad = append(bad, fmt.Sprintf("unexpected write %s ×%d", k, n))
	}
	report("target writes", bad)

	// 5. The ledger holds exactly the applied events.
	bad = nil
	ledger := map[string]bool{}
	grows, err := mdb.QueryContext(ctx, "SELECT event_id FROM sync_applied_event")
	if err != nil {
		return 0, nil, err
	}
	for grows.Next() {
		var id string
		if err := grows.Scan(&id); err != nil {
			grows.Close()
			return 0, nil, err
		}
		ledger[id] = true
		if !appliedBy[id] {
			bad = append(bad, "ledger holds a not-applied event "+id)
		}
	}
	grows.Close()
	if len(ledger) != len(appliedBy) {
		bad = append(bad, fmt.Sprintf("ledger holds %d events, %d applied", len(ledger), len(appliedBy)))
	}
	report("ledger", bad)

	// 6. Each event's apply job ended in the state of its result.
	bad = nil
	jobState := map[string]string{expectApplied: "FINALIZED", expectConflict: "CONFLICT_CAPTURED", expectRejected: "REJECTED"}
	jrows, err := d.Pool().Query(ctx, `SELECT e.event_id::text, coalesce(j.state, '') FROM sync_inbox_event e
		LEFT JOIN sync_apply_job j ON j.inbox_id = e.id`)
	if err != nil {
		return 0, nil, err
	}
	n := 0
	for jrows.Next() {
		var id, st string
		if err := jrows.Scan(&id, &st); err != nil {
			jrows.Close()
			return 0, nil, err
		}
		n++
		if st != jobState[want[id].expect] {
			bad = append(bad, fmt.Sprintf("event %s: job %q, want %s", id, st, jobState[want[id].expect]))
		}
	}
	jrows.Close()
	if n != len(want) {
		bad = append(bad, fmt.Sprintf("%d inbox events for %d sent", n, len(want)))
	}
	report("apply jobs", bad)

	// 7. The apply queue is drained: an applied event's message is deleted
	// with its receipt (DeleteSucceeded), so none is left, in any state.
	bad = nil
	qrows, err := d.Pool().Query(ctx, "SELECT state, count(*) FROM relay_message WHERE queue = ANY($1) GROUP BY state",
		[]string{shore.ApplyQueue, shore.UrgentApplyQueue})
	if err != nil {
		return 0, nil, err
	}
	states := map[string]int{}
	for qrows.Next() {
		var st string
		var c int
		if err := qrows.Scan(&st, &c); err != nil {
			qrows.Close()
			return 0, nil, err
		}
		states[st] = c
	}
	qrows.Close()
	if len(states) != 0 {
		bad = append(bad, fmt.Sprintf("apply queue %v, want it empty", states))
	}
	report("apply queue", bad)

	// 8. Every conflict receipt's case holds that event's evidence.
	bad = nil
	var missing int
	if err := d.Pool().QueryRow(ctx, `SELECT count(*) FROM sync_event_receipt r
		WHERE r.result = 'CONFLICT_RECORDED' AND NOT EXISTS (SELECT 1 FROM sync_conflict_evidence v
		WHERE v.conflict_id = r.conflict_id AND v.origin_node_id = r.origin_node_id AND v.event_id = r.event_id)`).Scan(&missing); err != nil {
		return 0, nil, err
	}
	if missing > 0 {
		bad = append(bad, fmt.Sprintf("%d conflict receipts without their evidence", missing))
	}
	report("conflict evidence", bad)

	// 9. The streams are contiguous to their end, nothing held.
	bad = nil
	srows, err := d.Pool().Query(ctx, "SELECT source_partition, next_sequence::bigint, held FROM sync_stream")
	if err != nil {
		return 0, nil, err
	}
	for srows.Next() {
		var part string
		var next int64
		var held int
		if err := srows.Scan(&part, &next, &held); err != nil {
			srows.Close()
			return 0, nil, err
		}
		if held != 0 || next != int64(len(w.streams[part]))+1 {
			bad = append(bad, fmt.Sprintf("stream %s: next %d held %d, want next %d", part, next, held, len(w.streams[part])+1))
		}
	}
	srows.Close()
	report("streams", bad)
	return checks, problems, nil
}
