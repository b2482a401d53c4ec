package capture

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/relaytype"
)

// ConnectorVersion is the source.version the envelopes carry: a Debezium
// 2.x MySQL connector, whose envelope shape they follow.
const ConnectorVersion = "2.7.3.Final"

// SourceFile is source.file: there is no binlog, the position (source.pos)
// is the changelog id.
const SourceFile = "relay-changelog"

// permanentError is a changelog row the producer can never convert: the
// engine makes its message DEAD(MALFORMED) with this text (never a value).
type permanentError struct{ msg string }

func (e *permanentError) Error() string { return "capture: " + e.msg }

func permanent(format string, args ...any) error {
	return &permanentError{msg: fmt.Sprintf(format, args...)}
}

// change is one changelog row as the intake copied it (the payload column).
type change struct {
	DB        string          `json:"db"`
	Table     string          `json:"table"`
	SchemaID  int64           `json:"schema_id"`
	Op        string          `json:"op"`
	Before    json.RawMessage `json:"before"`
	After     json.RawMessage `json:"after"`
	ChangedAt string          `json:"changed_at"`
}

// codec is the envelope maker of one table: its metadata and schemas.
type codec struct {
	t *Table
	// keySchema and valueSchema are the schemas, marshalled once.
	keySchema, valueSchema json.RawMessage
}

func newCodec(logical string, t *Table) (*codec, error) {
	prefix := logical + "." + t.DB + "." + t.Name
	c := &codec{t: t}
	var cols []Field
	for _, col := range t.Columns {
		f, err := SchemaFor(col)
		if err != nil {
			return nil, permanent("table %s.%s: %v", bound(t.DB), bound(t.Name), err)
		}
		cols = append(cols, f)
	}
	var keys []Field
	for _, k := range t.Key {
		col, ok := t.column(k)
		if !ok {
			return nil, permanent("table %s.%s: key column %s not among the columns", bound(t.DB), bound(t.Name), bound(k))
		}
		f, _ := SchemaFor(col)
		f.Optional = false
		keys = append(keys, f)
	}
	keySchema := Field{Type: "struct", Name: prefix + ".Key", Fields: keys}
	row := func(field string) Field {
		return Field{Type: "struct", Optional: true, Name: prefix + ".Value", Fields: cols, Field: field}
	}
	str := func(name string, optional bool) Field { return Field{Type: "string", Optional: optional, Field: name} }
	i64 := func(name string, optional bool) Field { return Field{Type: "int64", Optional: optional, Field: name} }
	source := Field{Type: "struct", Name: "io.debezium.connector.mysql.Source", Field: "source", Fields: []Field{
		str("version", false), str("connector", false), str("name", false), i64("ts_ms", false),
		{Type: "string", Optional: true, Name: cdc.SemanticEnum, Version: 1,
			Parameters: map[string]string{"allowed": "true,last,false,incremental"}, Default: "false", Field: "snapshot"},
		str("db", false), str("sequence", true), i64("ts_us", true), i64("ts_ns", true), str("table", true), i64("server_id", false), str("gtid", true),
		str("file", false), i64("pos", false), {Type: "int32", Field: "row"}, i64("thread", true), str("query", true),
	}}
	txn := Field{Type: "struct", Optional: true, Name: "event.block", Version: 1, Field: "transaction", Fields: []Field{
		str("id", false), i64("total_order", false), i64("data_collection_order", false)}}
	valueSchema := Field{Type: "struct", Name: prefix + ".Envelope", Version: 1, Fields: []Field{
		row("before"), row("after"), source, str("op", false), i64("ts_ms", true), i64("ts_us", true),
		i64("ts_ns", true), txn}}
	var err error
	if c.keySchema, err = json.Marshal(keySchema); err != nil {
		return nil, permanent("table %s.%s: key schema does not encode", bound(t.DB), bound(t.Name))
	}
	if c.valueSchema, err = json.Marshal(valueSchema); err != nil {
		return nil, permanent("table %s.%s: value schema does not encode", bound(t.DB), bound(t.Name))
	}
	return c, nil
}

// orderedRow is a row image in column order (a Go map would sort it).
type orderedRow struct {
	names []string
	vals  []any
}

