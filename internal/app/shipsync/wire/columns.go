package wire

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// ColumnarVersion is the first protocol version whose upload batches carry
// the event list column by column (EventColumns in
// UploadBatch.event_columns). Encode writes that form when a batch's
// ProtocolVersion has major 1 and a minor at least this one; a sender uses
// it only once the shore has said it accepts it (upload_minor).
var ColumnarVersion = Version{Major: 1, Minor: 1}

// UploadMinor is the highest minor of major 1 this code decodes in
// uploads; the shore advertises it as upload_minor.
const UploadMinor = 1

// usesColumns says whether an upload of version v carries EventColumns.
func usesColumns(v Version) bool {
	return v.Major == ColumnarVersion.Major && v.Minor >= ColumnarVersion.Minor
}

// EventColumns forms and codes (see shipsync.proto).
const (
	formColumns = 0
	formRow     = 1

	idEmpty   = 0
	idUUID    = 1
	idText    = 2
	idDerived = 3

	presPosition = 1
	presTxOrder  = 2
	presBusiness = 4
	presCaptured = 8
	presAll      = presPosition | presTxOrder | presBusiness | presCaptured

	// Value kinds are the ColumnValue oneof members' field numbers; 0 is a
	// column whose oneof is unset.
	kindUnset     = 0
	kindNull      = 2
	kindInt       = 3
	kindUint      = 4
	kindDouble    = 5
	kindDecimal   = 6
	kindString    = 7
	kindBytes     = 8
	kindBool      = 9
	kindTimestamp = 10
	kindDate      = 11
	kindTime      = 12
	kindJSON      = 13
)

// Images of an event, in the order their values are written.
const (
	imageKey = iota
	imageBefore
	imageAfter
)

// listSize is what ev adds to a serialized EventList: its tag, length and
// bytes. The sum over a batch is the EventList's size, so that the 4 MiB
// limit means the same in both forms.
func listSize(ev *pb.ChangeEvent) int {
	return 1 + protowire.SizeBytes(proto.Size(ev))
}

// encodeColumns returns the events as a serialized EventColumns and the
// size of the same events as an EventList.
func encodeColumns(evs []*pb.ChangeEvent) (body []byte, rows int, err error) {
	e := columnEncoder{strs: map[string]uint32{}, shapes: map[string]uint32{}, streams: map[[2]uint32]int{}}
	for _, ev := range evs {
		rows += listSize(ev)
		if !columnable(ev) {
			row, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
			if err != nil {
				return nil, 0, fmt.Errorf("%w: %w", ErrMalformedBatch, err)
			}
			e.c.Form = append(e.c.Form, formRow)
			e.c.RowEvents = append(e.c.RowEvents, row)
			continue
		}
		e.c.Form = append(e.c.Form, formColumns)
		if err := e.event(ev); err != nil {
			return nil, 0, err
		}
	}
	for i := range e.ids {
		e.ids[i].finish()
	}
	e.c.EventId, e.c.BaseRevision, e.c.ResultRevision, e.c.TraceId = e.ids[0].col, e.ids[1].col, e.ids[2].col, e.ids[3].col
	e.c.Values = e.values
	body, err = proto.MarshalOptions{Deterministic: true}.Marshal(&e.c)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrMalformedBatch, err)
	}
	return body, rows, nil
}

// columnable says whether the columns carry ev exactly: no unknown fields
// anywhere in it, and no timestamp member set to a nil message.
func columnable(ev *pb.ChangeEvent) bool {
	if len(ev.ProtoReflect().GetUnknown()) > 0 || !plainTime(ev.BusinessOccurredAt) || !plainTime(ev.CapturedAt) {
		return false
	}
	for _, img := range []*pb.RowImage{ev.Before, ev.After} {
		if img != nil && (len(img.ProtoReflect().GetUnknown()) > 0 || !plainColumns(img.Columns)) {
			return false
		}
	}
	return plainColumns(ev.PrimaryKey)
}

func plainTime(ts *timestamppb.Timestamp) bool {
	return ts == nil || len(ts.ProtoReflect().GetUnknown()) == 0
}

