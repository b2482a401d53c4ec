package shipdemo

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/kafkaread"
	"github.com/relayhq/relay/relaydriver/relaypgx"
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
	rec, err := Reconcile(ctx, Stores{Ship: r.ship, Shore: r.shoreDB, PG: r.pg, State: r.st, Brokers: r.brokers,
		ShipDB: r.shipName}, res.Writes)
	if err != nil {
		return err
	}
	res.Checks, res.ShipRows = rec.Checks, rec.Rows
	return nil
}

// Stores are what Reconcile reads: both databases, the shore's
// PostgreSQL, the client's state and the topics.
type Stores struct {
	Ship, Shore *sql.DB
	PG          *relaypgx.Driver
	// State is the client's state; StateDB, when set, the same SQLite file
	// opened for the checks of event positions and sequences.
	State   *client.Store
	StateDB *sql.DB
	Brokers []string
	// ShipDB is the ship database's name (it names the topics).
	ShipDB string
	// Group, when set, is the client's consumer group: its committed
	// offsets must equal the terminal checkpoints.
	Group string
}

// Reconciliation is what Reconcile found.
type Reconciliation struct {
	Checks []Check
	// Rows are the ship's rows; Events the events in the client's state;
	// Repeats those of them the shore found to repeat a change applied
	// already.
	Rows, Events, Repeats int
}

// OK reports whether every check passed.
func (r *Reconciliation) OK() bool { return ChecksOK(r.Checks) }

