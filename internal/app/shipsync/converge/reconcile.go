package converge

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay/internal/app/shipsync/shipcrash"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/kafkaread"
)

// quietFor is how long nothing may change before the system counts as
// quiet (longer than the capture's wait for a changelog hole).
const quietFor = 3 * time.Second

// quiesce waits until every part is idle and nothing changed for quietFor
// (with Chaos, also until both processes can be stopped cleanly). It reads
// only persisted state: a process cannot be asked.
func (r *run) quiesce(ctx context.Context, phase string) error {
	deadline := time.Now().Add(r.o.Timeout)
	var last string
	since, shown := time.Now(), time.Now()
	for {
		select {
		case err := <-r.fail:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		fp, busy, err := r.fingerprint(ctx)
		if err != nil {
			return err
		}
		if fp != last {
			last, since = fp, time.Now()
		}
		if !busy && time.Since(since) >= quietFor && (r.chaos == nil || r.chaos.ready()) {
			r.out("quiet after %s: %s", phase, fp)
			return nil
		}
		if time.Since(shown) >= 2*time.Second {
			r.out("%s: %s", phase, fp)
			shown = time.Now()
		}
		if time.Now().After(deadline) {
			fp += "\n" + r.partitions(ctx)
			if r.chaos != nil {
				fp += "\nthe client's last output:\n" + r.chaos.client.Tail(2000) + "\nthe shore's:\n" + r.chaos.shore.Tail(2000)
			}
			return fmt.Errorf("converge: not quiet %s after the %s: %s", r.o.Timeout, phase, fp)
		}
	}
}

// fingerprint summarises every persisted counter that moves while work is
// going on, and whether work is known to be pending.
func (r *run) fingerprint(ctx context.Context) (string, bool, error) {
	var inbox, receipts, shoreEvents, blocked, cmds, unanswered, unprocessed, active, cases int
	err := r.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM sync_inbox_event), (SELECT count(*) FROM sync_event_receipt),
		(SELECT count(*) FROM sync_shore_event), (SELECT count(*) FROM sync_shore_event WHERE result = 'BLOCKED'),
		(SELECT count(*) FROM sync_downlink_command),
		(SELECT count(*) FROM sync_downlink_command WHERE result IS NULL),
		(SELECT count(*) FROM sync_downlink_command WHERE processed_at IS NULL AND result IS NOT NULL
			AND (kind = 'decision' OR result = 'COMMAND_CONFLICT_REPORTED')),
		(SELECT count(*) FROM sync_conflict_case WHERE state IN ('DETECTED', 'AUTO_DECIDING', 'DECIDED', 'DISPATCHED')),
		(SELECT count(*) FROM sync_conflict_case)`).Scan(&inbox, &receipts, &shoreEvents, &blocked, &cmds, &unanswered,
		&unprocessed, &active, &cases)
	if err != nil {
		return "", false, fmt.Errorf("converge: shore state: %w", err)
	}
	cl, err := r.clientState(ctx)
	if err != nil {
		return "", false, err
	}
	shipDone, shipWhy, err := shipcrash.CaptureDone(ctx, r.ship, r.shipCap)
	if err != nil {
		return "", false, err
	}
	shoreDone, shoreWhy, err := shipcrash.CaptureDone(ctx, r.shoreDB, r.shoreCap)
	if err != nil {
		return "", false, err
	}
	shipEnd, err := topicEnds(ctx, r.brokers, shipdemo.Topics(r.shipName))
	if err != nil {
		return "", false, err
	}
	shoreEnd, err := topicEnds(ctx, r.brokers, shipdemo.TopicsOf("shore", r.shoreName))
	if err != nil {
		return "", false, err
	}
	committed, err := kafkaread.Committed(ctx, r.brokers, shoreCDCGroup)
	if err != nil {
		return "", false, err
	}
	var shoreRead int64
	for _, ps := range committed {
		for _, o := range ps {
			shoreRead += o
		}
	}
	fp := fmt.Sprintf("ship: %s; client events %d (%d open, %d blocked), checkpoint %d of %d records, commands %d "+
		"(%d without result, %d not acknowledged) | shore: %s; inbox %d receipts %d; shore cdc at %d of %d records, "+
		"forwarded %d (%d blocked); commands %d (%d unanswered); cases %d (%d open)",
		cmp.Or(shipWhy, "captured"), cl.events, cl.open, cl.blocked, cl.terminal, shipEnd, cl.commands, cl.unapplied,
		cl.unacked, cmp.Or(shoreWhy, "captured"), inbox, receipts, shoreRead, shoreEnd, shoreEvents, blocked, cmds,
		unanswered, cases, active)
	busy := !shipDone || !shoreDone || unanswered > 0 || unprocessed > 0 || active > 0 || inbox != receipts ||
		cl.open > 0 || cl.unapplied > 0 || cl.unacked > 0 || (cl.terminal < shipEnd && cl.blocked == 0) ||
		(shoreRead < shoreEnd && blocked == 0)
	return fp, busy, nil
}

// clientCounts is what the client's state file says.
type clientCounts struct {
	// events produced, open (neither terminal nor blocked), blocked, and
	// by state; terminal is the sum of the partitions' terminal
	// checkpoints.
	events, open, blocked int
	byState               map[string]int
	terminal              int64
	// commands stored, without a result, with a result the shore has not
	// answered.
	commands, unapplied, unacked int
}

// clientState reads the client's state file (nothing yet before the
// client made its tables).
func (r *run) clientState(ctx context.Context) (clientCounts, error) {
	c := clientCounts{byState: map[string]int{}}
	rows, err := r.state.QueryContext(ctx, "SELECT state, count(*) FROM event_state WHERE direction = 'up' GROUP BY state")
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return c, nil
		}
		return c, fmt.Errorf("converge: client state: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return c, err
		}
		c.byState[st] = n
		c.events += n
		switch st {
		case "TERMINAL":
		case "BLOCKED":
			c.blocked += n
		default:
			c.open += n
		}
	}
	if err := rows.Err(); err != nil {
		return c, err
	}
	err = r.state.QueryRowContext(ctx, `SELECT
		(SELECT coalesce(sum(terminal_next), 0) FROM partition_watermark WHERE direction = 'up'),
		(SELECT count(*) FROM inbound_command), (SELECT count(*) FROM inbound_command WHERE state <> 'TERMINAL'),
		(SELECT count(*) FROM inbound_command WHERE state = 'TERMINAL' AND acked = 0)`).Scan(&c.terminal, &c.commands,
		&c.unapplied, &c.unacked)
	if err != nil && !strings.Contains(err.Error(), "no such table") {
		return c, fmt.Errorf("converge: client state: %w", err)
	}
	return c, nil
}

// topicEnds is the sum of the end offsets of topics' partitions.
func topicEnds(ctx context.Context, brokers, topics []string) (int64, error) {
	var n int64
	for _, t := range topics {
		ends, err := kafkaread.Ends(ctx, brokers, t)
		if err != nil {
			return 0, err
		}
		for _, e := range ends {
			n += e
		}
	}
	return n, nil
}

// detailsShown is how many details a check keeps.
const detailsShown = 10

func check(name string, ok bool, details ...string) shipdemo.Check {
	if len(details) > detailsShown {
		details = append(details[:detailsShown], fmt.Sprintf("… and %d more", len(details)-detailsShown))
	}
	return shipdemo.Check{Name: name, OK: ok, Details: details}
}

// reconcile runs the checks into res.
func (r *run) reconcile(ctx context.Context, res *Result) error {
	pool := r.pool
	var err error
	// 1. Both databases hold the same rows.
	for _, t := range []struct{ name, cols string }{
		{"crew", "id, name, rank_code, wage, updated_at"}, {"fuel_log", "id, tank, litres, coalesce(note, '<null>'), logged_at"},
	} {
		q := "SELECT concat_ws('|', " + t.cols + ", _sync_revision, _sync_origin) FROM " + t.name + " ORDER BY id"
		ship, err := lines(ctx, r.ship, q)
		if err != nil {
			return err
		}
		shore, err := lines(ctx, r.shoreDB, q)
		if err != nil {
			return err
		}
		type differs struct{ id, what string }
		var ds []differs
		for k, v := range ship {
			if shore[k] != v {
				ds = append(ds, differs{k, fmt.Sprintf("ship %q, shore %q", v, shore[k])})
			}
		}
		for k, v := range shore {
			if _, ok := ship[k]; !ok {
				ds = append(ds, differs{k, fmt.Sprintf("only on the shore %q", v)})
			}
		}
		slices.SortFunc(ds, func(a, b differs) int { return strings.Compare(a.id, b.id) })
		// The cases and the history (each a read of both captures' topics)
		// only for the records the check shows.
		diff := make([]string, len(ds))
		for i, d := range ds {
			diff[i] = "id " + d.id + ": " + d.what
			if i < detailsShown {
				diff[i] += fmt.Sprintf("; cases: %s; history:%s", r.casesOf(ctx, t.name, d.id), r.history(ctx, t.name, d.id))
			}
		}
		res.Checks = append(res.Checks, check(fmt.Sprintf("%s: both databases hold the same %d rows (values, revision, origin)",
			t.name, len(ship)), len(diff) == 0, diff...))
	}
	// 2. Every uplink event has exactly one terminal result.
	var inbox, receipts, missing int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM sync_inbox_event), (SELECT count(*) FROM sync_event_receipt),
		(SELECT count(*) FROM sync_inbox_event i WHERE NOT EXISTS (SELECT 1 FROM sync_event_receipt r
			WHERE r.origin_node_id = i.origin_node_id AND r.event_id = i.event_id))`).Scan(&inbox, &receipts, &missing); err != nil {
		return err
	}
	res.Uplink = inbox
	if res.Receipts, err = countBy(ctx, pool, "SELECT result, count(*) FROM sync_event_receipt GROUP BY 1"); err != nil {
		return err
	}
	counts, err := r.clientState(ctx)
	if err != nil {
		return err
	}
	var open []string
	for st, n := range counts.byState {
		if st != "TERMINAL" && n > 0 {
			open = append(open, fmt.Sprintf("%d %s", n, st))
		}
	}
	res.Checks = append(res.Checks, check(fmt.Sprintf("every uplink event has exactly one terminal result (%d events: %s)",
		inbox, mapText(res.Receipts)), inbox == receipts && missing == 0 && len(open) == 0, open...))
	// 3. Every command is answered, none refused.
	if res.Commands, err = countBy(ctx, pool,
		"SELECT kind || ' ' || coalesce(result, 'UNANSWERED'), count(*) FROM sync_downlink_command GROUP BY 1"); err != nil {
		return err
	}
	var last, acked int64
	if err := pool.QueryRow(ctx, "SELECT next_sequence - 1, acked_through FROM sync_downlink_node WHERE node_id = $1",
		shipdemo.Node).Scan(&last, &acked); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	var bad []string
	for k, n := range res.Commands {
		if strings.HasSuffix(k, "UNANSWERED") {
			bad = append(bad, fmt.Sprintf("%d %s", n, k))
		}
	}
	rej, err := pool.Query(ctx, `SELECT sequence, kind, reason FROM sync_downlink_command WHERE result = 'COMMAND_REJECTED'
		ORDER BY sequence`)
	if err != nil {
		return err
	}
	var seq int64
	var kind, why string
	if _, err := pgx.ForEachRow(rej, []any{&seq, &kind, &why}, func() error {
		bad = append(bad, fmt.Sprintf("command %d (%s) rejected: %s", seq, kind, why))
		return nil
	}); err != nil {
		return err
	}
	res.Checks = append(res.Checks, check(fmt.Sprintf("every command has its answer and the node's prefix is complete "+
		"(%d commands, acknowledged through %d: %s)", last, acked, mapText(res.Commands)), len(bad) == 0 && acked == last, bad...))
	// 4. Every conflict is accounted for.
	if res.Cases, err = countBy(ctx, pool, "SELECT state, count(*) FROM sync_conflict_case GROUP BY 1"); err != nil {
		return err
	}
	var unexplained []string
	rows, err := pool.Query(ctx, `SELECT c.conflict_id::text, c.state, c.state_reason,
		(SELECT count(*) FROM sync_conflict_evidence e WHERE e.conflict_id = c.conflict_id),
		(SELECT count(*) FROM sync_conflict_decision d WHERE d.conflict_id = c.conflict_id)
		FROM sync_conflict_case c ORDER BY c.created_at`)
	if err != nil {
		return err
	}
	var id, state, reason string
	var evidence, decisions int
	if _, err := pgx.ForEachRow(rows, []any{&id, &state, &reason, &evidence, &decisions}, func() error {
		switch {
		case evidence == 0:
			unexplained = append(unexplained, id+": no evidence")
		case state == "ACKNOWLEDGED" && decisions != 1:
			unexplained = append(unexplained, id+": acknowledged without its decision")
		case state == "EXPIRED" && reason == "":
			unexplained = append(unexplained, id+": expired without a reason")
		case state == "PENDING_MANUAL":
			res.Pending++ // an operator's task, with its evidence
		case state != "ACKNOWLEDGED" && state != "EXPIRED" && state != "CANCELLED":
			unexplained = append(unexplained, fmt.Sprintf("%s: still %s (%s)", id, state, reason))
		}
		return nil
	}); err != nil {
		return err
	}
	res.Checks = append(res.Checks, check(fmt.Sprintf("every conflict is accounted for: decided and acknowledged, "+
		"expired with its reason, or waiting for an operator with its evidence (%s; %d decided by the operator)",
		mapText(res.Cases), res.Manual), len(unexplained) == 0, unexplained...))
	// 5. No change looped back: no revision made on one side came back
	// from the other as a change of its own, and each side's changes are
	// exactly its own writes.
	up, err := revisions(ctx, pool, "SELECT event FROM sync_inbox_event", func(b []byte) (string, error) {
		var ev pb.ChangeEvent
		err := proto.Unmarshal(b, &ev)
		return ev.ResultRevision, err
	})
	if err != nil {
		return err
	}
	down, err := revisions(ctx, pool, "SELECT body FROM sync_downlink_command WHERE kind = 'change'", func(b []byte) (string, error) {
		var c pb.Command
		err := proto.Unmarshal(b, &c)
		return c.GetChange().GetResultRevision(), err
	})
	if err != nil {
		return err
	}
	var loops []string
	for rev := range up {
		if down[rev] {
			loops = append(loops, "revision "+rev+" went both ways")
		}
	}
	var forwarded, blocked int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE result = 'FORWARDED'), count(*) FILTER (WHERE result = 'BLOCKED')
		FROM sync_shore_event`).Scan(&forwarded, &blocked); err != nil {
		return err
	}
	res.Forwarded = forwarded
	ship, shore := int(r.shipN.Load()), int(r.shoreN.Load())
	if inbox != ship {
		loops = append(loops, fmt.Sprintf("the ship's own writes changed %d rows but it uploaded %d events", ship, inbox))
	}
	if forwarded != shore {
		loops = append(loops, fmt.Sprintf("the shore's own writes changed %d rows but it forwarded %d changes", shore, forwarded))
	}
	res.Checks = append(res.Checks, check(fmt.Sprintf("no change looped back: the ship uploaded exactly its own %d changes, "+
		"the shore forwarded exactly its own %d, no revision went both ways", ship, shore), len(loops) == 0, loops...))
	// 6. Nothing blocked.
	blockedShip := counts.blocked
	res.Checks = append(res.Checks, check("nothing is blocked on either side", blocked == 0 && blockedShip == 0,
		fmt.Sprintf("shore: %d, ship: %d", blocked, blockedShip)))
	return nil
}

// casesOf describes the conflict cases of record id of table t, for a
// failed check's details.
func (r *run) casesOf(ctx context.Context, t, id string) string {
	rows, err := r.pool.Query(ctx, `SELECT c.state, c.state_reason,
		(SELECT string_agg(e.found_in || ':' || e.operation || ' ' || left(e.incoming_result_revision, 8) || ' met ' ||
			left(e.current_revision, 8), ', ' ORDER BY e.evidence_id) FROM sync_conflict_evidence e WHERE e.conflict_id = c.conflict_id)
		FROM sync_conflict_case c WHERE c.rule_id = $1 AND c.pk_text LIKE '%"' || $2 || '"%' ORDER BY c.created_at`, t, id)
	if err != nil {
		return err.Error()
	}
	var out []string
	var st, why, ev string
	_, err = pgx.ForEachRow(rows, []any{&st, &why, &ev}, func() error {
		out = append(out, fmt.Sprintf("[%s %q: %s]", st, why, ev))
		return nil
	})
	if err != nil {
		return err.Error()
	}
	return strings.Join(out, " ")
}

// lines reads q's single text column into a map keyed by its first field.
func lines(ctx context.Context, db *sql.DB, q string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		k, _, _ := strings.Cut(s, "|")
		out[k] = s
	}
	return out, rows.Err()
}

// countBy reads (key, count) rows.
func countBy(ctx context.Context, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, q string) (map[string]int, error) {
	rows, err := pool.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	var k string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&k, &n}, func() error {
		out[k] = n
		return nil
	})
	return out, err
}

// revisions decodes the result revision of every row of q.
func revisions(ctx context.Context, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, q string, rev func([]byte) (string, error)) (map[string]bool, error) {
	rows, err := pool.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	var b []byte
	_, err = pgx.ForEachRow(rows, []any{&b}, func() error {
		r, err := rev(b)
		out[strings.ToLower(r)] = true
		return err
	})
	return out, err
}

func mapText(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// partitions describes the ship client's uplink partitions for a report of
// a run that did not go quiet: each one's saved read, received and
// terminal positions against the topic's end and the group's commit.
func (r *run) partitions(ctx context.Context) string {
	rows, err := r.state.QueryContext(ctx, `SELECT topic, part, read_next, received_next, terminal_next
		FROM partition_watermark WHERE direction = 'up' ORDER BY topic, part`)
	if err != nil {
		return "client partitions: " + err.Error()
	}
	defer rows.Close()
	committed, _ := kafkaread.Committed(ctx, r.brokers, clientGroup)
	var b strings.Builder
	b.WriteString("client partitions (read / received / terminal / committed / end):")
	ends := map[string]map[int32]int64{}
	for rows.Next() {
		var topic string
		var part int32
		var read, recv, term int64
		if err := rows.Scan(&topic, &part, &read, &recv, &term); err != nil {
			return b.String() + " " + err.Error()
		}
		if _, ok := ends[topic]; !ok {
			ends[topic], _ = kafkaread.Ends(ctx, r.brokers, topic)
		}
		end, ok := ends[topic][part]
		if !ok {
			end = -1
		}
		fmt.Fprintf(&b, "\n  %s/%d: %d / %d / %d / %d / %d", topic, part, read, recv, term, committed[topic][part], end)
	}
	return b.String()
}