func (r *orderedRow) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range r.names {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(n)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(r.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

type sourcePayload struct {
	Version   string  `json:"version"`
	Connector string  `json:"connector"`
	Name      string  `json:"name"`
	TsMs      int64   `json:"ts_ms"`
	Snapshot  string  `json:"snapshot"`
	DB        string  `json:"db"`
	Sequence  *string `json:"sequence"`
	TsUs      int64   `json:"ts_us"`
	TsNs      int64   `json:"ts_ns"`
	Table     string  `json:"table"`
	ServerID  int64   `json:"server_id"`
	GTID      *string `json:"gtid"`
	File      string  `json:"file"`
	Pos       int64   `json:"pos"`
	Row       int     `json:"row"`
	Thread    *int64  `json:"thread"`
	Query     *string `json:"query"`
}

type valuePayload struct {
	Before      *orderedRow   `json:"before"`
	After       *orderedRow   `json:"after"`
	Source      sourcePayload `json:"source"`
	Op          string        `json:"op"`
	TsMs        int64         `json:"ts_ms"`
	TsUs        int64         `json:"ts_us"`
	TsNs        int64         `json:"ts_ns"`
	Transaction *struct{}     `json:"transaction"`
}

type envelope struct {
	Schema  json.RawMessage `json:"schema"`
	Payload any             `json:"payload"`
}

// image converts a trigger row image (JSON text, or a JSON object) into the
// Debezium row, checking it has exactly the installed columns.
func (c *codec) image(raw json.RawMessage, which string) (*orderedRow, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, permanent("%s image: not JSON text", which)
		}
		raw = json.RawMessage(s)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, permanent("%s image: not a JSON object", which)
	}
	drift := permanent("table %s.%s %s image: columns differ from schema %d", bound(c.t.DB), bound(c.t.Name),
		which, c.t.SchemaID)
	if len(m) != len(c.t.Columns) {
		return nil, drift
	}
	r := &orderedRow{}
	for _, col := range c.t.Columns {
		v, ok := m[col.Name]
		if !ok {
			return nil, drift
		}
		dv, err := debeziumValue(col, v)
		if err != nil {
			return nil, permanent("table %s.%s %s image: %v", bound(c.t.DB), bound(c.t.Name), which, err)
		}
		r.names = append(r.names, col.Name)
		r.vals = append(r.vals, dv)
	}
	return r, nil
}

// key is the key envelope (JSON) of a row.
func (c *codec) key(r *orderedRow) ([]byte, error) {
	k := &orderedRow{}
	for _, name := range c.t.Key {
		for i, n := range r.names {
			if n == name {
				k.names = append(k.names, n)
				k.vals = append(k.vals, r.vals[i])
			}
		}
	}
	return json.Marshal(envelope{Schema: c.keySchema, Payload: k})
}

// producer is the engine Handler: one changelog row → its Debezium records
// on the outbox, in the engine's transaction.
type producer struct {
	db      *sql.DB
	logical string
	topic   string // prefix; + ".<db>.<table>"
	target  string
	clock   relaytype.Clock

	mu     sync.Mutex
	codecs map[int64]*codec
}

// codec returns the envelope maker of schema id, read once from the
// schema history (a schema never changes).
func (p *producer) codec(ctx context.Context, id int64, db, table string) (*codec, error) {
	p.mu.Lock()
	c := p.codecs[id]
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	t, err := loadSchema(ctx, p.db, id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, permanent("schema %d of %s.%s is not in the schema history", id, bound(db), bound(table))
	case err != nil:
		return nil, fmt.Errorf("capture: load schema %d: %w", id, err)
	}
	if c, err = newCodec(p.logical, t); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.codecs[id] = c
	p.mu.Unlock()
	return c, nil
}

// Handle implements relay.Handler.
func (p *producer) Handle(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
	evs, err := p.events(ctx, d.Message.ID, d.Message.Payload)
	if err != nil {
		var pe *permanentError
		if errors.As(err, &pe) {
			return relay.Dead(relaytype.ClassMalformed, err)
		}
		return relay.Retry(relaytype.ClassInfra, err)
	}
	if _, err := relay.AppendEventsTx(ctx, tx, evs...); err != nil {
		return relay.Retry(relaytype.ClassInfra, err)
	}
	return relay.Succeeded()
}

