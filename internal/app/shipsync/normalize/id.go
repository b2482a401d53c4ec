package normalize

import (
	"encoding/binary"
	"encoding/hex"
	"math"

	"github.com/google/uuid"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// The fixed UUIDv5 namespaces of the ids this package derives. Each is
// itself UUIDv5(NameSpaceURL, "https://relayhq.dev/shipsync/normalize/<name>/v1")
// (TestNamespaces holds the derivation), written out so that another
// implementation can recompute every id from docs/shipsync/normalize.md
// alone. They never change: a new derivation gets a new name.
var (
	// EventIDNamespace derives event ids (name "event-id").
	EventIDNamespace = uuid.MustParse("e452ea99-0d63-54c7-b343-f7c433f4ac85")
	// TombstoneNamespace derives the tombstone revision of a DELETE (name
	// "tombstone-revision").
	TombstoneNamespace = uuid.MustParse("4a21dbd2-904b-57d3-ace2-32f89e313f09")
	// OverwriteNamespace derives the result revision of an event of a rule
	// that is not revisioned (name "overwrite-revision").
	OverwriteNamespace = uuid.MustParse("6916694d-cd6d-5197-9927-9626301d3c51")
)

// IDInput is what an event id is derived from (seed 004 §7.4): the origin
// node, the replay epoch, where the raw record was read (topic, partition,
// offset), and the record (database, table, source primary key, operation).
type IDInput struct {
	Origin      string
	ReplayEpoch uint32
	Topic       string
	Partition   int32
	Offset      int64
	Database    string
	Table       string
	// Key is the source primary key (names and typed values as the capture
	// decoded them, before any mapping), in key order.
	Key       []*pb.ColumnValue
	Operation pb.Operation
}

// EventID returns UUIDv5(EventIDNamespace, parts), where parts is the
// length-prefixed encoding of Origin, ReplayEpoch (4 bytes big-endian),
// Topic, Partition (4 bytes big-endian), Offset (8 bytes big-endian),
// Database, Table, CanonicalKey(Key) and the Operation's enum name. Each
// part is written as uvarint(len) followed by its bytes, so no two inputs
// share an encoding. The same record read at the same place in the same
// epoch always gets the same id; a controlled replay (new epoch) new ones.
func EventID(in IDInput) uuid.UUID {
	var e enc
	e.str(in.Origin)
	e.u32(in.ReplayEpoch)
	e.str(in.Topic)
	e.u32(uint32(in.Partition))
	e.u64(uint64(in.Offset))
	e.str(in.Database)
	e.str(in.Table)
	e.part(CanonicalKey(in.Key))
	e.str(in.Operation.String())
	return uuid.NewSHA1(EventIDNamespace, e.b)
}

// TombstoneRevision is the deterministic result revision of a DELETE:
// UUIDv5(TombstoneNamespace, parts(origin, baseRevision, CanonicalKey(key)))
// with the same length-prefixed parts as EventID. The same delete (same
// node, same deleted revision, same record) always gives the same
// tombstone, whoever computes it and however often.
func TombstoneRevision(origin, baseRevision string, key []*pb.ColumnValue) string {
	var e enc
	e.str(origin)
	e.str(baseRevision)
	e.part(CanonicalKey(key))
	return uuid.NewSHA1(TombstoneNamespace, e.b).String()
}

// OverwriteRevision is the result revision of an event of a rule that is
// not revisioned: UUIDv5(OverwriteNamespace, the event id's 16 bytes).
func OverwriteRevision(eventID uuid.UUID) string {
	return uuid.NewSHA1(OverwriteNamespace, eventID[:]).String()
}

// TraceID is the event's trace id: the event id's 16 bytes as 32 lower-case
// hex digits (the shape of a W3C trace-id), so a trace is found from the
// event and back without a table.
func TraceID(eventID uuid.UUID) string {
	return hex.EncodeToString(eventID[:])
}

// CanonicalKey encodes a primary key unambiguously: the number of columns,
// then per column its name and its value, each length-prefixed. A value is a
// one-byte type tag followed by its bytes: integers 8 bytes big-endian,
// doubles their IEEE-754 bits (−0 as +0, every NaN as one NaN), timestamps
// seconds (8) and nanoseconds (4), text types and DECIMAL their UTF-8 text,
// bytes as is, booleans one byte. Two keys encode alike exactly when they
// have the same column names, types and values in the same order.
func CanonicalKey(key []*pb.ColumnValue) []byte {
	var e enc
	e.u64(uint64(len(key)))
	var v []byte
	for _, c := range key {
		e.str(c.GetName())
		v = appendValue(v[:0], c)
		e.part(v)
	}
	return e.b
}

// appendValue appends c's type tag and value bytes.
func appendValue(b []byte, c *pb.ColumnValue) []byte {
	switch x := c.GetValue().(type) {
	case *pb.ColumnValue_Null:
		return append(b, 'n')
	case *pb.ColumnValue_IntValue:
		return binary.BigEndian.AppendUint64(append(b, 'i'), uint64(x.IntValue))
	case *pb.ColumnValue_UintValue:
		return binary.BigEndian.AppendUint64(append(b, 'u'), x.UintValue)
	case *pb.ColumnValue_DoubleValue:
		f := x.DoubleValue
		switch {
		case f == 0:
			f = 0
		case math.IsNaN(f):
			f = math.NaN()
		}
		return binary.BigEndian.AppendUint64(append(b, 'f'), math.Float64bits(f))
	case *pb.ColumnValue_DecimalValue:
		return append(append(b, 'd'), x.DecimalValue...)
	case *pb.ColumnValue_StringValue:
		return append(append(b, 's'), x.StringValue...)
	case *pb.ColumnValue_BytesValue:
		return append(append(b, 'b'), x.BytesValue...)
	case *pb.ColumnValue_BoolValue:
		if x.BoolValue {
			return append(b, 't', 1)
		}
		return append(b, 't', 0)
	case *pb.ColumnValue_TimestampValue:
		b = binary.BigEndian.AppendUint64(append(b, 'T'), uint64(x.TimestampValue.GetSeconds()))
		return binary.BigEndian.AppendUint32(b, uint32(x.TimestampValue.GetNanos()))
	case *pb.ColumnValue_DateValue:
		return append(append(b, 'D'), x.DateValue...)
	case *pb.ColumnValue_TimeValue:
		return append(append(b, 'H'), x.TimeValue...)
	case *pb.ColumnValue_JsonValue:
		return append(append(b, 'J'), x.JsonValue...)
	default:
		return append(b, '?')
	}
}

// enc builds length-prefixed parts.
type enc struct{ b []byte }

func (e *enc) part(p []byte) {
	e.b = binary.AppendUvarint(e.b, uint64(len(p)))
	e.b = append(e.b, p...)
}

func (e *enc) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *enc) u32(n uint32) { e.part(binary.BigEndian.AppendUint32(nil, n)) }

func (e *enc) u64(n uint64) { e.part(binary.BigEndian.AppendUint64(nil, n)) }
