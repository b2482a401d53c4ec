package shore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
)

// WindowTable names the columns of one side of a window reconcile: the
// table (of db's current database), its key columns in key order, its
// business time column and whether it carries _sync_revision.
type WindowTable struct {
	Table      string
	Key        []string
	TimeColumn string
	Revisioned bool
}

// WindowRows reads every row of t from db (MariaDB) as a window reconcile
// sees it: the key as a JSON array of the key values' text (the same on
// both sides when the types agree), the business time (nil when NULL or
// not a time: a DATE, DATETIME or TIMESTAMP, or RFC 3339 text) and
// _sync_revision when revisioned. Names must be plain identifiers.
func WindowRows(ctx context.Context, db *sql.DB, t WindowTable) ([]normalize.WindowRow, error) {
	cols := append(append([]string{}, t.Key...), t.TimeColumn)
	if t.Revisioned {
		cols = append(cols, "_sync_revision")
	}
	for _, c := range append([]string{t.Table}, cols...) {
		if !identifier.MatchString(c) {
			return nil, fmt.Errorf("shore: window rows: %q is not a plain identifier", c)
		}
	}
	q := strings.NewReplacer("{{cols}}", "`"+strings.Join(cols, "`, `")+"`", "{{table}}", "`"+t.Table+"`").
		Replace(releaseStmts["WindowRows"])
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("shore: window rows of %s: %w", t.Table, err)
	}
	defer rows.Close()
	var out []normalize.WindowRow
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("shore: window rows of %s: %w", t.Table, err)
		}
		key := make([]string, len(t.Key))
		for i := range t.Key {
			key[i] = text(vals[i])
		}
		kb, _ := json.Marshal(key)
		row := normalize.WindowRow{Key: string(kb), BusinessAt: asTime(vals[len(t.Key)])}
		if t.Revisioned {
			row.Revision = text(vals[len(cols)-1])
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(x)
	}
}

func asTime(v any) *time.Time {
	switch x := v.(type) {
	case time.Time:
		return &x
	case []byte:
		if t, err := time.Parse(time.RFC3339Nano, string(x)); err == nil {
			return &t
		}
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return &t
		}
	}
	return nil
}
