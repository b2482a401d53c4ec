package shipdemo

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/kafkaread"
)

// maxDetails bounds the details a check lists.
const maxDetails = 10

func check(name string, ok bool, details ...string) Check {
	if len(details) > maxDetails {
		details = append(details[:maxDetails], fmt.Sprintf("… and %d more", len(details)-maxDetails))
	}
	return Check{Name: name, OK: ok, Details: details}
}

// reconcile runs the checks into res.
func (r *run) reconcile(ctx context.Context, res *Result) error {
	// 1. The two databases hold the same rows, with the same revisions and
	// origins.
	var diffs []string
	rows := 0
	for _, t := range tables {
		cols := strings.Join(t.columns, ", ") + ", _sync_revision, _sync_origin"
		ship, err := dump(ctx, r.ship, "SELECT "+cols+" FROM "+t.name+" ORDER BY id")
		if err != nil {
			return err
		}
		shore, err := dump(ctx, r.shoreDB, "SELECT "+cols+" FROM "+t.name+" ORDER BY id")
		if err != nil {
			return err
		}
		rows += len(ship)
		for id, v := range ship {
			if w, ok := shore[id]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s id %s: on the ship, not on the shore", t.name, id))
			} else if w != v {
				diffs = append(diffs, fmt.Sprintf("%s id %s: differs", t.name, id))
			}
		}
		for id := range shore {
			if _, ok := ship[id]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s id %s: on the shore, deleted on the ship", t.name, id))
			}
		}
	}
	res.ShipRows = rows
	res.Checks = append(res.Checks, check(fmt.Sprintf("ship and shore databases identical (%d rows, every column, "+
		"revision and origin)", rows), len(diffs) == 0, diffs...))

	// 2. One event per change.
	res.Checks = append(res.Checks, check(fmt.Sprintf("one event per change: %d changes written, %d events produced",
		res.Writes, res.Events), res.Writes == res.Events))

	// 3. Every event terminal and applied on the ship's own record.
	c := res.Counts
	var open []string
	for st, n := range c.ByState {
		if st != client.StateTerminal {
			open = append(open, fmt.Sprintf("%d %s", n, st))
		}
	}
	applied := c.ByResult["APPLIED"]
	res.Checks = append(res.Checks, check(fmt.Sprintf("every event terminal in the client's state: %d APPLIED",
		applied), len(open) == 0 && applied == int64(res.Events), open...))

	// 4. The shore agrees: one receipt per event, and the shore database's
	// ledger holds each applied event once.
	var receipts, shoreApplied int64
	if err := r.pg.Pool().QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE result = 'APPLIED') "+
		"FROM sync_event_receipt WHERE origin_node_id = $1", Node).Scan(&receipts, &shoreApplied); err != nil {
		return fmt.Errorf("shipdemo: count receipts: %w", err)
	}
	var ledger, ledgerDistinct int64
	if err := r.shoreDB.QueryRowContext(ctx, "SELECT count(*), count(DISTINCT event_id) FROM sync_applied_event").
		Scan(&ledger, &ledgerDistinct); err != nil {
		return fmt.Errorf("shipdemo: count ledger: %w", err)
	}
	res.Checks = append(res.Checks, check(fmt.Sprintf("the shore: %d receipts (%d APPLIED), %d ledger rows, none twice",
		receipts, shoreApplied, ledger), receipts == int64(res.Events) && shoreApplied == applied &&
		ledger == ledgerDistinct && ledger == applied))

	// 5. The shore knows the node is alive and healthy (its heartbeat).
	var health sql.NullString
	var beat sql.NullTime
	if err := r.pg.Pool().QueryRow(ctx, "SELECT last_heartbeat_at, last_health FROM sync_node WHERE node_id = $1",
		Node).Scan(&beat, &health); err != nil {
		return fmt.Errorf("shipdemo: read node: %w", err)
	}
	res.Checks = append(res.Checks, check(fmt.Sprintf("the shore received the node's heartbeat (health %s)",
		health.String), beat.Valid && health.Valid))

	// 6. The checkpoints: every partition's terminal checkpoint is at the
	// end of its topic partition.
	marks, err := r.st.Watermarks(ctx)
	if err != nil {
		return err
	}
	var behind []string
	records := 0
	for _, t := range tables {
		topic := capture.TopicPrefixDefault + "." + Logical + "." + r.shipName + "." + t.name
		recs, err := kafkaread.All(ctx, r.brokers, topic)
		if err != nil {
			return err
		}
		records += len(recs)
		ends := map[int32]int64{}
		for _, rec := range recs {
			ends[rec.Partition] = rec.Offset + 1
		}
		for p, end := range ends {
			w := marks[client.TP{Topic: topic, Partition: p}]
			if w.TerminalNext != end {
				behind = append(behind, fmt.Sprintf("%s/%d: terminal checkpoint %d, end %d", t.name, p, w.TerminalNext, end))
			}
		}
	}
	res.Checks = append(res.Checks, check(fmt.Sprintf("every partition's terminal checkpoint at its end (%d records "+
		"in the topics)", records), len(behind) == 0, behind...))
	return nil
}

// dump reads q's rows as id → the row's values joined.
func dump(ctx context.Context, db *sql.DB, q string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("shipdemo: read rows: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = "NULL"
			if v.Valid {
				parts[i] = "'" + v.String + "'"
			}
		}
		out[vals[0].String] = strings.Join(parts, ",")
	}
	return out, rows.Err()
}
