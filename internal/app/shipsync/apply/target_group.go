package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// errNotAllChanged is runGrouped's answer when a write changed no row (or a
// statement's count is otherwise not the expected one): it rolled back, and
// the statement-per-write form must tell which write it was.
var errNotAllChanged = errors.New("apply: a grouped write did not change every row")

// writeGroup is writes of one table, one operation and one column list
// that runGrouped writes with one statement (a delete: two), none of them
// on the same row.
type writeGroup struct {
	round int
	table *Table
	op    Op
	// names are the columns an insert writes, or an update sets, besides
	// the platform columns (a delete: none); rows[i] are write i's values
	// of them, keys[i] its key's values in key order.
	names []string
	ws    []*Conditional
	rows  [][]any
	keys  [][]any
}

// runGrouped writes ws in one transaction of a few set-based statements —
// one multi-row INSERT, UPDATE or DELETE per table, operation and column
// list, and one multi-row ledger insert for all of them — instead of a
// statement and a ledger statement per write (the target parses and runs
// each of those: with 64 writes, 130 statements a round trip). It commits
// only when every write changed its row: every statement's count is the
// number of its writes, and so is the ledger's. Otherwise it rolls back
// and returns errNotAllChanged (or the target's error, such as a duplicate
// key), and the caller runs the writes one statement each, which tells the
// writes apart. A set-based statement cannot say which of its rows did not
// change; the common case — every write applies — is the one made cheap.
//
// Writes of the same row keep their order: a write whose key an earlier
// write of ws has goes to a later round, and rounds run in order.
func (t *Target) runGrouped(ctx context.Context, ws []Conditional, now time.Time) error {
	groups, err := groupWrites(ws)
	if err != nil {
		return err
	}
	var q sqlText
	add := q.add
	// want[i] is statement i's expected count; a negative one, -n: at most
	// n (a delete's stamp may find a row stamped so already).
	want := []int64{0, 0}
	for _, g := range groups {
		n := int64(len(g.ws))
		switch g.op {
		case OpInsert:
			g.insert(&q.Builder, add, now)
			want = append(want, n)
		case OpUpdate:
			g.update(&q.Builder, add, now)
			want = append(want, n)
		case OpDelete:
			g.delete(&q.Builder, add)
			want = append(want, -n, n)
		}
	}
	q.WriteString("INSERT INTO sync_applied_event (origin_node_id, event_id, inbox_id, applied_at) VALUES ")
	for i, w := range ws {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?)")
		add(w.Stamp.Origin, strings.ToLower(w.Stamp.EventID), w.Ref, now)
	}
	// A ledger row that exists already (the stamp was written before)
	// counts 0: the batch is then not what it seems, and the statement per
	// write reports it.
	q.WriteString(" ON DUPLICATE KEY UPDATE inbox_id = inbox_id;\n")
	want = append(want, int64(len(ws)))
	_, err = t.exec(ctx, &q, func(affected []int64) error {
		if len(affected) != len(want) {
			return fmt.Errorf("apply: %d statement results for %d grouped statements", len(affected), len(want))
		}
		for i, a := range affected {
			if w := want[i]; a != w && (w >= 0 || a < 0 || a > -w) {
				return errNotAllChanged
			}
		}
		return nil
	})
	return err
}

// groupWrites sorts ws into groups: by round (a write of a row an earlier
// write has is one round later), then by table, operation and column list,
// in the order their first writes come.
func groupWrites(ws []Conditional) ([]*writeGroup, error) {
	type gk struct {
		round            int
		table, op, names string
	}
	lastRound := map[string]int{}
	index := map[gk]*writeGroup{}
	var groups []*writeGroup
	for i := range ws {
		w := &ws[i]
		key, err := keyArgs(*w)
		if err != nil {
			return nil, err
		}
		var names []string
		var row []any
		switch w.Op {
		case OpInsert:
			names, row, err = insertRow(*w)
		case OpUpdate:
			names, row, err = updateSet(*w)
		case OpDelete:
		default:
			return nil, fmt.Errorf("apply: unknown op %d", w.Op)
		}
		if err != nil {
			return nil, err
		}
		table := w.Table.sql()
		rowKey := table + "\x00" + keyText(w.Key, key)
		round := lastRound[rowKey] + 1
		lastRound[rowKey] = round
		// The key's column names are part of the statement (its WHERE).
		k := gk{round, table, fmt.Sprint(w.Op), strings.Join(append(keyNames(w), names...), "\x00")}
		g := index[k]
		if g == nil {
			g = &writeGroup{round: round, table: w.Table, op: w.Op, names: names}
			index[k] = g
			groups = append(groups, g)
		}
		g.ws, g.rows, g.keys = append(g.ws, w), append(g.rows, row), append(g.keys, key)
	}
	slices.SortStableFunc(groups, func(a, b *writeGroup) int { return a.round - b.round })
	return groups, nil
}

