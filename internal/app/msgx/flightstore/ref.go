package flightstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// RefRow is one REF_MASTER row of a reference type (seed 000 §7.2): RKey is
// the key; RVal the value when HasVal, NULL otherwise (an empty RVal with
// HasVal is the empty string, not NULL).
type RefRow struct {
	RKey   string
	RVal   string
	HasVal bool
}

// UpsertRefs writes the rows of one reference response of type rtype into
// REF_MASTER in one statement: new keys are inserted, known keys take the new
// value; UPDATED_AT = now and LAST_MSG_ID = msgID on every row written. Keys
// absent from rows are kept. A key given twice takes its last row. An empty
// rtype or RKey is an error.
func UpsertRefs(ctx context.Context, q Querier, rtype string, rows []RefRow, msgID int64, now time.Time) error {
	op := fmt.Sprintf("upsert references %s", rtype)
	if rtype == "" {
		return fmt.Errorf("flightstore: %s: empty reference type", op)
	}
	if len(rows) == 0 {
		return nil
	}
	pos := make(map[string]int, len(rows))
	keys := make([]string, 0, len(rows))
	vals := make([]pgtype.Text, 0, len(rows))
	for _, r := range rows {
		if r.RKey == "" {
			return fmt.Errorf("flightstore: %s: empty key", op)
		}
		v := pgtype.Text{String: r.RVal, Valid: r.HasVal}
		if i, dup := pos[r.RKey]; dup {
			vals[i] = v // ON CONFLICT cannot touch a row twice in one statement
			continue
		}
		pos[r.RKey] = len(keys)
		keys = append(keys, r.RKey)
		vals = append(vals, v)
	}
	if _, err := q.Exec(ctx, stmts.refUpsert, rtype, keys, vals, now, msgID); err != nil {
		return mapErr(op, err)
	}
	return nil
}

// LoadRefs returns the REF_MASTER rows of rtype keyed by RKey (never nil).
func LoadRefs(ctx context.Context, q Querier, rtype string) (map[string]RefRow, error) {
	op := fmt.Sprintf("load references %s", rtype)
	rows, err := q.Query(ctx, stmts.refLoad, rtype)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	out := map[string]RefRow{}
	for rows.Next() {
		var (
			k string
			v pgtype.Text
		)
		if err := rows.Scan(&k, &v); err != nil {
			return nil, mapErr(op, err)
		}
		out[k] = RefRow{RKey: k, RVal: v.String, HasVal: v.Valid}
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}
