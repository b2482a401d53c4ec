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

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
)

// Target is the shore's business database (MariaDB or MySQL): the tables the
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
// row per event whose write changed the target, written in the write's own
// transaction, so "did this event's write happen?" has a definite answer
// even after a crash between the target's commit and PostgreSQL's, and even
// when the row was deleted or changed again since.
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

// write is one conditional write of the target.
type write struct {
	inboxID int64
	ev      *pb.ChangeEvent
	rule    *shore.Rule
	op      Op
}

// refusal is a write the target refused for good (a value it cannot hold,
// a constraint): the event is REJECTED TARGET_REFUSED.
type refusal struct {
	number uint16
}

func (r *refusal) Error() string {
	return fmt.Sprintf("target refused the write (MySQL error %d)", r.number)
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

// apply runs ws in one target transaction, one round trip: each write
// followed by its ledger row, kept only if the write changed a row. It
// reports per write whether it changed one, and the writes the target
// refused for good. When the target refuses a write the batch is rolled
// back and every write runs alone, so only the refused one fails (a
// duplicate key on an insert is no refusal: the row exists, nothing
// changed).
func (t *Target) apply(ctx context.Context, ws []write, now time.Time) ([]bool, []error, error) {
	if len(ws) == 0 {
		return nil, nil, nil
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
		case n == errDupKey && ws[i].op == OpInsert:
			// The key exists (a row the record head did not know of):
			// nothing changed; inspect tells applied from conflict.
		case ok:
			refused[i] = &refusal{number: n}
		default:
			return nil, nil, err
		}
	}
	return changed, refused, nil
}

