package cdc

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// Op is what a decoded message is: one of Debezium's five op letters, or
// OpTombstone for a record whose value is null (the compaction marker
// Debezium writes after a delete), which has no op letter of its own.
type Op byte

const (
	// OpCreate ("c"): an inserted row; After set, Before nil.
	OpCreate Op = 'c'
	// OpUpdate ("u"): a changed row; After set, Before set when the
	// connector had the old row image.
	OpUpdate Op = 'u'
	// OpDelete ("d"): a deleted row; Before set, After nil.
	OpDelete Op = 'd'
	// OpRead ("r"): a row read by a snapshot; After set, Before nil.
	OpRead Op = 'r'
	// OpTruncate ("t"): a TRUNCATE of Source.Table; no Key, Before or After.
	OpTruncate Op = 't'
	// OpTombstone: a null value; only Key (and Headers) are set.
	OpTombstone Op = 'x'
)

// String returns the op letter, or "tombstone".
func (o Op) String() string {
	if o == OpTombstone {
		return "tombstone"
	}
	return string(rune(o))
}

// Snapshot is source.snapshot: whether a row came from a snapshot and
// where in it. Debezium writes it as text; an absent or null field is
// SnapshotFalse.
type Snapshot string

// Snapshot markers. SnapshotFalse: a streamed change. SnapshotTrue: a row
// of a running snapshot; SnapshotFirst and SnapshotLast its first and last
// row; the ..._in_data_collection pair the first and last row of one table
// within it. SnapshotIncremental: a row of a signal-driven incremental
// snapshot chunk.
const (
	SnapshotFalse                 Snapshot = "false"
	SnapshotTrue                  Snapshot = "true"
	SnapshotFirst                 Snapshot = "first"
	SnapshotFirstInDataCollection Snapshot = "first_in_data_collection"
	SnapshotLastInDataCollection  Snapshot = "last_in_data_collection"
	SnapshotLast                  Snapshot = "last"
	SnapshotIncremental           Snapshot = "incremental"
)

var snapshots = []Snapshot{SnapshotFalse, SnapshotTrue, SnapshotFirst, SnapshotFirstInDataCollection,
	SnapshotLastInDataCollection, SnapshotLast, SnapshotIncremental}

// Source is the value's source block: where and when the change happened
// in MySQL. Numbers absent from the message are zero; Timestamp is the
// time of the change in the database (from ts_ns, ts_us or ts_ms, the
// finest present), in UTC.
type Source struct {
	Version   string // connector version, "2.7.3.Final"
	Connector string // "mysql"
	Name      string // topic.prefix of the connector
	Timestamp time.Time
	Snapshot  Snapshot
	DB        string
	Table     string
	ServerID  int64
	GTID      string // "" when GTID mode is off
	File      string // binlog file
	Pos       int64  // binlog position of the event
	Row       int64  // row within the binlog event
	Thread    int64
	Query     string // only with binlog_rows_query_log_events
}

// Transaction is a data event's transaction block, present only when the
// connector runs with provide.transaction.metadata=true. TotalOrder is the
// event's position among all events of the transaction, from 1;
// DataCollectionOrder its position among the transaction's events of the
// same table.
type Transaction struct {
	ID                  string
	TotalOrder          uint64
	DataCollectionOrder uint64
}

// Header is one Kafka record header, as the caller read it.
type Header struct {
	Key   string
	Value []byte
}

// Debezium's headers on the two halves of a primary-key change.
const (
	// HeaderNewKey is on the DELETE of the old key: the new key.
	HeaderNewKey = "__debezium.newkey"
	// HeaderOldKey is on the CREATE of the new key: the old key.
	HeaderOldKey = "__debezium.oldkey"
)

// Message is one Kafka record as consumed: Topic ("<prefix>.<db>.<table>"),
// Key and Value (JSON; a nil or "null" Value is a tombstone) and Headers.
type Message struct {
	Topic   string
	Key     []byte
	Value   []byte
	Headers []Header
}

