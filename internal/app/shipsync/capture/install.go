package capture

import (
	"context"
	"crypto/sha256"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/go-sql-driver/mysql"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

//go:embed capture.sql
var captureSQL string

var stmts = sqlfile.MustParse("capture/capture.sql", captureSQL, "ChangelogCreate", "SchemaCreate", "SchemaInsert",
	"SchemaGet", "TableMetaCreate", "TableMetaUpsert", "CurrentSchema", "TableMetaList", "TableMetaDelete", "CurrentDatabase", "Columns",
	"PrimaryKey", "JSONChecks", "TriggerDrop", "ChangelogDrop", "ChangelogPrune", "TriggerBeforeInsert", "TriggerBeforeUpdate", "TriggerAfterInsert",
	"TriggerAfterUpdate", "TriggerAfterDelete")

// templates are the statements of capture.sql that install.go fills in.
var templates = func() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, n := range []string{"TriggerDrop", "ChangelogPrune", "TriggerBeforeInsert", "TriggerBeforeUpdate",
		"TriggerAfterInsert", "TriggerAfterUpdate", "TriggerAfterDelete"} {
		out[n] = template.Must(template.New(n).Option("missingkey=error").Parse(stmts[n]))
	}
	return out
}()

func render(name string, data any) (string, error) {
	var b strings.Builder
	if err := templates[name].Execute(&b, data); err != nil {
		return "", fmt.Errorf("capture: render %s: %w", name, err)
	}
	return b.String(), nil
}

// identRE is what install accepts as a table or column name: the names
// are spliced (quoted) into trigger DDL and JSON_OBJECT keys.
var identRE = regexp.MustCompile(`^[A-Za-z0-9_$]{1,64}$`)

// nodeRE is what install accepts as a node id: it is baked into the
// triggers as a literal.
var nodeRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func quoteLit(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// syncColumn is one platform column as apply.SyncColumns defines it.
type syncColumn struct {
	name, typ string
	notNull   bool
}

// syncColumns parses apply.SyncColumns ("_sync_revision CHAR(36) NOT NULL,
// …"): the one definition of the platform columns.
func syncColumns() []syncColumn {
	var out []syncColumn
	for _, def := range strings.Split(apply.SyncColumns, ",") {
		f := strings.Fields(def)
		out = append(out, syncColumn{name: f[0], typ: strings.ToLower(f[1]), notNull: strings.Contains(def, "NOT NULL")})
	}
	return out
}

// TableError is install's refusal of one table: which table, which column
// (empty when the table as a whole is refused) and why.
type TableError struct {
	Table, Column, Problem string
}

func (e *TableError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("capture: table %s: %s", bound(e.Table), e.Problem)
	}
	return fmt.Sprintf("capture: table %s: column %s: %s", bound(e.Table), bound(e.Column), e.Problem)
}

// Table is a captured table as install read it.
type Table struct {
	DB, Name string
	// Columns in table order.
	Columns []Column
	// Key names the primary-key columns in key order.
	Key []string
	// SchemaID is the schema history row the triggers write into each
	// changelog row (set by Install).
	SchemaID int64
}

// column returns the column named n.
func (t *Table) column(n string) (Column, bool) {
	for _, c := range t.Columns {
		if c.Name == n {
			return c, true
		}
	}
	return Column{}, false
}

// InstallConfig configures Install.
type InstallConfig struct {
	// NodeID is this node's id, written into _sync_origin by local writes
	// (letters, digits, ".", "_", ":", "-"; at most 64). Required.
	NodeID string
	// Tables are the tables of the connection's database to capture.
	// Required.
	Tables []string
	// Clock stamps installed_at of the metadata rows. Default
	// relayclock.System{}.
	Clock relaytype.Clock
}