// events converts changelog row id (its payload) into outbox events.
func (p *producer) events(ctx context.Context, id int64, payload []byte) ([]*relay.OutboxEvent, error) {
	var ch change
	if err := json.Unmarshal(payload, &ch); err != nil {
		return nil, permanent("changelog %d: payload is not JSON", id)
	}
	if !identRE.MatchString(ch.DB) || !identRE.MatchString(ch.Table) {
		return nil, permanent("changelog %d: bad db or table name", id)
	}
	changed, err := time.Parse("2006-01-02 15:04:05.999999", ch.ChangedAt)
	if err != nil {
		return nil, permanent("changelog %d: bad changed_at", id)
	}
	c, err := p.codec(ctx, ch.SchemaID, ch.DB, ch.Table)
	if err != nil {
		return nil, err
	}
	if c.t.DB != ch.DB || c.t.Name != ch.Table {
		return nil, permanent("changelog %d: schema %d is of another table", id, ch.SchemaID)
	}
	return p.convert(c, id, &ch, changed)
}

func (p *producer) convert(c *codec, id int64, ch *change, changed time.Time) ([]*relay.OutboxEvent, error) {
	var before, after *orderedRow
	var err error
	present := func(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }
	switch ch.Op {
	case "c":
		if present(ch.Before) || !present(ch.After) {
			return nil, permanent("changelog %d: create needs after and no before", id)
		}
	case "u":
		if !present(ch.Before) || !present(ch.After) {
			return nil, permanent("changelog %d: update needs before and after", id)
		}
	case "d":
		if !present(ch.Before) || present(ch.After) {
			return nil, permanent("changelog %d: delete needs before and no after", id)
		}
	default:
		return nil, permanent("changelog %d: op is not c, u or d", id)
	}
	if present(ch.Before) {
		if before, err = c.image(ch.Before, "before"); err != nil {
			return nil, err
		}
	}
	if present(ch.After) {
		if after, err = c.image(ch.After, "after"); err != nil {
			return nil, err
		}
	}
	topic := p.topic + "." + ch.DB + "." + ch.Table
	src := sourcePayload{Version: ConnectorVersion, Connector: "mysql", Name: p.logical, TsMs: changed.UnixMilli(),
		Snapshot: "false", DB: ch.DB, TsUs: changed.UnixMicro(), TsNs: changed.UnixMicro() * 1000, Table: ch.Table, File: SourceFile, Pos: id}
	now := p.clock.Now()
	n := 0
	event := func(op string, b, a *orderedRow, key []byte, headers map[string]string) (*relay.OutboxEvent, error) {
		v, err := json.Marshal(envelope{Schema: c.valueSchema, Payload: valuePayload{Before: b, After: a, Source: src,
			Op: op, TsMs: now.UnixMilli(), TsUs: now.UnixMicro(), TsNs: now.UnixNano()}})
		if err != nil {
			return nil, permanent("changelog %d: encode failed", id)
		}
		n++
		return &relay.OutboxEvent{ID: p.eventID(id, n), Target: p.target, Topic: topic, Key: string(key),
			Headers: headers, Payload: v}, nil
	}
	tombstone := func(key []byte) *relay.OutboxEvent {
		n++
		return &relay.OutboxEvent{ID: p.eventID(id, n), Target: p.target, Topic: topic, Key: string(key),
			Type: relaytype.EventTombstone}
	}
	var oldKey, newKey []byte
	if before != nil {
		if oldKey, err = c.key(before); err != nil {
			return nil, permanent("changelog %d: key encode failed", id)
		}
	}
	if after != nil {
		if newKey, err = c.key(after); err != nil {
			return nil, permanent("changelog %d: key encode failed", id)
		}
	}
	var out []*relay.OutboxEvent
	add := func(e *relay.OutboxEvent, err error) error {
		if err == nil {
			out = append(out, e)
		}
		return err
	}
	switch {
	case ch.Op == "c":
		err = add(event("c", nil, after, newKey, nil))
	case ch.Op == "u" && bytes.Equal(oldKey, newKey):
		err = add(event("u", before, after, newKey, nil))
	case ch.Op == "u":
		// Debezium's primary-key change: delete of the old key (header: the
		// new key), its tombstone, create of the new key (header: the old key).
		if err = add(event("d", before, nil, oldKey, map[string]string{cdc.HeaderNewKey: string(newKey)})); err == nil {
			out = append(out, tombstone(oldKey))
			err = add(event("c", nil, after, newKey, map[string]string{cdc.HeaderOldKey: string(oldKey)}))
		}
	default:
		if err = add(event("d", before, nil, oldKey, nil)); err == nil {
			out = append(out, tombstone(oldKey))
		}
	}
	return out, err
}

// eventID is the outbox event id: the changelog id and the record's place
// among those it produced, stable across retries.
func (p *producer) eventID(id int64, n int) string {
	return "capture:" + p.logical + ":" + strconv.FormatInt(id, 10) + ":" + strconv.Itoa(n)
}