// Reconcile checks the uplink after the chain went quiet: writes is how
// many row changes the workload committed. An error means a store could
// not be read, not that a check failed.
func Reconcile(ctx context.Context, s Stores, writes int) (*Reconciliation, error) {
	rec := &Reconciliation{}
	add := func(c Check) { rec.Checks = append(rec.Checks, c) }
	// 1. The two databases hold the same rows, with the same revisions and
	// origins.
	var diffs []string
	for _, t := range tables {
		cols := strings.Join(t.columns, ", ") + ", _sync_revision, _sync_origin"
		ship, err := dump(ctx, s.Ship, "SELECT "+cols+" FROM "+t.name+" ORDER BY id")
		if err != nil {
			return nil, err
		}
		shore, err := dump(ctx, s.Shore, "SELECT "+cols+" FROM "+t.name+" ORDER BY id")
		if err != nil {
			return nil, err
		}
		rec.Rows += len(ship)
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
	slices.Sort(diffs)
	add(check(fmt.Sprintf("ship and shore databases identical (%d rows, every column, revision and origin)", rec.Rows),
		len(diffs) == 0, diffs...))

	// 2. One event per change.
	c, err := s.State.Counts(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range c.ByState {
		rec.Events += int(n)
	}
	var twice []string
	if s.StateDB != nil {
		// Each topic position made one event, and each stream number was
		// given once.
		for _, q := range []struct{ what, sql string }{
			{"position", "SELECT topic || '/' || part || '@' || off, count(*) FROM event_state WHERE direction = 'up' " +
				"GROUP BY topic, part, off HAVING count(*) > 1"},
			{"source_sequence", "SELECT topic || '/' || part || '#' || seq, count(*) FROM event_state WHERE direction = 'up' " +
				"AND seq IS NOT NULL GROUP BY topic, part, seq HAVING count(*) > 1"},
		} {
			rows, err := s.StateDB.QueryContext(ctx, q.sql)
			if err != nil {
				return nil, fmt.Errorf("shipdemo: client state: %w", err)
			}
			for rows.Next() {
				var at string
				var n int
				if err := rows.Scan(&at, &n); err != nil {
					rows.Close()
					return nil, err
				}
				twice = append(twice, fmt.Sprintf("%s %s: %d events", q.what, at, n))
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, err
			}
		}
	}
	// A capture (or Debezium) restarted after a crash sends records again;
	// each repeat is an event of its own that the shore answers APPLIED
	// without writing (its result revision was the record's already).
	var repeats int64
	if err := s.PG.Pool().QueryRow(ctx, "SELECT count(*) FROM sync_apply_job j JOIN sync_inbox_event e ON e.id = j.inbox_id "+
		"WHERE j.learnt_by = 'repeat' AND e.origin_node_id = $1", Node).Scan(&repeats); err != nil {
		return nil, fmt.Errorf("shipdemo: count repeats: %w", err)
	}
	rec.Repeats = int(repeats)
	add(check(fmt.Sprintf("one event per change: %d changes written, %d events produced (%d of them repeats of a change "+
		"the capture sent again after a crash)", writes, rec.Events, repeats),
		writes+int(repeats) == rec.Events && len(twice) == 0, twice...))

	// 3. Every event terminal and applied on the ship's own record.
	var open []string
	for st, n := range c.ByState {
		if st != client.StateTerminal {
			open = append(open, fmt.Sprintf("%d %s", n, st))
		}
	}
	applied := c.ByResult["APPLIED"]
	add(check(fmt.Sprintf("every event terminal in the client's state: %d APPLIED", applied),
		len(open) == 0 && applied == int64(rec.Events), open...))

	// 4. The shore agrees: one receipt per event, and the shore database's
	// ledger holds each applied event once.
	var receipts, shoreApplied, receiptIDs int64
	if err := s.PG.Pool().QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE result = 'APPLIED'), "+
		"count(DISTINCT event_id) FROM sync_event_receipt WHERE origin_node_id = $1", Node).
		Scan(&receipts, &shoreApplied, &receiptIDs); err != nil {
		return nil, fmt.Errorf("shipdemo: count receipts: %w", err)
	}
	var ledger, ledgerDistinct int64
	if err := s.Shore.QueryRowContext(ctx, "SELECT count(*), count(DISTINCT event_id) FROM sync_applied_event").
		Scan(&ledger, &ledgerDistinct); err != nil {
		return nil, fmt.Errorf("shipdemo: count ledger: %w", err)
	}
	add(check(fmt.Sprintf("the shore: %d receipts (%d APPLIED, %d of them repeats written by nobody), %d ledger rows, "+
		"none twice", receipts, shoreApplied, repeats, ledger), receipts == int64(rec.Events) && receiptIDs == receipts &&
		shoreApplied == applied && ledger == ledgerDistinct && ledger == applied-repeats))

	// 5. The shore knows the node is alive and healthy (its heartbeat).
	var health sql.NullString
	var beat sql.NullTime
	if err := s.PG.Pool().QueryRow(ctx, "SELECT last_heartbeat_at, last_health FROM sync_node WHERE node_id = $1",
		Node).Scan(&beat, &health); err != nil {
		return nil, fmt.Errorf("shipdemo: read node: %w", err)
	}
	add(check(fmt.Sprintf("the shore received the node's heartbeat (health %s)", health.String),
		beat.Valid && health.Valid))

	// 6. The checkpoints: every partition's terminal checkpoint is at the
	// end of its topic partition.
	marks, err := s.State.Watermarks(ctx)
	if err != nil {
		return nil, err
	}
	var behind []string
	records := 0
	ends := map[client.TP]int64{}
	for _, topic := range Topics(s.ShipDB) {
		recs, err := kafkaread.All(ctx, s.Brokers, topic)
		if err != nil {
			return nil, err
		}
		records += len(recs)
		for _, r := range recs {
			ends[client.TP{Topic: topic, Partition: r.Partition}] = r.Offset + 1
		}
	}
	for tp, end := range ends {
		if w := marks[tp]; w.TerminalNext != end {
			behind = append(behind, fmt.Sprintf("%s: terminal checkpoint %d, end %d", tp, w.TerminalNext, end))
		}
	}
	slices.Sort(behind)
	add(check(fmt.Sprintf("every partition's terminal checkpoint at its end (%d records in the topics)", records),
		len(behind) == 0, behind...))

	// 7. The consumer group: committed up to the terminal checkpoint, never
	// past the end.
	if s.Group != "" {
		got, err := kafkaread.Committed(ctx, s.Brokers, s.Group)
		if err != nil {
			return nil, err
		}
		var wrong []string
		for tp, end := range ends {
			off, ok := got[tp.Topic][tp.Partition]
			switch {
			case !ok:
				wrong = append(wrong, fmt.Sprintf("%s: nothing committed, end %d", tp, end))
			case off > end:
				wrong = append(wrong, fmt.Sprintf("%s: committed %d past the end %d", tp, off, end))
			case off != marks[tp].TerminalNext:
				wrong = append(wrong, fmt.Sprintf("%s: committed %d, terminal checkpoint %d", tp, off, marks[tp].TerminalNext))
			}
		}
		slices.Sort(wrong)
		add(check(fmt.Sprintf("consumer group %s committed the terminal checkpoint of %d partitions", s.Group, len(ends)),
			len(wrong) == 0, wrong...))
	}
	return rec, nil
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