// run is one transaction of writes as one multi-statement round trip.
func (t *Target) run(ctx context.Context, ws []write, now time.Time) ([]bool, error) {
	var q strings.Builder
	var args []driver.NamedValue
	add := func(vs ...any) {
		for _, v := range vs {
			args = append(args, driver.NamedValue{Ordinal: len(args) + 1, Value: v})
		}
	}
	// READ COMMITTED: the conditional writes read the latest committed row
	// under its record lock either way, and no gap locks are taken that
	// would make concurrent batches deadlock.
	q.WriteString("SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\nSTART TRANSACTION;\n")
	for _, w := range ws {
		if err := statement(&q, add, w, now); err != nil {
			return nil, err
		}
		q.WriteString("INSERT INTO sync_applied_event (origin_node_id, event_id, inbox_id, applied_at) " +
			"SELECT ?, ?, ?, ? FROM DUAL WHERE ROW_COUNT() = 1 ON DUPLICATE KEY UPDATE inbox_id = inbox_id;\n")
		add(w.ev.OriginNodeId, strings.ToLower(w.ev.EventId), w.inboxID, now)
	}
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
		res, err := ex.ExecContext(ctx, q.String(), args)
		if err == nil {
			mr, ok := res.(mysql.Result)
			if !ok {
				err = errors.New("apply: the MySQL driver gave no per-statement results")
			} else if affected = mr.AllRowsAffected(); !consistent(affected, len(ws)) {
				err = fmt.Errorf("apply: statement results %v do not match %d writes and their ledger rows", affected, len(ws))
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
	out := make([]bool, len(ws))
	for i := range ws {
		out[i] = affected[2+2*i] == 1
	}
	return out, nil
}

// consistent reports whether the per-statement results of SET
// TRANSACTION, START TRANSACTION and n writes each followed by its ledger statement are whole:
// every write changed at most one row, and its ledger row exists exactly
// when it did.
func consistent(affected []int64, n int) bool {
	if len(affected) != 2+2*n {
		return false
	}
	for i := range n {
		w, l := affected[2+2*i], affected[3+2*i]
		if w < 0 || w > 1 || l != w {
			return false
		}
	}
	return true
}

// statement appends w's conditional statement to q and its arguments.
func statement(q *strings.Builder, add func(...any), w write, now time.Time) error {
	table := quote(w.rule.TargetTable)
	ev := w.ev
	meta := []any{ev.ResultRevision, ev.OriginNodeId, strings.ToLower(ev.EventId), now}
	where := func() error {
		for i, k := range ev.PrimaryKey {
			v, err := value(k)
			if err != nil {
				return fmt.Errorf("primary_key[%d]: %w", i, err)
			}
			if i > 0 {
				q.WriteString(" AND ")
			}
			q.WriteString(quote(k.Name) + " = ?")
			add(v)
		}
		q.WriteString(" AND `_sync_revision` = ?;\n")
		add(ev.BaseRevision)
		return nil
	}
	switch w.op {
	case OpInsert:
		cols := ev.GetAfter().GetColumns()
		names := make([]string, 0, len(cols)+len(ev.PrimaryKey)+4)
		var vals []any
		have := map[string]bool{}
		for i, c := range cols {
			v, err := value(c)
			if err != nil {
				return fmt.Errorf("after.columns[%d]: %w", i, err)
			}
			names, vals, have[c.Name] = append(names, quote(c.Name)), append(vals, v), true
		}
		for i, k := range ev.PrimaryKey {
			if !have[k.Name] {
				v, err := value(k)
				if err != nil {
					return fmt.Errorf("primary_key[%d]: %w", i, err)
				}
				names, vals = append(names, quote(k.Name)), append(vals, v)
			}
		}
		names = append(names, "`_sync_revision`", "`_sync_origin`", "`_sync_event_id`", "`_sync_updated_at`")
		vals = append(vals, meta...)
		// A plain insert: when a row has the key already, the duplicate-key
		// error ends the batch and the writes run alone (apply), where it
		// means "nothing changed". No upsert (its no-op update would fire
		// the table's update triggers) and no NOT EXISTS check (its shared
		// gap locks deadlock concurrent batches).
		fmt.Fprintf(q, "INSERT INTO %s (%s) VALUES (%s);\n", table, strings.Join(names, ", "),
			strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", "))
		add(vals...)
		return nil
	case OpUpdate:
		fmt.Fprintf(q, "UPDATE %s SET ", table)
		key := map[string]bool{}
		for _, k := range ev.PrimaryKey {
			key[k.Name] = true
		}
		for i, c := range ev.GetAfter().GetColumns() {
			if key[c.Name] {
				continue
			}
			v, err := value(c)
			if err != nil {
				return fmt.Errorf("after.columns[%d]: %w", i, err)
			}
			q.WriteString(quote(c.Name) + " = ?, ")
			add(v)
		}
		q.WriteString("`_sync_revision` = ?, `_sync_origin` = ?, `_sync_event_id` = ?, `_sync_updated_at` = ? WHERE ")
		add(meta...)
		return where()
	case OpDelete:
		fmt.Fprintf(q, "DELETE FROM %s WHERE ", table)
		return where()
	}
	return fmt.Errorf("apply: unknown op %d", w.op)
}

// quote quotes an identifier the rule registry validated (letters, digits,
// underscores).
func quote(name string) string { return "`" + name + "`" }

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

// found is what inspect learnt of a write that changed no row.
type found struct {
	// applied: the ledger holds the event (an earlier attempt wrote it).
	applied bool
	// The target row as it is (exists false: no row).
	exists                    bool
	revision, origin, eventID string
	row                       *pb.RowImage
}

// inspect looks up writes that changed no row: the ledger first, then the
// row itself.
func (t *Target) inspect(ctx context.Context, ws []write) ([]found, error) {
	out := make([]found, len(ws))
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
		args = append(args, w.ev.OriginNodeId, strings.ToLower(w.ev.EventId))
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
		if inLedger[[2]string{w.ev.OriginNodeId, strings.ToLower(w.ev.EventId)}] {
			out[i].applied = true
			continue
		}
		if out[i], err = t.readRow(ctx, w); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readRow reads w's target row: its _sync columns and the rule's columns.
func (t *Target) readRow(ctx context.Context, w write) (found, error) {
	var q strings.Builder
	cols := w.rule.Columns
	q.WriteString("SELECT `_sync_revision`, `_sync_origin`, coalesce(`_sync_event_id`, '')")
	for _, c := range cols {
		q.WriteString(", " + quote(c))
	}
	fmt.Fprintf(&q, " FROM %s WHERE ", quote(w.rule.TargetTable))
	args := make([]any, 0, len(w.ev.PrimaryKey))
	for i, k := range w.ev.PrimaryKey {
		v, err := value(k)
		if err != nil {
			return found{}, err
		}
		if i > 0 {
			q.WriteString(" AND ")
		}
		q.WriteString(quote(k.Name) + " = ?")
		args = append(args, v)
	}
	var f found
	vals := make([]sql.RawBytes, len(cols))
	dest := []any{&f.revision, &f.origin, &f.eventID}
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	rows, err := t.db.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return found{}, fmt.Errorf("apply: read target row: %w", err)
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return found{}, fmt.Errorf("apply: read target row: %w", err)
		}
		f.exists = true
		f.row = &pb.RowImage{}
		for i, c := range cols {
			cv := &pb.ColumnValue{Name: c}
			switch b := vals[i]; {
			case b == nil:
				cv.Value = &pb.ColumnValue_Null{Null: true}
			case utf8.Valid(b):
				cv.Value = &pb.ColumnValue_StringValue{StringValue: string(b)}
			default:
				cv.Value = &pb.ColumnValue_BytesValue{BytesValue: append([]byte(nil), b...)}
			}
			f.row.Columns = append(f.row.Columns, cv)
		}
	}
	if err := rows.Err(); err != nil {
		return found{}, fmt.Errorf("apply: read target row: %w", err)
	}
	return f, nil
}