func plainColumns(cols []*pb.ColumnValue) bool {
	for _, cv := range cols {
		if cv == nil || len(cv.ProtoReflect().GetUnknown()) > 0 {
			return false
		}
		if v, ok := cv.Value.(*pb.ColumnValue_TimestampValue); ok && (v.TimestampValue == nil || !plainTime(v.TimestampValue)) {
			return false
		}
	}
	return true
}

type columnEncoder struct {
	c       pb.EventColumns
	strs    map[string]uint32
	shapes  map[string]uint32
	nshapes uint32
	streams map[[2]uint32]int // (image, name) → index in values
	values  [][]byte
	prev    []uint64 // per stream: the last integer written
	ids     [4]idEncoder

	pos, seq, order  uint64
	bizSecs, capSecs int64
	shapeKey         []byte
	shapeFl          []uint32
}

func (e *columnEncoder) str(s string) (uint32, error) {
	if i, ok := e.strs[s]; ok {
		return i, nil
	}
	if !utf8.ValidString(s) {
		return 0, fmt.Errorf("%w: text is not UTF-8", ErrMalformedBatch)
	}
	i := uint32(len(e.c.Strings))
	e.strs[s] = i
	e.c.Strings = append(e.c.Strings, s)
	return i, nil
}

func (e *columnEncoder) event(ev *pb.ChangeEvent) error {
	c := &e.c
	for _, f := range []struct {
		col *[]uint32
		s   string
	}{
		{&c.SchemaVersion, ev.SchemaVersion}, {&c.OriginNodeId, ev.OriginNodeId},
		{&c.SourceConnectorId, ev.SourceConnectorId}, {&c.SourcePartition, ev.SourcePartition},
		{&c.TransactionId, ev.TransactionId}, {&c.RuleId, ev.RuleId}, {&c.Database, ev.Database},
		{&c.Schema, ev.Schema}, {&c.Table, ev.Table},
	} {
		i, err := e.str(f.s)
		if err != nil {
			return err
		}
		*f.col = append(*f.col, i)
	}
	c.RuleVersion = append(c.RuleVersion, ev.RuleVersion)
	c.Operation = append(c.Operation, int32(ev.Operation))
	var present uint32
	if ev.SourcePosition != nil {
		present |= presPosition
		c.SourcePosition = append(c.SourcePosition, delta(&e.pos, *ev.SourcePosition))
	}
	c.SourceSequence = append(c.SourceSequence, delta(&e.seq, ev.SourceSequence))
	if ev.TransactionOrder != nil {
		present |= presTxOrder
		c.TransactionOrder = append(c.TransactionOrder, delta(&e.order, *ev.TransactionOrder))
	}
	if ts := ev.BusinessOccurredAt; ts != nil {
		present |= presBusiness
		c.BusinessOccurredSeconds = append(c.BusinessOccurredSeconds, ts.Seconds-e.bizSecs)
		c.BusinessOccurredNanos = append(c.BusinessOccurredNanos, ts.Nanos)
		e.bizSecs = ts.Seconds
	}
	if ts := ev.CapturedAt; ts != nil {
		present |= presCaptured
		c.CapturedSeconds = append(c.CapturedSeconds, ts.Seconds-e.capSecs)
		c.CapturedNanos = append(c.CapturedNanos, ts.Nanos)
		e.capSecs = ts.Seconds
	}
	c.Present = append(c.Present, present)

	id, idOK := ParseUUID(ev.EventId)
	for i, s := range []string{ev.EventId, ev.BaseRevision, ev.ResultRevision, ev.TraceId} {
		derived := i == 3 && idOK && len(s) == 2*len(id) && s == hex.EncodeToString(id[:])
		if err := e.ids[i].add(e, s, derived); err != nil {
			return err
		}
	}

	k, err := e.image(imageKey, ev.PrimaryKey)
	if err != nil {
		return err
	}
	c.PrimaryKey = append(c.PrimaryKey, k)
	for _, im := range []struct {
		col  *[]uint32
		img  *pb.RowImage
		part uint32
	}{{&c.Before, ev.Before, imageBefore}, {&c.After, ev.After, imageAfter}} {
		if im.img == nil {
			*im.col = append(*im.col, 0)
			continue
		}
		s, err := e.image(im.part, im.img.Columns)
		if err != nil {
			return err
		}
		*im.col = append(*im.col, s+1)
	}
	return nil
}