// Install prepares the business database db (its default database) for
// capture: the changelog, the schema history and the installed-table list,
// and for each table five triggers (see docs/shipsync/capture.md); the
// triggers write the schema id of the columns they were generated from into
// every changelog row. It checks every table
// before it changes anything: each must exist, have a primary key, carry
// the platform columns of apply.SyncColumns with their types, and use only
// column types SchemaFor maps; a refusal is a *TableError naming table and
// column. Re-running it is safe: the tables are created if absent and the
// triggers replaced (CREATE OR REPLACE, one statement each), so a re-run
// after an ALTER TABLE regenerates them from the new columns under a new
// schema id (unchanged columns keep theirs). ctx governs every statement.
func Install(ctx context.Context, db *sql.DB, cfg InstallConfig) ([]*Table, error) {
	if !nodeRE.MatchString(cfg.NodeID) {
		return nil, errors.New("capture: InstallConfig.NodeID must be 1-64 of [A-Za-z0-9._:-]")
	}
	if len(cfg.Tables) == 0 {
		return nil, errors.New("capture: InstallConfig.Tables is empty")
	}
	if cfg.Clock == nil {
		cfg.Clock = relayclock.System{}
	}
	schema, err := currentDatabase(ctx, db)
	if err != nil {
		return nil, err
	}
	var tables []*Table
	for _, name := range cfg.Tables {
		t, err := inspect(ctx, db, schema, name)
		if err != nil {
			return nil, err
		}
		tables = append(tables, t)
	}
	for _, q := range []string{"ChangelogCreate", "SchemaCreate", "TableMetaCreate"} {
		if _, err := db.ExecContext(ctx, stmts[q]); err != nil {
			return nil, fmt.Errorf("capture: install %s: %w", q, err)
		}
	}
	now := cfg.Clock.Now().UTC().Format("2006-01-02 15:04:05.000000")
	for _, t := range tables {
		if t.SchemaID, err = recordSchema(ctx, db, t, now); err != nil {
			return nil, err
		}
		if err := installTriggers(ctx, db, t, cfg.NodeID); err != nil {
			return nil, err
		}
		if _, err := db.ExecContext(ctx, stmts["TableMetaUpsert"], t.DB, t.Name, cfg.NodeID, t.SchemaID, now); err != nil {
			return nil, fmt.Errorf("capture: install %s: record metadata: %w", t.Name, err)
		}
	}
	return tables, nil
}

// recordSchema returns the schema id of t's columns: the installed one
// when they did not change, else a new row of the schema history.
func recordSchema(ctx context.Context, db *sql.DB, t *Table, now string) (int64, error) {
	cols, _ := json.Marshal(t.Columns)
	key, _ := json.Marshal(t.Key)
	var (
		id             int64
		oldCols, oldKy string
	)
	err := db.QueryRowContext(ctx, stmts["CurrentSchema"], t.DB, t.Name).Scan(&id, &oldCols, &oldKy)
	switch {
	case err == nil && oldCols == string(cols) && oldKy == string(key):
		return id, nil
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return 0, fmt.Errorf("capture: install %s: read installed schema: %w", t.Name, err)
	}
	r, err := db.ExecContext(ctx, stmts["SchemaInsert"], t.DB, t.Name, string(cols), string(key), now)
	if err != nil {
		return 0, fmt.Errorf("capture: install %s: record schema: %w", t.Name, err)
	}
	return r.LastInsertId()
}

func currentDatabase(ctx context.Context, db *sql.DB) (string, error) {
	var schema sql.NullString
	if err := db.QueryRowContext(ctx, stmts["CurrentDatabase"]).Scan(&schema); err != nil {
		return "", fmt.Errorf("capture: current database: %w", err)
	}
	if schema.String == "" {
		return "", errors.New("capture: the DSN names no database")
	}
	return schema.String, nil
}

