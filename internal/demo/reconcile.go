package demo

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Report is the reconciliation of one demo run: every source row and every
// hole accounted for, every message's outcome against the plan, and the
// projection against the expected totals.
type Report struct {
	Queue          string
	Store          string
	SourceRows     int
	PermanentHoles int
	Enqueued       int
	Succeeded      int
	Duplicates     int
	Ignored        int
	Dead           int
	Backlog        int64
	ProjectionMsgs int64
	// EventsDelivered counts change events read back from Kafka and accepted
	// in per-key sequence; EventRedeliveries counts duplicates dropped.
	EventsDelivered   int
	EventRedeliveries int
	Elapsed           time.Duration
	// Failures lists every mismatch; empty means the run reconciled.
	Failures []string
	plan     *Plan
	kafka    bool // the Kafka stage ran
}

// OK reports whether the reconciliation found no mismatch.
func (r *Report) OK() bool { return len(r.Failures) == 0 }

func (r *Report) fail(format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

// Reconcile checks the finished run of queue against plan: the source
// table, the store's messages, cursor, holes and the projection.
func Reconcile(ctx context.Context, d relaydriver.Driver, src *sql.DB, queue string, plan *Plan) (*Report, error) {
	r := &Report{Queue: queue, Store: d.Name(), plan: plan}
	ex := d.GetExecutor()

	// 1. The source holds exactly the planned rows.
	srcIDs, err := readSourceIDs(ctx, src)
	if err != nil {
		return nil, err
	}
	r.SourceRows = len(srcIDs)
	if want := sortedIDs(plan.Rows); !slices.Equal(srcIDs, want) {
		r.fail("source has %d rows, plan wrote %d", len(srcIDs), len(want))
	}

	// 2. Every permanent hole was released and logged; nothing else was.
	holes, err := ex.HoleList(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("demo: list holes: %w", err)
	}
	holeIDs := make([]int64, len(holes))
	for i, h := range holes {
		holeIDs[i] = h.ID
	}
	r.PermanentHoles = len(holeIDs)
	if !slices.Equal(holeIDs, plan.PermanentHoles) {
		r.fail("logged permanent holes %v, planned %v", holeIDs, plan.PermanentHoles)
	}

	// 3. Every source row is a message with the planned outcome; no hole is.
	msgs, err := listMessages(ctx, ex, queue)
	if err != nil {
		return nil, err
	}
	for _, row := range plan.Rows {
		m, ok := msgs[row.ID]
		if !ok {
			r.fail("source row %d was never enqueued", row.ID)
			continue
		}
		r.Enqueued++
		r.classify(m, row)
	}
	for _, id := range plan.PermanentHoles {
		if _, ok := msgs[id]; ok {
			r.fail("hole %d has a message", id)
		}
	}
	st, err := ex.MessageStats(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("demo: stats: %w", err)
	}
	r.Backlog = st.Backlog()
	var total int64
	for _, n := range st.Counts {
		total += n
	}
	if total != int64(len(plan.Rows)) {
		r.fail("store holds %d messages, source has %d rows", total, len(plan.Rows))
	}
	if r.Backlog != 0 {
		r.fail("backlog is %d, want 0", r.Backlog)
	}
	if r.Succeeded != plan.Succeeded {
		r.fail("succeeded %d, planned %d", r.Succeeded, plan.Succeeded)
	}
	if r.Duplicates != plan.Duplicates {
		r.fail("skipped as duplicate %d, planned %d", r.Duplicates, plan.Duplicates)
	}
	if r.Ignored != plan.Ignored {
		r.fail("skipped as ignored %d, planned %d", r.Ignored, plan.Ignored)
	}
	if r.Dead != plan.Malformed {
		r.fail("dead %d, planned %d malformed", r.Dead, plan.Malformed)
	}

	// 4. The projection holds each key's total, in order, applied exactly once.
	if err := r.checkProjection(ctx, ex, queue); err != nil {
		return nil, err
	}
	return r, nil
}

// classify counts m's outcome and checks it matches what row should produce.
func (r *Report) classify(m *relaytype.Message, row PlanRow) {
	rec, perr := parse([]byte(row.Payload), MaxPayloadDefault)
	switch {
	case m.State == relaytype.StateSucceeded:
		r.Succeeded++
		if perr != nil || (rec.kind != kindUpdate && rec.kind != kindFlaky) {
			r.fail("message %d succeeded but should not have", m.ID)
		}
	case m.State == relaytype.StateSkipped && strings.HasPrefix(m.LastError, "duplicate-of:"):
		r.Duplicates++
	case m.State == relaytype.StateSkipped && strings.HasPrefix(m.LastError, "ignored:"):
		r.Ignored++
	case m.State == relaytype.StateDead && m.ErrorClass == relaytype.ClassMalformed:
		r.Dead++
		if perr == nil {
			r.fail("message %d is DEAD(MALFORMED) but its payload parses", m.ID)
		}
	default:
		r.fail("message %d ended %s(%s) %q", m.ID, m.State, m.ErrorClass, m.LastError)
	}
}

func (r *Report) checkProjection(ctx context.Context, q relaydriver.Querier, queue string) error {
	rows, err := q.Query(ctx, queries["ProjectionRows"], queue)
	if err != nil {
		return fmt.Errorf("demo: read projection: %w", err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var key string
		var msgs, total, last int64
		if err := rows.Scan(&key, &msgs, &total, &last); err != nil {
			return fmt.Errorf("demo: scan projection: %w", err)
		}
		seen[key] = true
		r.ProjectionMsgs += msgs
		ids := r.plan.Keys[key]
		switch {
		case len(ids) == 0:
			r.fail("projection has unplanned key %s", key)
		case msgs != int64(len(ids)):
			r.fail("key %s applied %d messages, planned %d", key, msgs, len(ids))
		case total != r.plan.Totals[key]:
			r.fail("key %s total %d, planned %d", key, total, r.plan.Totals[key])
		case last != ids[len(ids)-1]:
			r.fail("key %s last message %d, planned %d", key, last, ids[len(ids)-1])
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("demo: read projection: %w", err)
	}
	for key := range r.plan.Keys {
		if !seen[key] {
			r.fail("projection lacks key %s", key)
		}
	}
	return nil
}

// listMessages reads every message of queue (payloads excluded) by pages,
// keyed by id: one query per page instead of one per row.
func listMessages(ctx context.Context, ex relaydriver.Executor, queue string) (map[int64]*relaytype.Message, error) {
	out := map[int64]*relaytype.Message{}
	var after int64
	for {
		page, err := ex.MessageList(ctx, &relaydriver.MessageListParams{
			Queue: queue, AfterID: after, Limit: relaydriver.MessageListLimitMax})
		if err != nil {
			return nil, fmt.Errorf("demo: list messages: %w", err)
		}
		for _, m := range page {
			out[m.ID] = m
		}
		if len(page) < relaydriver.MessageListLimitMax {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

func readSourceIDs(ctx context.Context, src *sql.DB) ([]int64, error) {
	rows, err := src.QueryContext(ctx, sourceQueries["SourceIDs"])
	if err != nil {
		return nil, fmt.Errorf("demo: read source: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("demo: read source: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Write prints the reconciliation summary.
func (r *Report) Write(w io.Writer) {
	mark := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "MISMATCH"
	}
	p := r.plan
	fmt.Fprintf(w, "\nreconciliation (queue %s, %s store)\n", r.Queue, r.Store)
	fmt.Fprintf(w, "  source rows        %7d\n", r.SourceRows)
	fmt.Fprintf(w, "  permanent holes    %7d   logged and skipped (planned %d)        %s\n", r.PermanentHoles, len(p.PermanentHoles), mark(r.PermanentHoles == len(p.PermanentHoles)))
	fmt.Fprintf(w, "  enqueued           %7d   every source row                       %s\n", r.Enqueued, mark(r.Enqueued == r.SourceRows))
	fmt.Fprintf(w, "  succeeded          %7d   (planned %d)                          %s\n", r.Succeeded, p.Succeeded, mark(r.Succeeded == p.Succeeded))
	fmt.Fprintf(w, "  skipped            %7d   duplicate %d, ignored %d               %s\n", r.Duplicates+r.Ignored, r.Duplicates, r.Ignored, mark(r.Duplicates == p.Duplicates && r.Ignored == p.Ignored))
	fmt.Fprintf(w, "  dead               %7d   MALFORMED (planned %d)                  %s\n", r.Dead, p.Malformed, mark(r.Dead == p.Malformed))
	fmt.Fprintf(w, "  backlog            %7d\n", r.Backlog)
	fmt.Fprintf(w, "  projection applied %7d   each key once, in id order             %s\n", r.ProjectionMsgs, mark(r.ProjectionMsgs == int64(p.Succeeded)))
	if r.kafka {
		fmt.Fprintf(w, "  events to Kafka    %7d   per-key order, one per applied message  %s (%d redeliveries dropped)\n",
			r.EventsDelivered, mark(r.EventsDelivered == p.Succeeded), r.EventRedeliveries)
	}
	rate := 0.0
	if r.Elapsed > 0 {
		rate = float64(r.Enqueued) / r.Elapsed.Seconds()
	}
	fmt.Fprintf(w, "  elapsed            %7.2fs  %.0f msgs/s end to end (source write, hole ageing, intake, FIFO processing)\n", r.Elapsed.Seconds(), rate)
	if r.OK() {
		fmt.Fprintln(w, "RESULT: reconciled — nothing lost, nothing applied twice")
		return
	}
	fmt.Fprintln(w, "RESULT: FAILED")
	for i, f := range r.Failures {
		if i == 20 {
			fmt.Fprintf(w, "  … and %d more\n", len(r.Failures)-i)
			break
		}
		fmt.Fprintln(w, "  -", f)
	}
}