// delta returns the wrapping difference of v from *prev as a signed number
// (exact for every uint64) and makes v the previous value.
func delta(prev *uint64, v uint64) int64 {
	d := int64(v - *prev)
	*prev = v
	return d
}

// image writes the values of cols into their streams and returns the index
// of their shape.
func (e *columnEncoder) image(part uint32, cols []*pb.ColumnValue) (uint32, error) {
	e.shapeKey = binary.AppendUvarint(e.shapeKey[:0], uint64(len(cols)))
	e.shapeFl = append(e.shapeFl[:0], uint32(len(cols)))
	for _, cv := range cols {
		name, err := e.str(cv.Name)
		if err != nil {
			return 0, err
		}
		kind := kindOf(cv)
		e.shapeKey = binary.AppendUvarint(binary.AppendUvarint(e.shapeKey, uint64(name)), uint64(kind))
		e.shapeFl = append(e.shapeFl, name, kind)
		si, ok := e.streams[[2]uint32{part, name}]
		if !ok {
			si = len(e.values)
			e.streams[[2]uint32{part, name}] = si
			e.values = append(e.values, nil)
			e.prev = append(e.prev, 0)
		}
		if e.values[si], err = appendValue(e.values[si], &e.prev[si], cv); err != nil {
			return 0, err
		}
	}
	if i, ok := e.shapes[string(e.shapeKey)]; ok {
		return i, nil
	}
	i := e.nshapes
	e.nshapes++
	e.shapes[string(e.shapeKey)] = i
	e.c.Shapes = append(e.c.Shapes, e.shapeFl...)
	return i, nil
}

func kindOf(cv *pb.ColumnValue) uint32 {
	switch cv.Value.(type) {
	case *pb.ColumnValue_Null:
		return kindNull
	case *pb.ColumnValue_IntValue:
		return kindInt
	case *pb.ColumnValue_UintValue:
		return kindUint
	case *pb.ColumnValue_DoubleValue:
		return kindDouble
	case *pb.ColumnValue_DecimalValue:
		return kindDecimal
	case *pb.ColumnValue_StringValue:
		return kindString
	case *pb.ColumnValue_BytesValue:
		return kindBytes
	case *pb.ColumnValue_BoolValue:
		return kindBool
	case *pb.ColumnValue_TimestampValue:
		return kindTimestamp
	case *pb.ColumnValue_DateValue:
		return kindDate
	case *pb.ColumnValue_TimeValue:
		return kindTime
	case *pb.ColumnValue_JsonValue:
		return kindJSON
	default:
		return kindUnset
	}
}

// appendValue writes one value to its stream: integers (and a timestamp's
// seconds) as the zigzag varint of their wrapping difference from the
// stream's previous integer, doubles as their 8 IEEE-754 bytes, text and
// bytes length-prefixed, booleans (and null's flag, and an unset value) as
// one byte. Every value takes at least one byte.
func appendValue(b []byte, prev *uint64, cv *pb.ColumnValue) ([]byte, error) {
	text := func(s string) ([]byte, error) {
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("%w: text value is not UTF-8", ErrMalformedBatch)
		}
		return append(binary.AppendUvarint(b, uint64(len(s))), s...), nil
	}
	switch v := cv.Value.(type) {
	case *pb.ColumnValue_Null:
		return append(b, boolByte(v.Null)), nil
	case *pb.ColumnValue_IntValue:
		return binary.AppendVarint(b, delta(prev, uint64(v.IntValue))), nil
	case *pb.ColumnValue_UintValue:
		return binary.AppendVarint(b, delta(prev, v.UintValue)), nil
	case *pb.ColumnValue_DoubleValue:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.DoubleValue)), nil
	case *pb.ColumnValue_DecimalValue:
		return text(v.DecimalValue)
	case *pb.ColumnValue_StringValue:
		return text(v.StringValue)
	case *pb.ColumnValue_BytesValue:
		return append(binary.AppendUvarint(b, uint64(len(v.BytesValue))), v.BytesValue...), nil
	case *pb.ColumnValue_BoolValue:
		return append(b, boolByte(v.BoolValue)), nil
	case *pb.ColumnValue_TimestampValue:
		b = binary.AppendVarint(b, delta(prev, uint64(v.TimestampValue.Seconds)))
		return binary.AppendVarint(b, int64(v.TimestampValue.Nanos)), nil
	case *pb.ColumnValue_DateValue:
		return text(v.DateValue)
	case *pb.ColumnValue_TimeValue:
		return text(v.TimeValue)
	case *pb.ColumnValue_JsonValue:
		return text(v.JsonValue)
	default:
		return append(b, 0), nil
	}
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// idEncoder builds one IdColumn.
type idEncoder struct {
	col   *pb.IdColumn
	uuids [][16]byte
}

