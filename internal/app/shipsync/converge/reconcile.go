package converge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// quietFor is how long nothing may change before the system counts as
// quiet (longer than the capture's wait for a changelog hole).
const quietFor = 3 * time.Second

// quiesce waits until every part is idle and nothing changed for quietFor.
func (r *run) quiesce(ctx context.Context, fail <-chan error, phase string) error {
	deadline := time.Now().Add(r.o.Timeout)
	var last string
	since, shown := time.Now(), time.Now()
	for {
		select {
		case err := <-fail:
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
		if !busy && time.Since(since) >= quietFor {
			fmt.Fprintf(r.o.Progress, "quiet after %s: %s\n", phase, fp)
			return nil
		}
		if time.Since(shown) >= 2*time.Second {
			fmt.Fprintf(r.o.Progress, "%s: %s\n", phase, fp)
			shown = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("converge: not quiet %s after the %s: %s", r.o.Timeout, phase, fp)
		}
	}
}

// fingerprint summarises every counter that moves while work is going on,
// and whether work is known to be pending.
func (r *run) fingerprint(ctx context.Context) (string, bool, error) {
	var inbox, receipts, shoreEvents, cmds, unanswered, unprocessed, active, cases int
	err := r.sh.PG.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM sync_inbox_event), (SELECT count(*) FROM sync_event_receipt),
		(SELECT count(*) FROM sync_shore_event), (SELECT count(*) FROM sync_downlink_command),
		(SELECT count(*) FROM sync_downlink_command WHERE result IS NULL),
		(SELECT count(*) FROM sync_downlink_command WHERE processed_at IS NULL AND result IS NOT NULL
			AND (kind = 'decision' OR result = 'COMMAND_CONFLICT_REPORTED')),
		(SELECT count(*) FROM sync_conflict_case WHERE state IN ('DETECTED', 'AUTO_DECIDING', 'DECIDED', 'DISPATCHED')),
		(SELECT count(*) FROM sync_conflict_case)`).Scan(&inbox, &receipts, &shoreEvents, &cmds, &unanswered, &unprocessed,
		&active, &cases)
	if err != nil {
		return "", false, fmt.Errorf("converge: shore state: %w", err)
	}
	var shipLog, shoreLog int64
	if err := r.ship.QueryRowContext(ctx, "SELECT coalesce(max(id), 0) FROM _sync_changelog").Scan(&shipLog); err != nil {
		return "", false, err
	}
	if err := r.shoreDB.QueryRowContext(ctx, "SELECT coalesce(max(id), 0) FROM _sync_changelog").Scan(&shoreLog); err != nil {
		return "", false, err
	}
	s, c := r.cl.Stats(), r.cdcc.Stats()
	waiting := r.cl.Waiting()
	fp := fmt.Sprintf("ship log %d, client read %d produced %d terminal %d waiting %d, commands applied %d acked %d | "+
		"shore log %d, inbox %d receipts %d, shore cdc read %d forwarded %d, commands %d (%d unanswered), cases %d (%d open)",
		shipLog, s.Read, s.Produced, s.Terminal, waiting, s.CommandsApplied, s.CommandsAcked, shoreLog, inbox, receipts, c.Read,
		shoreEvents, cmds, unanswered, cases, active)
	busy := unanswered > 0 || unprocessed > 0 || active > 0 || inbox != receipts || waiting > 0
	return fp, busy, nil
}

func check(name string, ok bool, details ...string) shipdemo.Check {
	if len(details) > 10 {
		details = append(details[:10], fmt.Sprintf("… and %d more", len(details)-10))
	}
	return shipdemo.Check{Name: name, OK: ok, Details: details}
}

// reconcile runs the checks into res.
func (r *run) reconcile(ctx context.Context, res *Result) error {
	pool := r.sh.PG.Pool()
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
		var diff []string
		for k, v := range ship {
			if shore[k] != v {
				diff = append(diff, fmt.Sprintf("id %s: ship %q, shore %q; cases: %s", k, v, shore[k], r.casesOf(ctx, t.name, k)))
			}
		}
		for k, v := range shore {
			if _, ok := ship[k]; !ok {
				diff = append(diff, fmt.Sprintf("id %s: only on the shore %q", k, v))
			}
		}
		slices.Sort(diff)
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
	counts, err := r.st.Counts(ctx)
	if err != nil {
		return err
	}
	var open []string
	for st, n := range counts.ByState {
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
		case state != "ACKNOWLEDGED" && state != "EXPIRED" && state != "CANCELLED":
			unexplained = append(unexplained, fmt.Sprintf("%s: still %s (%s)", id, state, reason))
		}
		return nil
	}); err != nil {
		return err
	}
	res.Checks = append(res.Checks, check(fmt.Sprintf("every conflict is accounted for: decided and acknowledged, "+
		"or expired with its reason (%s; %d decided by the operator)", mapText(res.Cases), res.Manual), len(unexplained) == 0,
		unexplained...))
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
	blockedShip := int(counts.ByState["BLOCKED"])
	res.Checks = append(res.Checks, check("nothing is blocked on either side", blocked == 0 && blockedShip == 0,
		fmt.Sprintf("shore: %d, ship: %d", blocked, blockedShip)))
	return nil
}

// casesOf describes the conflict cases of record id of table t, for a
// failed check's details.
func (r *run) casesOf(ctx context.Context, t, id string) string {
	rows, err := r.sh.PG.Pool().Query(ctx, `SELECT c.state, c.state_reason,
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
