package capture

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// SnapshotReader reads a captured table's current rows in primary-key
// order, one chunk at a time, as Debezium read records (op "r") — the same
// envelopes (schema and payload) the capture produces for the table's
// changes, so a snapshot row decodes and normalises exactly like a change
// of it. It is safe for concurrent use.
type SnapshotReader struct {
	db      *sql.DB
	logical string
	c       *codec
	// next reads a chunk after a cursor, first the first chunk.
	next, first string
}

// SnapshotRecord is one row read: the record's Kafka-style key and value
// (JSON envelopes) and the row's primary key as the database returned it
// (the cursor the next chunk starts after).
type SnapshotRecord struct {
	Key, Value []byte
	Cursor     [][]byte
}

// NewSnapshotReader inspects table database.table (it must pass the same
// checks as Install: supported types, a primary key, the platform columns)
// and returns its reader. logical is the capture's logical name (the
// envelopes' source.name); ctx governs the inspection.
func NewSnapshotReader(ctx context.Context, db *sql.DB, logical, database, table string) (*SnapshotReader, error) {
	t, err := inspect(ctx, db, database, table)
	if err != nil {
		return nil, err
	}
	c, err := newCodec(logical, t)
	if err != nil {
		return nil, err
	}
	all := make([]string, len(t.Columns))
	for i, col := range t.Columns {
		all[i] = col.Name
	}
	keys := make([]string, len(t.Key))
	marks := make([]string, len(t.Key))
	for i, k := range t.Key {
		keys[i], marks[i] = "t."+quoteIdent(k), "?"
	}
	// Keyset pagination: every chunk is one statement (a consistent read of
	// its rows), resumable from the last key alone.
	next := fmt.Sprintf("SELECT %s, %s FROM %s.%s t WHERE (%s) > (%s) ORDER BY %s LIMIT ?",
		jsonObject(t, all, "t"), strings.Join(keys, ", "), quoteIdent(t.DB), quoteIdent(t.Name),
		strings.Join(keys, ", "), strings.Join(marks, ", "), strings.Join(keys, ", "))
	first := fmt.Sprintf("SELECT %s, %s FROM %s.%s t ORDER BY %s LIMIT ?",
		jsonObject(t, all, "t"), strings.Join(keys, ", "), quoteIdent(t.DB), quoteIdent(t.Name), strings.Join(keys, ", "))
	return &SnapshotReader{db: db, logical: logical, c: c, next: next, first: first}, nil
}

// KeyColumns are the table's primary key columns, in key order.
func (r *SnapshotReader) KeyColumns() []string { return r.c.t.Key }

// Chunk reads up to limit rows whose key is greater than after (nil: from
// the first row), in key order, as read records stamped with at (the
// snapshot's read time). Fewer than limit rows means the table's end.
// Errors name the table, never a value.
func (r *SnapshotReader) Chunk(ctx context.Context, after [][]byte, limit int, at time.Time) ([]SnapshotRecord, error) {
	q := r.next
	var args []any
	if after == nil {
		q = r.first
	} else {
		if len(after) != len(r.c.t.Key) {
			return nil, fmt.Errorf("capture: snapshot of %s.%s: cursor has %d values for a %d-column key",
				bound(r.c.t.DB), bound(r.c.t.Name), len(after), len(r.c.t.Key))
		}
		for _, v := range after {
			args = append(args, v)
		}
	}
	args = append(args, limit)
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("capture: snapshot of %s.%s: read chunk: %w", bound(r.c.t.DB), bound(r.c.t.Name), err)
	}
	defer rows.Close()
	src := sourcePayload{Version: ConnectorVersion, Connector: "mysql", Name: r.logical, TsMs: at.UnixMilli(),
		Snapshot: "true", DB: r.c.t.DB, TsUs: at.UnixMicro(), TsNs: at.UnixMicro() * 1000, Table: r.c.t.Name, File: SourceFile}
	var out []SnapshotRecord
	for rows.Next() {
		var img []byte
		cur := make([][]byte, len(r.c.t.Key))
		dest := []any{&img}
		for i := range cur {
			dest = append(dest, &cur[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("capture: snapshot of %s.%s: read row: %w", bound(r.c.t.DB), bound(r.c.t.Name), err)
		}
		after, err := r.c.image(img, "after")
		if err != nil {
			return nil, err
		}
		key, err := r.c.key(after)
		if err != nil {
			return nil, permanent("snapshot of %s.%s: key encode failed", bound(r.c.t.DB), bound(r.c.t.Name))
		}
		v, err := json.Marshal(envelope{Schema: r.c.valueSchema, Payload: valuePayload{After: after, Source: src,
			Op: "r", TsMs: at.UnixMilli(), TsUs: at.UnixMicro(), TsNs: at.UnixMicro() * 1000}})
		if err != nil {
			return nil, permanent("snapshot of %s.%s: encode failed", bound(r.c.t.DB), bound(r.c.t.Name))
		}
		out = append(out, SnapshotRecord{Key: key, Value: v, Cursor: cur})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("capture: snapshot of %s.%s: read chunk: %w", bound(r.c.t.DB), bound(r.c.t.Name), err)
	}
	return out, nil
}
