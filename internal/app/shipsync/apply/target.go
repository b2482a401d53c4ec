package apply

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
)

// Target is a business database (MariaDB or MySQL) the platform writes
// remote changes into — the shore's, by the applier of this package, or a
// ship's, by the ship's remote applier (package remote): the tables the
// rules write, each with the platform's _sync_revision, _sync_origin,
// _sync_event_id and _sync_updated_at columns, and the applied-event ledger
// sync_applied_event (EnsureLedger). Safe for concurrent use.
type Target struct {
	db *sql.DB
}

// SyncColumns are the platform's columns every synced table of the shore
// database must have, as CREATE TABLE column definitions: the revision the
// row is at, the node whose change produced it, the event that wrote it
// (NULL for the shore's own writes) and when the platform wrote it.
const SyncColumns = "_sync_revision CHAR(36) NOT NULL, _sync_origin VARCHAR(64) NOT NULL, " +
	"_sync_event_id CHAR(36) NULL, _sync_updated_at DATETIME(6) NOT NULL"

// OpenTarget opens the target database named by dsn (go-sql-driver form,
// e.g. "user:pw@tcp(host:3306)/shore"). It forces what the applier relies
// on: several statements per round trip with client-side parameter
// interpolation, rows affected counted as rows changed (not matched), times
// in UTC.
func OpenTarget(dsn string) (*Target, error) {
	cfg, err := mysqldsn.Parse(dsn)
	if err != nil {
		return nil, err
	}
	if cfg.DBName == "" {
		return nil, errors.New("apply: the target DSN names no database")
	}
	cfg.MultiStatements, cfg.InterpolateParams, cfg.ClientFoundRows = true, true, false
	cfg.ParseTime, cfg.Loc = true, time.UTC
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return &Target{db: db}, nil
}

// DB is the target's pool.
func (t *Target) DB() *sql.DB { return t.db }

// Close closes the pool.
func (t *Target) Close() error { return t.db.Close() }