// keyText is a row's key as text for telling rows apart: the column names
// and values, the same for an integer and its text (the database compares
// them as equal).
func keyText(cols []*pb.ColumnValue, vals []any) string {
	var b strings.Builder
	for i, v := range vals {
		b.WriteString(cols[i].Name)
		b.WriteByte(0)
		switch v := v.(type) {
		case []byte:
			b.Write(v)
		case time.Time:
			b.WriteString(v.UTC().Format(time.RFC3339Nano))
		default:
			fmt.Fprint(&b, v)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// insert appends the group's multi-row INSERT: it fails as a whole on a
// duplicate key (see statement).
func (g *writeGroup) insert(q *strings.Builder, add func(...any), now time.Time) {
	fmt.Fprintf(q, "INSERT INTO %s (%s) VALUES ", g.table.sql(), quoteAll(slices.Concat(g.names, syncNames), ""))
	row := "(" + strings.Repeat("?, ", len(g.names)+len(syncNames)-1) + "?)"
	for i, w := range g.ws {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(row)
		add(g.rows[i]...)
		add(w.Stamp.Revision, w.Stamp.Origin, strings.ToLower(w.Stamp.EventID), now)
	}
	q.WriteString(";\n")
}

// update appends the group's UPDATE: the rows picked by key and base
// revision with one IN list, each column set by a CASE over the keys. (A
// join with a derived table of the rows would say it shorter, but its
// columns carry the connection's collation, and a key column of another
// could not use its index; literals in IN and CASE compare as the column
// does, as the statement per write's do.)
func (g *writeGroup) update(q *strings.Builder, add func(...any), now time.Time) {
	fmt.Fprintf(q, "UPDATE %s SET ", g.table.sql())
	for c, name := range g.names {
		g.set(q, add, name, func(i int) any { return g.rows[i][c] })
		q.WriteString(", ")
	}
	g.set(q, add, "_sync_revision", func(i int) any { return g.ws[i].Stamp.Revision })
	q.WriteString(", ")
	g.stamp(q, add)
	q.WriteString(", `_sync_updated_at` = ?")
	add(now)
	g.where(q, add)
}

// delete appends the group's stamp (see statement) and DELETE.
func (g *writeGroup) delete(q *strings.Builder, add func(...any)) {
	fmt.Fprintf(q, "UPDATE %s SET ", g.table.sql())
	g.stamp(q, add)
	g.where(q, add)
	fmt.Fprintf(q, "DELETE FROM %s", g.table.sql())
	g.where(q, add)
}

// stamp appends the SET of the writes' origin and event id.
func (g *writeGroup) stamp(q *strings.Builder, add func(...any)) {
	g.set(q, add, "_sync_origin", func(i int) any { return g.ws[i].Stamp.Origin })
	q.WriteString(", ")
	g.set(q, add, "_sync_event_id", func(i int) any { return strings.ToLower(g.ws[i].Stamp.EventID) })
}

// set appends "name = …": the value itself when every write of the group
// sets the same one (an origin usually), else a CASE over the rows' keys.
func (g *writeGroup) set(q *strings.Builder, add func(...any), name string, val func(int) any) {
	q.WriteString(quote(name) + " = ")
	same := true
	first, ok := val(0).(string)
	for i := 1; ok && i < len(g.ws); i++ {
		s, isStr := val(i).(string)
		same = same && isStr && s == first
	}
	if ok && same {
		q.WriteString("?")
		add(first)
		return
	}
	q.WriteString("CASE")
	for i := range g.ws {
		q.WriteString(" WHEN ")
		g.rowKey(q, add, i)
		q.WriteString(" THEN ?")
		add(val(i))
	}
	q.WriteString(" END")
}

// rowKey appends "(k1, k2) = (?, ?)" for row i.
func (g *writeGroup) rowKey(q *strings.Builder, add func(...any), i int) {
	q.WriteString("(" + quoteAll(keyNames(g.ws[i]), "") + ") = (" + strings.TrimSuffix(strings.Repeat("?, ", len(g.keys[i])), ", ") + ")")
	add(g.keys[i]...)
}

// where appends the WHERE that picks the group's rows at their writes' base
// revisions, and ends the statement.
func (g *writeGroup) where(q *strings.Builder, add func(...any)) {
	names := append(keyNames(g.ws[0]), "_sync_revision")
	row := "(" + strings.Repeat("?, ", len(names)-1) + "?)"
	fmt.Fprintf(q, " WHERE (%s) IN (", quoteAll(names, ""))
	for i, w := range g.ws {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(row)
		add(g.keys[i]...)
		add(w.Base)
	}
	q.WriteString(");\n")
}

// keyNames are w's key column names.
func keyNames(w *Conditional) []string {
	out := make([]string, len(w.Key))
	for i, k := range w.Key {
		out[i] = k.Name
	}
	return out
}
