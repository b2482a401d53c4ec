package shore

import (
	"context"
	"database/sql"
	_ "embed" // window_delete.sql
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/sqlfile"
)

//go:embed window_delete.sql
var windowDeleteSQL string

var windowDeleteStmts = sqlfile.MustParse("shore/window_delete.sql", windowDeleteSQL, "WindowDelete")

// WindowDeleted is what WindowDelete did: rows deleted, and rows left
// because they changed since they were read (another revision, or a
// business time now inside the window) or are gone.
type WindowDeleted struct {
	Deleted, Changed int
}

// WindowDelete deletes from t (db's current database, MariaDB) the rows of
// a window reconcile's plan that lie outside the window, each only if it
// is still as the plan read it: its business time before boundary and,
// when t is revisioned, the same revision. A row changed meanwhile stays
// (counted as Changed): the change is never lost to the delete. rows are
// the target's rows as WindowRows read them (their Key the JSON array of
// key texts).
func WindowDelete(ctx context.Context, db *sql.DB, t WindowTable, boundary time.Time, rows []normalize.WindowRow) (WindowDeleted, error) {
	var out WindowDeleted
	cols := append(append([]string{t.Table}, t.Key...), t.TimeColumn)
	for _, c := range cols {
		if !identifier.MatchString(c) {
			return out, fmt.Errorf("shore: window delete: %q is not a plain identifier", c)
		}
	}
	conds := make([]string, 0, len(t.Key)+2)
	for _, k := range t.Key {
		conds = append(conds, "`"+k+"` = ?")
	}
	conds = append(conds, "`"+t.TimeColumn+"` < ?")
	if t.Revisioned {
		conds = append(conds, "(`_sync_revision` = ? OR (? = '' AND `_sync_revision` IS NULL))")
	}
	q := strings.NewReplacer("{{table}}", "`"+t.Table+"`", "{{where}}", strings.Join(conds, " AND ")).
		Replace(windowDeleteStmts["WindowDelete"])
	for _, row := range rows {
		var key []string
		if err := json.Unmarshal([]byte(row.Key), &key); err != nil || len(key) != len(t.Key) {
			return out, fmt.Errorf("shore: window delete from %s: a key does not have the table's %d key columns", t.Table, len(t.Key))
		}
		args := make([]any, 0, len(key)+3)
		for _, k := range key {
			args = append(args, k)
		}
		args = append(args, boundary.UTC())
		if t.Revisioned {
			args = append(args, row.Revision, row.Revision)
		}
		res, err := db.ExecContext(ctx, q, args...)
		if err != nil {
			return out, fmt.Errorf("shore: window delete from %s: %w", t.Table, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			out.Deleted++
		} else {
			out.Changed++
		}
	}
	return out, nil
}