// inspect reads and checks one table.
func inspect(ctx context.Context, db *sql.DB, schema, name string) (*Table, error) {
	if !identRE.MatchString(name) || strings.HasPrefix(name, "_sync_") {
		return nil, &TableError{Table: name, Problem: "not a capturable table name ([A-Za-z0-9_$], not _sync_*)"}
	}
	t := &Table{DB: schema, Name: name}
	rows, err := db.QueryContext(ctx, stmts["Columns"], schema, name)
	if err != nil {
		return nil, fmt.Errorf("capture: table %s: read columns: %w", name, err)
	}
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.DataType, &c.ColumnType, &c.Nullable, &c.Precision, &c.Scale,
			&c.DatetimePrecision); err != nil {
			rows.Close()
			return nil, fmt.Errorf("capture: table %s: read columns: %w", name, err)
		}
		c.DataType = strings.ToLower(c.DataType)
		t.Columns = append(t.Columns, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("capture: table %s: read columns: %w", name, err)
	}
	if len(t.Columns) == 0 {
		return nil, &TableError{Table: name, Problem: "does not exist in database " + bound(schema)}
	}
	if t.Key, err = strColumn(ctx, db, stmts["PrimaryKey"], schema, name); err != nil {
		return nil, fmt.Errorf("capture: table %s: read primary key: %w", name, err)
	}
	if len(t.Key) == 0 {
		return nil, &TableError{Table: name, Problem: "has no primary key (a change could not be keyed)"}
	}
	checks, err := strColumn(ctx, db, stmts["JSONChecks"], schema, name)
	if err != nil {
		return nil, fmt.Errorf("capture: table %s: read checks: %w", name, err)
	}
	for i, c := range t.Columns {
		if !identRE.MatchString(c.Name) {
			return nil, &TableError{Table: name, Column: c.Name, Problem: "name not supported ([A-Za-z0-9_$])"}
		}
		t.Columns[i].JSON = c.DataType == "longtext" && slices.Contains(checks, "json_valid(`"+c.Name+"`)")
		if _, err := SchemaFor(t.Columns[i]); err != nil {
			return nil, &TableError{Table: name, Column: c.Name, Problem: "type " + bound(c.DataType) + " is not supported"}
		}
	}
	for _, sc := range syncColumns() {
		c, ok := t.column(sc.name)
		want := fmt.Sprintf("want %s %s", sc.name, strings.ToUpper(sc.typ))
		if sc.notNull {
			want += " NOT NULL"
		}
		switch {
		case !ok:
			return nil, &TableError{Table: name, Column: sc.name, Problem: "platform column missing (" + want + ")"}
		case strings.ToLower(c.ColumnType) != sc.typ || c.Nullable == sc.notNull:
			return nil, &TableError{Table: name, Column: sc.name, Problem: "platform column has type " + bound(c.ColumnType) +
				" nullable=" + fmt.Sprint(c.Nullable) + " (" + want + ")"}
		}
	}
	return t, nil
}

func strColumn(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// triggerName is "_sync_<kind>_<table>", shortened with a hash to MySQL's
// 64-character limit.
func triggerName(kind, table string) string {
	n := "_sync_" + kind + "_" + table
	if len(n) <= 64 {
		return n
	}
	h := sha256.Sum256([]byte(table))
	return n[:64-13] + "_" + hex.EncodeToString(h[:6])
}

var triggerKinds = []struct{ kind, stmt string }{
	{"bi", "TriggerBeforeInsert"}, {"bu", "TriggerBeforeUpdate"},
	{"ai", "TriggerAfterInsert"}, {"au", "TriggerAfterUpdate"}, {"ad", "TriggerAfterDelete"},
}

// jsonObject is JSON_OBJECT('col', <expr>, …) over cols of row.
func jsonObject(t *Table, cols []string, row string) string {
	parts := make([]string, 0, len(cols))
	for _, n := range cols {
		c, _ := t.column(n)
		parts = append(parts, quoteLit(n)+", "+triggerExpr(c, row))
	}
	return "JSON_OBJECT(" + strings.Join(parts, ", ") + ")"
}

func installTriggers(ctx context.Context, db *sql.DB, t *Table, node string) error {
	all := make([]string, len(t.Columns))
	unchanged := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		all[i] = c.Name
		// BINARY: a case- or trailing-space-only change is a change.
		unchanged[i] = "BINARY NEW." + quoteIdent(c.Name) + " <=> BINARY OLD." + quoteIdent(c.Name)
	}
	data := map[string]string{
		"Table": quoteIdent(t.Name), "TableLit": quoteLit(t.Name), "DB": quoteLit(t.DB), "Node": quoteLit(node),
		"Unchanged": strings.Join(unchanged, " AND "),
		"NewRow":    jsonObject(t, all, "NEW"), "OldRow": jsonObject(t, all, "OLD"),
		"NewKey": jsonObject(t, t.Key, "NEW"), "OldKey": jsonObject(t, t.Key, "OLD"),
		"SchemaID": strconv.FormatInt(t.SchemaID, 10),
	}
	for _, k := range triggerKinds {
		data["Name"] = quoteIdent(triggerName(k.kind, t.Name))
		q, err := render(k.stmt, data)
		if err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("capture: table %s: create trigger %s: %w", t.Name, k.kind, err)
		}
	}
	return nil
}