// Event is one decoded message, not yet normalised into a
// shipsyncpb.ChangeEvent. Key is the primary key in key order (the key
// schema's field order, or the JSON member order without a schema). Before
// and After are nil when the message has no such image; their columns are
// in schema (or JSON member) order. Source, Transaction, ProcessedAt and
// Format are zero for a tombstone. Headers are the message's, passed
// through: a DELETE with HeaderNewKey followed by a CREATE with
// HeaderOldKey is a primary-key change, and each decodes as what it is.
type Event struct {
	Op          Op
	Key         []*pb.ColumnValue
	Before      *pb.RowImage
	After       *pb.RowImage
	Source      Source
	Transaction *Transaction
	// ProcessedAt is when the connector processed the event (payload
	// ts_ns, ts_us or ts_ms), not when the database changed it.
	ProcessedAt time.Time
	// Format names the registered decoder that read the value
	// ("debezium-mysql/2").
	Format  string
	Headers []Header
}

// Header returns the value of the first header named k and whether there
// is one.
func (e *Event) Header(k string) ([]byte, bool) {
	for _, h := range e.Headers {
		if h.Key == k {
			return h.Value, true
		}
	}
	return nil, false
}

// formatFunc decodes a value payload whose connector major it is
// registered for. s is the value schema, nil without one.
type formatFunc func(d *Decoder, m Message, s *schema, payload *object) (*Event, error)

// formats is the registry of value decoders by Debezium connector major
// (source.version's leading number). The MySQL envelope has kept the same
// shape from 1.x to 3.x, so all three share one decoder; a major whose
// envelope changes gets its own entry here.
var formats = map[int]formatFunc{
	1: decodeMySQL,
	2: decodeMySQL,
	3: decodeMySQL,
}

// SupportedMajorsDefault are the connector majors a Decoder accepts when
// Config.Majors is empty: every registered one.
var SupportedMajorsDefault = []int{1, 2, 3}

// Config configures a Decoder. The zero Config accepts every registered
// major and decodes only messages that carry a schema.
type Config struct {
	// Majors are the Debezium connector majors to accept (default
	// SupportedMajorsDefault). Each must be registered.
	Majors []int
	// Types types the columns of schema-less messages; nil means a
	// schema-less row event fails with MissingType.
	Types TypeMap
}

// Decoder decodes Debezium MySQL-connector messages. It holds no state
// between calls and is safe for concurrent use.
type Decoder struct {
	majors []int
	types  TypeMap
}

// New returns a Decoder for cfg, or an error naming the bad field.
func New(cfg Config) (*Decoder, error) {
	d := &Decoder{majors: slices.Clone(cfg.Majors), types: cfg.Types}
	if len(d.majors) == 0 {
		d.majors = slices.Clone(SupportedMajorsDefault)
	}
	for _, m := range d.majors {
		if formats[m] == nil {
			return nil, fmt.Errorf("cdc: config Majors: no decoder registered for major %d", m)
		}
	}
	return d, nil
}

// Decode decodes one message. Every error is a *DecodeError; Decode never
// panics on any input.
func (d *Decoder) Decode(m Message) (*Event, error) {
	vs, payload, err := envelope(m.Value, "value")
	if err != nil {
		return nil, err
	}
	if payload == nil {
		return d.tombstone(m)
	}
	src, _ := payload.vals["source"].(*object)
	if src == nil {
		return nil, fail(Malformed, "value.payload.source", "missing or not an object")
	}
	version, ok := src.vals["version"].(string)
	if !ok {
		return nil, fail(Malformed, "value.payload.source.version", "missing or not a string")
	}
	major, err := strconv.Atoi(strings.SplitN(version, ".", 2)[0])
	if err != nil {
		return nil, fail(Malformed, "value.payload.source.version", "not a version")
	}
	if !slices.Contains(d.majors, major) {
		return nil, fail(UnsupportedVersion, "value.payload.source.version", "connector major not supported")
	}
	ev, err := formats[major](d, m, vs, payload)
	if err != nil {
		return nil, err
	}
	ev.Format = "debezium-mysql/" + strconv.Itoa(major)
	ev.Headers = m.Headers
	return ev, nil
}