// EnsureLedger creates the applied-event ledger if it does not exist: one
// row per write that changed the target, keyed by its stamp's origin and
// event id (on a ship: the shore's node id and the command id, inbox_id
// holding the command's sequence), written in the write's own transaction,
// so "did this write happen?" has a definite answer even after a crash
// between the target's commit and the applier's own store's, and even when
// the row was deleted or changed again since.
func (t *Target) EnsureLedger(ctx context.Context) error {
	_, err := t.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS sync_applied_event (
		origin_node_id VARCHAR(64) NOT NULL,
		event_id       CHAR(36)    NOT NULL,
		inbox_id       BIGINT      NOT NULL,
		applied_at     DATETIME(6) NOT NULL,
		PRIMARY KEY (origin_node_id, event_id)
	) ENGINE=InnoDB`)
	if err != nil {
		return fmt.Errorf("apply: create sync_applied_event: %w", err)
	}
	return nil
}

// Table is what a conditional write needs to know of its table: its name
// (quoted into SQL) and the columns read back as a conflict's evidence (the
// key's included; the _sync_ columns are always read). The shore fills it
// from its rule registry, the ship's remote applier from its rules and the
// table's own columns.
type Table struct {
	// Schema, when set, is the database Name is in (a ship's rules name
	// it); empty: the connection's database.
	Schema  string
	Name    string
	Columns []string
}

// sql is the table's name as SQL.
func (t *Table) sql() string {
	if t.Schema == "" {
		return quote(t.Name)
	}
	return quote(t.Schema) + "." + quote(t.Name)
}

// Stamp is the platform metadata a write leaves on its row: the revision
// the row is at after it, the node whose change it is, and the id of what
// wrote it (an uplink event on the shore, a downlink command on a ship;
// lower-case UUID text). A write's ledger row is keyed by (Origin,
// EventID).
type Stamp struct {
	Revision, Origin, EventID string
}

// Conditional is one conditional write of a target table. An insert needs
// the row to be absent; an update and a delete need it at Base. Nothing of a write
// makes a new revision: the row gets Stamp (seed 004 §5.2, a remote apply
// writes the given revision, origin and event id).
type Conditional struct {
	Table *Table
	Op    Op
	// Key is the row's primary key, in key order.
	Key []*pb.ColumnValue
	// Values are the columns an insert or update writes; the key columns
	// are skipped by an update and added from Key by an insert.
	Values []*pb.ColumnValue
	// Base is the revision an update or delete expects the row at.
	Base  string
	Stamp Stamp
	// Ref is the applier's own reference, kept in the ledger row: the
	// shore's inbox id, a ship's command sequence.
	Ref int64
}

// RefusedError is a write the target refused for good (a value it cannot
// hold, a constraint): the change is REJECTED TARGET_REFUSED. Number is the
// MySQL error number.
type RefusedError struct {
	Number uint16
}

func (r *RefusedError) Error() string {
	return fmt.Sprintf("target refused the write (MySQL error %d)", r.Number)
}

// errDupKey is MySQL's duplicate-entry error number.
const errDupKey = 1062

// permanent reports whether err is the target refusing the data itself —
// retrying the same write cannot help — as opposed to an outage, a lock
// timeout or a schema the operator must fix (those are retried).
func permanent(err error) (uint16, bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return 0, false
	}
	switch me.Number {
	case 1048, // column cannot be null
		errDupKey,  // duplicate entry
		1264, 1265, // out of range, truncated
		1292, 1366, // incorrect value
		1406,       // data too long
		1451, 1452, // foreign key
		1690,       // value out of range
		3140,       // invalid JSON
		3819, 4025: // CHECK constraint (MySQL, MariaDB)
		return me.Number, true
	}
	return 0, false
}

// Apply runs ws in one target transaction, one round trip: each write
// followed by its ledger row, kept only if the write changed a row. (Several
// writes are first tried set-based, runGrouped, committed only when every
// one changed its row; otherwise that attempt is rolled back and the
// statement per write runs.) It
// reports per write whether it changed one, and the writes the target
// refused for good (a *RefusedError). When the target refuses a write the
// batch is rolled back and every write runs alone, so only the refused one
// fails (a duplicate key on an insert is no refusal: the row exists,
// nothing changed). An error is the target's failure as a whole (an outage,
// a schema to fix): nothing was written; ctx governs the round trips.
func (t *Target) Apply(ctx context.Context, ws []Conditional, now time.Time) ([]bool, []error, error) {
	if len(ws) == 0 {
		return nil, nil, nil
	}
	if len(ws) > 1 {
		// The common case, every write changing its row, in a few
		// set-based statements; anything else (a write that changed
		// nothing, a refusal) is sorted out by the statement per write
		// below.
		err := t.runGrouped(ctx, ws, now)
		if err == nil {
			changed := make([]bool, len(ws))
			for i := range changed {
				changed[i] = true
			}
			return changed, make([]error, len(ws)), nil
		}
		if _, ok := permanent(err); !ok && !errors.Is(err, errNotAllChanged) {
			return nil, nil, err
		}
	}
	changed, err := t.run(ctx, ws, now)
	if err == nil {
		return changed, make([]error, len(ws)), nil
	}
	if _, ok := permanent(err); !ok {
		return nil, nil, err
	}
	changed = make([]bool, len(ws))
	refused := make([]error, len(ws))
	for i := range ws {
		c, err := t.run(ctx, ws[i:i+1], now)
		n, ok := permanent(err)
		switch {
		case err == nil:
			changed[i] = c[0]
		case n == errDupKey && ws[i].Op == OpInsert:
			// The key exists (a row the record head did not know of):
			// nothing changed; Inspect tells applied from conflict.
		case ok:
			refused[i] = &RefusedError{Number: n}
		default:
			return nil, nil, err
		}
	}
	return changed, refused, nil
}

// run is one transaction of writes as one multi-statement round trip.
func (t *Target) run(ctx context.Context, ws []Conditional, now time.Time) ([]bool, error) {
	var q sqlText
	add := q.add
	counts := make([]int, len(ws))
	for i, w := range ws {
		n, err := statement(&q.Builder, add, w, now)
		if err != nil {
			return nil, err
		}
		counts[i] = n
		q.WriteString("INSERT INTO sync_applied_event (origin_node_id, event_id, inbox_id, applied_at) " +
			"SELECT ?, ?, ?, ? FROM DUAL WHERE ROW_COUNT() = 1 ON DUPLICATE KEY UPDATE inbox_id = inbox_id;\n")
		add(w.Stamp.Origin, strings.ToLower(w.Stamp.EventID), w.Ref, now)
	}
	affected, err := t.exec(ctx, &q, func(affected []int64) error {
		if !consistent(affected, counts) {
			return fmt.Errorf("apply: statement results %v do not match %d writes and their ledger rows", affected, len(ws))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(ws))
	at := 2
	for i, n := range counts {
		out[i] = affected[at+n-1] == 1
		at += n + 1
	}
	return out, nil
}

// sqlText is statements being built, with their arguments.
type sqlText struct {
	strings.Builder
	args []driver.NamedValue
}

// add appends arguments for the statements' next placeholders.
func (s *sqlText) add(vs ...any) {
	for _, v := range vs {
		s.args = append(s.args, driver.NamedValue{Ordinal: len(s.args) + 1, Value: v})
	}
}

// exec runs the writes q in one transaction, SET TRANSACTION and START
// TRANSACTION before them, in one round trip; it hands the per-statement
// rows-affected counts (those two first) to check and commits only when
// check accepts them; otherwise, or on an error, it rolls back and returns
// check's or the target's error. ctx governs the round trips.
func (t *Target) exec(ctx context.Context, q *sqlText, check func([]int64) error) ([]int64, error) {
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var affected []int64
	err = conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return errors.New("apply: the MySQL driver connection cannot execute")
		}
		// READ COMMITTED: the conditional writes read the latest committed
		// row under its record lock either way, and no gap locks are taken
		// that would make concurrent batches deadlock.
		res, err := ex.ExecContext(ctx, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\nSTART TRANSACTION;\n"+q.String(), q.args)
		if err == nil {
			mr, ok := res.(mysql.Result)
			if !ok {
				err = errors.New("apply: the MySQL driver gave no per-statement results")
			} else {
				affected = mr.AllRowsAffected()
				err = check(affected)
			}
		}
		if err == nil {
			// COMMIT goes alone, after every write's result was read and
			// matched with its ledger row. Were it part of the statements
			// above, a client that dies mid-way could leave the server to
			// commit a write whose ledger statement saw no row count (the
			// crash harness caught exactly that); now a dead client never
			// commits, the open transaction dies with its connection.
			_, err = ex.ExecContext(ctx, "COMMIT", nil)
			return err
		}
		// End the transaction here (a broken connection ends it on the
		// server).
		if _, rbErr := ex.ExecContext(context.WithoutCancel(ctx), "ROLLBACK", nil); rbErr != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return affected, nil
}

// consistent reports whether the per-statement results of SET
// TRANSACTION, START TRANSACTION and the writes (counts[i] statements each,
// the last one the write proper: a delete is stamped first) each followed
// by its ledger statement are whole: every statement changed at most one
// row, and a write's ledger row exists exactly when the write proper
// changed one. A delete's stamp may change nothing (a row stamped so
// already) without making the batch inconsistent.
func consistent(affected []int64, counts []int) bool {
	want := 2
	for _, n := range counts {
		want += n + 1
	}
	if len(affected) != want {
		return false
	}
	at := 2
	for _, n := range counts {
		for _, a := range affected[at : at+n+1] {
			if a < 0 || a > 1 {
				return false
			}
		}
		if affected[at+n-1] != affected[at+n] {
			return false
		}
		at += n + 1
	}
	return true
}

// statement appends w's conditional statements to q and their arguments,
// and returns how many it appended: one, or for a delete two — the row is
// first stamped with the deleting write's event id and origin (its
// revision kept), so the captured delete's before image names who deleted
// it: loop suppression on the other side tells the platform's delete from
// a local one by it (normalize's origin check; the capture triggers keep
// the metadata of an update that sets a new event id).
func statement(q *strings.Builder, add func(...any), w Conditional, now time.Time) (int, error) {
	table := w.Table.sql()
	meta := []any{w.Stamp.Revision, w.Stamp.Origin, strings.ToLower(w.Stamp.EventID), now}
	key, err := keyArgs(w)
	if err != nil {
		return 0, err
	}
	where := func() {
		for i, k := range w.Key {
			if i > 0 {
				q.WriteString(" AND ")
			}
			q.WriteString(quote(k.Name) + " = ?")
		}
		q.WriteString(" AND `_sync_revision` = ?;\n")
		add(key...)
		add(w.Base)
	}
	switch w.Op {
	case OpInsert:
		names, vals, err := insertRow(w)
		if err != nil {
			return 0, err
		}
		names = append(names, syncNames...)
		vals = append(vals, meta...)
		// A plain insert: when a row has the key already, the duplicate-key
		// error ends the batch and the writes run alone (Apply), where it
		// means "nothing changed". No upsert (its no-op update would fire
		// the table's update triggers) and no NOT EXISTS check (its shared
		// gap locks deadlock concurrent batches).
		fmt.Fprintf(q, "INSERT INTO %s (%s) VALUES (%s);\n", table, quoteAll(names, ""),
			strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", "))
		add(vals...)
		return 1, nil
	case OpUpdate:
		names, vals, err := updateSet(w)
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(q, "UPDATE %s SET %s WHERE ", table, quoteAll(append(names, syncNames...), " = ?"))
		add(vals...)
		add(meta...)
		where()
		return 1, nil
	case OpDelete:
		fmt.Fprintf(q, "UPDATE %s SET `_sync_event_id` = ?, `_sync_origin` = ? WHERE ", table)
		add(strings.ToLower(w.Stamp.EventID), w.Stamp.Origin)
		where()
		fmt.Fprintf(q, "DELETE FROM %s WHERE ", table)
		where()
		return 2, nil
	}
	return 0, fmt.Errorf("apply: unknown op %d", w.Op)
}

// syncNames are the platform columns a write sets, in the order of a
// write's metadata values (revision, origin, event id, time).
var syncNames = []string{"_sync_revision", "_sync_origin", "_sync_event_id", "_sync_updated_at"}

// keyArgs is w's key as driver arguments, in key order.
func keyArgs(w Conditional) ([]any, error) {
	out := make([]any, len(w.Key))
	for i, k := range w.Key {
		v, err := value(k)
		if err != nil {
			return nil, fmt.Errorf("primary_key[%d]: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// insertRow is what an insert of w writes besides the platform columns:
// its values, then the key columns they lack.
func insertRow(w Conditional) (names []string, vals []any, err error) {
	have := map[string]bool{}
	for i, c := range w.Values {
		v, err := value(c)
		if err != nil {
			return nil, nil, fmt.Errorf("after.columns[%d]: %w", i, err)
		}
		names, vals, have[c.Name] = append(names, c.Name), append(vals, v), true
	}
	for i, k := range w.Key {
		if !have[k.Name] {
			v, err := value(k)
			if err != nil {
				return nil, nil, fmt.Errorf("primary_key[%d]: %w", i, err)
			}
			names, vals = append(names, k.Name), append(vals, v)
		}
	}
	return names, vals, nil
}

// updateSet is what an update of w sets besides the platform columns: its
// values that are not key columns.
func updateSet(w Conditional) (names []string, vals []any, err error) {
	key := map[string]bool{}
	for _, k := range w.Key {
		key[k.Name] = true
	}
	for i, c := range w.Values {
		if key[c.Name] {
			continue
		}
		v, err := value(c)
		if err != nil {
			return nil, nil, fmt.Errorf("after.columns[%d]: %w", i, err)
		}
		names, vals = append(names, c.Name), append(vals, v)
	}
	return names, vals, nil
}

// quoteAll is names quoted, each followed by suffix, joined by commas.
func quoteAll(names []string, suffix string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quote(n) + suffix
	}
	return strings.Join(q, ", ")
}

// quote quotes an identifier. The shore's rule registry admits only plain
// identifiers; a ship's rules name their tables and columns as the ship's
// database does, so a backtick is doubled as MySQL quoting wants.
func quote(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// value is a column value as a driver argument.
func value(c *pb.ColumnValue) (any, error) {
	switch v := c.Value.(type) {
	case *pb.ColumnValue_Null:
		return nil, nil
	case *pb.ColumnValue_IntValue:
		return v.IntValue, nil
	case *pb.ColumnValue_UintValue:
		return v.UintValue, nil
	case *pb.ColumnValue_DoubleValue:
		return v.DoubleValue, nil
	case *pb.ColumnValue_DecimalValue:
		return v.DecimalValue, nil
	case *pb.ColumnValue_StringValue:
		return v.StringValue, nil
	case *pb.ColumnValue_BytesValue:
		return v.BytesValue, nil
	case *pb.ColumnValue_BoolValue:
		return v.BoolValue, nil
	case *pb.ColumnValue_TimestampValue:
		return v.TimestampValue.AsTime().UTC(), nil
	case *pb.ColumnValue_DateValue:
		return v.DateValue, nil
	case *pb.ColumnValue_TimeValue:
		return v.TimeValue, nil
	case *pb.ColumnValue_JsonValue:
		return v.JsonValue, nil
	}
	return nil, errors.New("no value")
}

// Found is what Inspect learnt of a write that changed no row.
type Found struct {
	// Applied: the ledger holds the write's stamp (an earlier attempt
	// wrote it).
	Applied bool
	// The target row as it is (Exists false: no row; the other fields are
	// then empty). Row holds Table.Columns, as text where the value is
	// valid UTF-8 and as bytes otherwise, NULL as null.
	Exists                    bool
	Revision, Origin, EventID string
	Row                       *pb.RowImage
}

// Inspect looks up writes that changed no row: the ledger first, then the
// row itself (not read when the ledger answers). ctx governs the reads.
func (t *Target) Inspect(ctx context.Context, ws []Conditional) ([]Found, error) {
	inLedger, err := t.Applied(ctx, ws)
	if err != nil {
		return nil, err
	}
	out := make([]Found, len(ws))
	for i, w := range ws {
		if inLedger[i] {
			out[i].Applied = true
			continue
		}
		if out[i], err = t.readRow(ctx, w); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Applied reports per write whether the ledger holds its stamp: whether a
// write with that stamp changed the target before. A writer with no record
// head of its own (a ship's remote applier) asks before it writes, since a
// write can succeed twice — an insert again after a later delete — and the
// second attempt then fails its ledger row (Apply refuses it as a whole and
// writes nothing). ctx governs the read.
func (t *Target) Applied(ctx context.Context, ws []Conditional) ([]bool, error) {
	out := make([]bool, len(ws))
	if len(ws) == 0 {
		return out, nil
	}
	var q strings.Builder
	args := make([]any, 0, 2*len(ws))
	q.WriteString("SELECT origin_node_id, event_id FROM sync_applied_event WHERE (origin_node_id, event_id) IN (")
	for i, w := range ws {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?)")
		args = append(args, w.Stamp.Origin, strings.ToLower(w.Stamp.EventID))
	}
	q.WriteString(")")
	rows, err := t.db.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("apply: read ledger: %w", err)
	}
	inLedger := map[[2]string]bool{}
	for rows.Next() {
		var o, e string
		if err := rows.Scan(&o, &e); err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("apply: read ledger: %w", err)
		}
		inLedger[[2]string{o, e}] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("apply: read ledger: %w", err)
	}
	for i, w := range ws {
		out[i] = inLedger[[2]string{w.Stamp.Origin, strings.ToLower(w.Stamp.EventID)}]
	}
	return out, nil
}

// readRow reads w's target row: its _sync columns and the table's columns.
func (t *Target) readRow(ctx context.Context, w Conditional) (Found, error) {
	var q strings.Builder
	cols := w.Table.Columns
	q.WriteString("SELECT `_sync_revision`, `_sync_origin`, coalesce(`_sync_event_id`, '')")
	for _, c := range cols {
		q.WriteString(", " + quote(c))
	}
	fmt.Fprintf(&q, " FROM %s WHERE ", w.Table.sql())
	args := make([]any, 0, len(w.Key))
	for i, k := range w.Key {
		v, err := value(k)
		if err != nil {
			return Found{}, err
		}
		if i > 0 {
			q.WriteString(" AND ")
		}
		q.WriteString(quote(k.Name) + " = ?")
		args = append(args, v)
	}
	var f Found
	vals := make([]any, len(cols))
	dest := []any{&f.Revision, &f.Origin, &f.EventID}
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	rows, err := t.db.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return Found{}, fmt.Errorf("apply: read target row: %w", err)
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return Found{}, fmt.Errorf("apply: read target row: %w", err)
		}
		f.Exists = true
		f.Row = &pb.RowImage{}
		for i, c := range cols {
			cv := &pb.ColumnValue{Name: c}
			// The pool parses DATE and DATETIME values into times (UTC);
			// everything else arrives as text or bytes.
			switch v := vals[i].(type) {
			case nil:
				cv.Value = &pb.ColumnValue_Null{Null: true}
			case time.Time:
				cv.Value = &pb.ColumnValue_TimestampValue{TimestampValue: timestamppb.New(v)}
			case []byte:
				if utf8.Valid(v) {
					cv.Value = &pb.ColumnValue_StringValue{StringValue: string(v)}
				} else {
					cv.Value = &pb.ColumnValue_BytesValue{BytesValue: v}
				}
			default:
				cv.Value = &pb.ColumnValue_StringValue{StringValue: fmt.Sprint(v)}
			}
			f.Row.Columns = append(f.Row.Columns, cv)
		}
	}
	if err := rows.Err(); err != nil {
		return Found{}, fmt.Errorf("apply: read target row: %w", err)
	}
	return f, nil
}