func (d *idEncoder) add(e *columnEncoder, s string, derived bool) error {
	if d.col == nil {
		d.col = &pb.IdColumn{}
	}
	switch u, ok := ParseUUID(s); {
	case s == "":
		d.col.Form = append(d.col.Form, idEmpty)
	case derived:
		d.col.Form = append(d.col.Form, idDerived)
	case ok:
		d.col.Form = append(d.col.Form, idUUID)
		d.uuids = append(d.uuids, u)
	default:
		i, err := e.str(s)
		if err != nil {
			return err
		}
		d.col.Form = append(d.col.Form, idText)
		d.col.Text = append(d.col.Text, i)
	}
	return nil
}

// finish transposes the UUIDs: byte j of UUID i goes to j·n + i, so that
// bytes every id shares (a time-based UUID's node and clock sequence) form
// runs.
func (d *idEncoder) finish() {
	if d.col == nil {
		return
	}
	n := len(d.uuids)
	d.col.Uuids = make([]byte, 16*n)
	for i, u := range d.uuids {
		for j, c := range u {
			d.col.Uuids[j*n+i] = c
		}
	}
}

// ParseUUID parses the canonical lower-case 8-4-4-4-12 text, the only
// form whose 16 bytes print back to the same text (FormatUUID): any other
// spelling is not one, so two spellings never share the bytes.
func ParseUUID(s string) (u [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := lowerHex(s[i])
		lo, ok2 := lowerHex(s[i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	return u, true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// FormatUUID writes u as canonical lower-case 8-4-4-4-12 text.
func FormatUUID(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// columnDecoder rebuilds events from an EventColumns.
type columnDecoder struct {
	c       *pb.EventColumns
	shapes  [][]uint32 // per shape: name, kind, name, kind, …
	streams map[[2]uint32]int
	used    int
	prev    []uint64
	ids     [4]idDecoder

	// Running values of the delta-coded columns, and how many entries of
	// each optional column were read.
	pos, seq, order           uint64
	biz, capt                 int64
	posN, orderN, bizN, captN int
}

// errColumns is a structural problem of an EventColumns; what names the
// column (a fixed phrase, never input).
func errColumns(what string) error {
	return fmt.Errorf("%w: event_columns: %s", ErrMalformedBatch, what)
}

// decodeColumns rebuilds the n events of a serialized EventColumns,
// refusing (ErrBatchTooLarge) once they would make an EventList of more
// than maxRows bytes. Every structural problem is ErrMalformedBatch, a
// count other than n ErrChecksumMismatch (as for an EventList).
func decodeColumns(body []byte, n, maxRows int) ([]*pb.ChangeEvent, error) {
	var c pb.EventColumns
	if err := proto.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("%w: event_columns is not an EventColumns", ErrMalformedBatch)
	}
	if len(c.Form) != n {
		return nil, fmt.Errorf("%w: %d events, declared %d", ErrChecksumMismatch, len(c.Form), n)
	}
	d := columnDecoder{c: &c, streams: map[[2]uint32]int{}}
	m, err := d.check()
	if err != nil {
		return nil, err
	}
	evs := make([]*pb.ChangeEvent, 0, n)
	k, r, rows := 0, 0, 0
	for _, f := range c.Form {
		var ev *pb.ChangeEvent
		if f == formRow {
			ev = &pb.ChangeEvent{}
			if err := proto.Unmarshal(c.RowEvents[r], ev); err != nil {
				return nil, errColumns("row_events entry is not a ChangeEvent")
			}
			r++
		} else {
			if ev, err = d.event(k); err != nil {
				return nil, err
			}
			k++
		}
		if rows += listSize(ev); rows > maxRows {
			return nil, fmt.Errorf("%w: events of more than %d bytes", ErrBatchTooLarge, maxRows)
		}
		evs = append(evs, ev)
	}
	if k != m || d.used != len(c.Values) {
		return nil, errColumns("values streams unused")
	}
	for _, v := range c.Values {
		if len(v) != 0 {
			return nil, errColumns("values left over")
		}
	}
	return evs, nil
}

// check verifies every column's length and every index before any event
// is built, and returns m, the count of events of form 0.
func (d *columnDecoder) check() (int, error) {
	c := d.c
	m := 0
	for _, f := range c.Form {
		switch f {
		case formColumns:
			m++
		case formRow:
		default:
			return 0, errColumns("unknown form")
		}
	}
	if len(c.Form)-m != len(c.RowEvents) {
		return 0, errColumns("row_events count")
	}
	ns := uint32(len(c.Strings))
	for _, col := range [][]uint32{c.SchemaVersion, c.OriginNodeId, c.SourceConnectorId, c.SourcePartition,
		c.TransactionId, c.RuleId, c.Database, c.Schema, c.Table} {
		if len(col) != m {
			return 0, errColumns("string column count")
		}
		for _, i := range col {
			if i >= ns {
				return 0, errColumns("string index")
			}
		}
	}
	if len(c.RuleVersion) != m || len(c.Operation) != m || len(c.Present) != m || len(c.SourceSequence) != m ||
		len(c.PrimaryKey) != m || len(c.Before) != m || len(c.After) != m {
		return 0, errColumns("column count")
	}
	var counts [4]int
	for _, p := range c.Present {
		if p&^presAll != 0 {
			return 0, errColumns("present bits")
		}
		for b := range counts {
			if p&(1<<b) != 0 {
				counts[b]++
			}
		}
	}
	if len(c.SourcePosition) != counts[0] || len(c.TransactionOrder) != counts[1] ||
		len(c.BusinessOccurredSeconds) != counts[2] || len(c.BusinessOccurredNanos) != counts[2] ||
		len(c.CapturedSeconds) != counts[3] || len(c.CapturedNanos) != counts[3] {
		return 0, errColumns("optional column count")
	}
	for i, col := range []*pb.IdColumn{c.EventId, c.BaseRevision, c.ResultRevision, c.TraceId} {
		if err := d.ids[i].init(col, m, ns, i == 3); err != nil {
			return 0, err
		}
	}
	// A derived trace id needs the event id's bytes.
	for k, f := range d.ids[3].form {
		if f == idDerived && d.ids[0].form[k] != idUUID {
			return 0, errColumns("trace_id derived from a text event_id")
		}
	}
	for s := c.Shapes; len(s) > 0; {
		cols := uint64(s[0])
		if cols > uint64(len(s)-1)/2 {
			return 0, errColumns("shapes truncated")
		}
		shape := s[1 : 1+2*cols]
		for j := 0; j < len(shape); j += 2 {
			if shape[j] >= ns {
				return 0, errColumns("column name index")
			}
			if k := shape[j+1]; k == 1 || k > kindJSON {
				return 0, errColumns("value kind")
			}
		}
		d.shapes = append(d.shapes, shape)
		s = s[1+2*cols:]
	}
	nsh := uint32(len(d.shapes))
	for k := range m {
		if c.PrimaryKey[k] >= nsh || c.Before[k] > nsh || c.After[k] > nsh {
			return 0, errColumns("shape index")
		}
	}
	return m, nil
}

// event builds the k-th event of form 0.
func (d *columnDecoder) event(k int) (*pb.ChangeEvent, error) {
	c, s := d.c, d.c.Strings
	ev := &pb.ChangeEvent{
		SchemaVersion: s[c.SchemaVersion[k]], OriginNodeId: s[c.OriginNodeId[k]],
		SourceConnectorId: s[c.SourceConnectorId[k]], SourcePartition: s[c.SourcePartition[k]],
		TransactionId: s[c.TransactionId[k]], RuleId: s[c.RuleId[k]], RuleVersion: c.RuleVersion[k],
		Database: s[c.Database[k]], Schema: s[c.Schema[k]], Table: s[c.Table[k]],
		Operation: pb.Operation(c.Operation[k]),
	}
	d.seq += uint64(c.SourceSequence[k])
	ev.SourceSequence = d.seq
	p := c.Present[k]
	if p&presPosition != 0 {
		d.pos += uint64(c.SourcePosition[d.posN])
		d.posN++
		ev.SourcePosition = proto.Uint64(d.pos)
	}
	if p&presTxOrder != 0 {
		d.order += uint64(c.TransactionOrder[d.orderN])
		d.orderN++
		ev.TransactionOrder = proto.Uint64(d.order)
	}
	if p&presBusiness != 0 {
		d.biz += c.BusinessOccurredSeconds[d.bizN]
		ev.BusinessOccurredAt = &timestamppb.Timestamp{Seconds: d.biz, Nanos: c.BusinessOccurredNanos[d.bizN]}
		d.bizN++
	}
	if p&presCaptured != 0 {
		d.capt += c.CapturedSeconds[d.captN]
		ev.CapturedAt = &timestamppb.Timestamp{Seconds: d.capt, Nanos: c.CapturedNanos[d.captN]}
		d.captN++
	}
	var eventID [16]byte
	ev.EventId, eventID = d.ids[0].next(s, [16]byte{})
	ev.BaseRevision, _ = d.ids[1].next(s, eventID)
	ev.ResultRevision, _ = d.ids[2].next(s, eventID)
	ev.TraceId, _ = d.ids[3].next(s, eventID)

	var err error
	if ev.PrimaryKey, err = d.image(imageKey, c.PrimaryKey[k]); err != nil {
		return nil, err
	}
	for _, im := range []struct {
		dst  **pb.RowImage
		ref  uint32
		part uint32
	}{{&ev.Before, c.Before[k], imageBefore}, {&ev.After, c.After[k], imageAfter}} {
		if im.ref == 0 {
			continue
		}
		cols, err := d.image(im.part, im.ref-1)
		if err != nil {
			return nil, err
		}
		*im.dst = &pb.RowImage{Columns: cols}
	}
	return ev, nil
}

// image reads the values of one image of shape sh from their streams.
func (d *columnDecoder) image(part, sh uint32) ([]*pb.ColumnValue, error) {
	shape := d.shapes[sh]
	if len(shape) == 0 {
		return nil, nil
	}
	cols := make([]*pb.ColumnValue, len(shape)/2)
	for j := range cols {
		name, kind := shape[2*j], shape[2*j+1]
		si, ok := d.streams[[2]uint32{part, name}]
		if !ok {
			if d.used == len(d.c.Values) {
				return nil, errColumns("values streams missing")
			}
			si = d.used
			d.used++
			d.streams[[2]uint32{part, name}] = si
			d.prev = append(d.prev, 0)
		}
		cv, err := readValue(&d.c.Values[si], &d.prev[si], kind)
		if err != nil {
			return nil, err
		}
		cv.Name = d.c.Strings[name]
		cols[j] = cv
	}
	return cols, nil
}

// readValue reads one value of kind from the front of *b (see appendValue).
func readValue(b *[]byte, prev *uint64, kind uint32) (*pb.ColumnValue, error) {
	short := errColumns("values stream too short")
	flag := func() (bool, error) {
		if len(*b) == 0 || (*b)[0] > 1 {
			return false, errColumns("values flag")
		}
		v := (*b)[0] == 1
		*b = (*b)[1:]
		return v, nil
	}
	integer := func() (uint64, error) {
		d, n := binary.Varint(*b)
		if n <= 0 {
			return 0, short
		}
		*b = (*b)[n:]
		*prev += uint64(d)
		return *prev, nil
	}
	raw := func() ([]byte, error) {
		l, n := binary.Uvarint(*b)
		if n <= 0 || l > uint64(len(*b)-n) {
			return nil, short
		}
		v := (*b)[n : n+int(l)]
		*b = (*b)[n+int(l):]
		return v, nil
	}
	text := func() (string, error) {
		v, err := raw()
		if err == nil && !utf8.Valid(v) {
			err = errColumns("text value is not UTF-8")
		}
		return string(v), err
	}
	cv := &pb.ColumnValue{}
	switch kind {
	case kindUnset:
		if v, err := flag(); err != nil || v {
			return nil, errColumns("values flag")
		}
	case kindNull, kindBool:
		v, err := flag()
		if err != nil {
			return nil, err
		}
		if kind == kindNull {
			cv.Value = &pb.ColumnValue_Null{Null: v}
		} else {
			cv.Value = &pb.ColumnValue_BoolValue{BoolValue: v}
		}
	case kindInt, kindUint:
		v, err := integer()
		if err != nil {
			return nil, err
		}
		if kind == kindInt {
			cv.Value = &pb.ColumnValue_IntValue{IntValue: int64(v)}
		} else {
			cv.Value = &pb.ColumnValue_UintValue{UintValue: v}
		}
	case kindDouble:
		if len(*b) < 8 {
			return nil, short
		}
		cv.Value = &pb.ColumnValue_DoubleValue{DoubleValue: math.Float64frombits(binary.LittleEndian.Uint64(*b))}
		*b = (*b)[8:]
	case kindBytes:
		v, err := raw()
		if err != nil {
			return nil, err
		}
		cv.Value = &pb.ColumnValue_BytesValue{BytesValue: append([]byte{}, v...)}
	case kindTimestamp:
		secs, err := integer()
		if err != nil {
			return nil, err
		}
		nanos, n := binary.Varint(*b)
		if n <= 0 || nanos < math.MinInt32 || nanos > math.MaxInt32 {
			return nil, errColumns("timestamp nanos")
		}
		*b = (*b)[n:]
		cv.Value = &pb.ColumnValue_TimestampValue{TimestampValue: &timestamppb.Timestamp{Seconds: int64(secs), Nanos: int32(nanos)}}
	default: // the text kinds
		v, err := text()
		if err != nil {
			return nil, err
		}
		switch kind {
		case kindDecimal:
			cv.Value = &pb.ColumnValue_DecimalValue{DecimalValue: v}
		case kindString:
			cv.Value = &pb.ColumnValue_StringValue{StringValue: v}
		case kindDate:
			cv.Value = &pb.ColumnValue_DateValue{DateValue: v}
		case kindTime:
			cv.Value = &pb.ColumnValue_TimeValue{TimeValue: v}
		default:
			cv.Value = &pb.ColumnValue_JsonValue{JsonValue: v}
		}
	}
	return cv, nil
}

// idDecoder reads one IdColumn event by event.
type idDecoder struct {
	form    []uint32
	uuids   []byte
	text    []uint32
	nu      int // count of form 1
	k, u, t int
}

func (d *idDecoder) init(col *pb.IdColumn, m int, ns uint32, trace bool) error {
	if col == nil {
		col = &pb.IdColumn{}
	}
	if len(col.Form) != m {
		return errColumns("id column count")
	}
	texts := 0
	for _, f := range col.Form {
		switch {
		case f == idUUID:
			d.nu++
		case f == idText:
			texts++
		case f == idEmpty, f == idDerived && trace:
		default:
			return errColumns("id form")
		}
	}
	if len(col.Uuids) != 16*d.nu || len(col.Text) != texts {
		return errColumns("id column values")
	}
	for _, i := range col.Text {
		if i >= ns {
			return errColumns("string index")
		}
	}
	d.form, d.uuids, d.text = col.Form, col.Uuids, col.Text
	return nil
}

// next returns the next id as text, and its bytes when it is a UUID.
func (d *idDecoder) next(strs []string, eventID [16]byte) (string, [16]byte) {
	var u [16]byte
	f := d.form[d.k]
	d.k++
	switch f {
	case idUUID:
		for j := range u {
			u[j] = d.uuids[j*d.nu+d.u]
		}
		d.u++
		return FormatUUID(u), u
	case idText:
		d.t++
		return strs[d.text[d.t-1]], u
	case idDerived:
		return hex.EncodeToString(eventID[:]), u
	}
	return "", u
}