// envelope parses a key or value and splits off its schema: an object with
// exactly the members "schema" and "payload" is JsonConverter's
// schemas.enable=true form; anything else is the payload itself. A nil,
// empty or JSON null input, or a null payload, returns a nil payload.
func envelope(data []byte, part string) (*schema, *object, error) {
	if len(data) == 0 {
		return nil, nil, nil
	}
	v, err := parseJSON(data)
	if err != nil {
		return nil, nil, fail(Malformed, part, "not valid JSON")
	}
	if v == nil {
		return nil, nil, nil
	}
	o, ok := v.(*object)
	if !ok {
		return nil, nil, fail(Malformed, part, "not a JSON object")
	}
	sv, hasSchema := o.vals["schema"]
	pv, hasPayload := o.vals["payload"]
	if len(o.keys) != 2 || !hasSchema || !hasPayload {
		return nil, o, nil
	}
	var s *schema
	if sv != nil {
		if s, err = parseSchema(sv, part+".schema"); err != nil {
			return nil, nil, err
		}
		if s.typ != "struct" {
			return nil, nil, fail(Malformed, part+".schema.type", "not a struct")
		}
	}
	if pv == nil {
		return s, nil, nil
	}
	p, ok := pv.(*object)
	if !ok {
		return nil, nil, fail(Malformed, part+".payload", "not a JSON object")
	}
	return s, p, nil
}

// tombstone decodes a null-value record: only its key.
func (d *Decoder) tombstone(m Message) (*Event, error) {
	db, table := topicTable(m.Topic)
	key, err := d.key(m.Key, db, table)
	if err != nil {
		return nil, err
	}
	return &Event{Op: OpTombstone, Key: key, Headers: m.Headers}, nil
}

// topicTable takes the database and table from a topic named
// "<prefix>.<db>.<table>" (the last two dot-separated parts); a tombstone
// has no source block to take them from.
func topicTable(topic string) (db, table string) {
	parts := strings.Split(topic, ".")
	if len(parts) < 2 {
		return "", ""
	}
	return parts[len(parts)-2], parts[len(parts)-1]
}

// key decodes a record key into its columns, in key order.
func (d *Decoder) key(data []byte, db, table string) ([]*pb.ColumnValue, error) {
	ks, payload, err := envelope(data, "key")
	if err != nil {
		return nil, err
	}
	if payload == nil || len(payload.keys) == 0 {
		return nil, fail(MissingKey, "key", "no key")
	}
	path := "key"
	if ks != nil {
		path = "key.payload"
	}
	return d.row(ks, payload, db, table, path, true)
}

// row maps a row object to columns. With a struct schema the columns come
// in the schema's field order and the row must have exactly those members;
// without one, in the row's member order, each typed by the TypeMap. In a
// key (isKey) a NULL column is MissingKey, whatever its declared type.
func (d *Decoder) row(s *schema, row *object, db, table, path string, isKey bool) ([]*pb.ColumnValue, error) {
	cols := make([]*pb.ColumnValue, 0, len(row.keys))
	if s != nil {
		if len(row.keys) != len(s.fields) {
			return nil, fail(Malformed, path, "row does not match its schema")
		}
		for _, f := range s.fields {
			v, ok := row.get(f.name)
			if !ok {
				return nil, fail(Malformed, join(path, f.name), "column missing from row")
			}
			if v == nil && isKey {
				return nil, fail(MissingKey, join(path, f.name), "null key column")
			}
			c, err := columnValue(f.name, f.s.column(), v, join(path, f.name))
			if err != nil {
				return nil, err
			}
			cols = append(cols, c)
		}
		return cols, nil
	}
	types := d.types[db+"."+table]
	for _, name := range row.keys {
		ct, ok := types[name]
		if !ok {
			return nil, fail(MissingType, join(path, name), "no schema and no type for column")
		}
		v := row.vals[name]
		if v == nil && isKey {
			return nil, fail(MissingKey, join(path, name), "null key column")
		}
		c, err := columnValue(name, ct, v, join(path, name))
		if err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, nil
}