// UninstallConfig configures Uninstall.
type UninstallConfig struct {
	// Tables whose triggers to drop; empty means every installed table.
	Tables []string
	// DropChangelog also drops _sync_changelog and the metadata tables
	// (only with every table uninstalled): changes not yet read are lost.
	DropChangelog bool
}

// Uninstall drops the capture triggers of the tables and their metadata
// rows; the changelog stays (rows not yet captured are still read by a
// running capture) unless DropChangelog. It returns the tables it
// uninstalled. ctx governs every statement.
func Uninstall(ctx context.Context, db *sql.DB, cfg UninstallConfig) ([]string, error) {
	schema, err := currentDatabase(ctx, db)
	if err != nil {
		return nil, err
	}
	tables := cfg.Tables
	if len(tables) == 0 {
		if tables, err = strColumn(ctx, db, stmts["TableMetaList"], schema); err != nil && !isNoSuchTable(err) {
			return nil, fmt.Errorf("capture: uninstall: list installed tables: %w", err)
		}
	} else if cfg.DropChangelog {
		return nil, errors.New("capture: uninstall: DropChangelog only with every table (no Tables)")
	}
	for _, name := range tables {
		if !identRE.MatchString(name) {
			return nil, &TableError{Table: name, Problem: "not a table name"}
		}
		for _, k := range triggerKinds {
			q, err := render("TriggerDrop", map[string]string{"Name": quoteIdent(triggerName(k.kind, name))})
			if err != nil {
				return nil, err
			}
			if _, err := db.ExecContext(ctx, q); err != nil {
				return nil, fmt.Errorf("capture: uninstall %s: drop trigger %s: %w", name, k.kind, err)
			}
		}
		if _, err := db.ExecContext(ctx, stmts["TableMetaDelete"], schema, name); err != nil && !isNoSuchTable(err) {
			return nil, fmt.Errorf("capture: uninstall %s: %w", name, err)
		}
	}
	if cfg.DropChangelog {
		if _, err := db.ExecContext(ctx, stmts["ChangelogDrop"]); err != nil {
			return nil, fmt.Errorf("capture: uninstall: drop changelog: %w", err)
		}
	}
	return tables, nil
}

// isNoSuchTable reports MySQL error 1146 (table doesn't exist).
func isNoSuchTable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1146
}

// loadSchema reads a schema of the history.
func loadSchema(ctx context.Context, db *sql.DB, id int64) (*Table, error) {
	var cols, key string
	t := &Table{SchemaID: id}
	if err := db.QueryRowContext(ctx, stmts["SchemaGet"], id).Scan(&t.DB, &t.Name, &cols, &key); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(cols), &t.Columns); err != nil {
		return nil, fmt.Errorf("capture: schema %d: columns: %w", id, err)
	}
	if err := json.Unmarshal([]byte(key), &t.Key); err != nil {
		return nil, fmt.Errorf("capture: schema %d: key: %w", id, err)
	}
	return t, nil
}
