package cdc

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// decodeMySQL decodes the value payload of the Debezium MySQL connector,
// majors 1 to 3: op, before, after, source, ts_ms and transaction.
func decodeMySQL(d *Decoder, m Message, vs *schema, p *object) (*Event, error) {
	const path = "value.payload"
	ev := &Event{}
	op, ok := p.vals["op"].(string)
	if !ok || len(op) != 1 || !slices.Contains([]Op{OpCreate, OpUpdate, OpDelete, OpRead, OpTruncate}, Op(op[0])) {
		return nil, fail(Malformed, path+".op", "missing or not one of c u d r t")
	}
	ev.Op = Op(op[0])
	var err error
	if ev.Source, err = source(p.vals["source"].(*object), path+".source"); err != nil {
		return nil, err
	}
	if ev.ProcessedAt, err = instant(p, path); err != nil {
		return nil, err
	}
	if ev.Transaction, err = transaction(p.vals["transaction"], path+".transaction"); err != nil {
		return nil, err
	}
	if ev.Op == OpTruncate {
		if present(p, "before") || present(p, "after") {
			return nil, fail(Malformed, path, "truncate with a row image")
		}
		return ev, nil
	}
	// Row images: which one an op must, may or must not have.
	needBefore, needAfter := ev.Op == OpDelete, ev.Op != OpDelete
	mayBefore := ev.Op == OpUpdate || ev.Op == OpDelete
	if ev.Before, err = d.image(vs, p, "before", needBefore, mayBefore, ev.Source); err != nil {
		return nil, err
	}
	if ev.After, err = d.image(vs, p, "after", needAfter, needAfter, ev.Source); err != nil {
		return nil, err
	}
	if ev.Key, err = d.key(m.Key, ev.Source.DB, ev.Source.Table); err != nil {
		return nil, err
	}
	return ev, nil
}

// present reports whether p has member k with a non-null value.
func present(p *object, k string) bool {
	v, ok := p.vals[k]
	return ok && v != nil
}

// image decodes the before or after row image.
func (d *Decoder) image(vs *schema, p *object, which string, need, may bool, src Source) (*pb.RowImage, error) {
	path := "value.payload." + which
	if !present(p, which) {
		if need {
			return nil, fail(Malformed, path, "row image missing for this op")
		}
		return nil, nil
	}
	if !may {
		return nil, fail(Malformed, path, "row image not allowed for this op")
	}
	row, ok := p.vals[which].(*object)
	if !ok {
		return nil, fail(Malformed, path, "not a JSON object")
	}
	var rs *schema
	if vs != nil {
		if rs = vs.fieldByName(which); rs == nil || rs.typ != "struct" {
			return nil, fail(Malformed, "value.schema."+which, "missing or not a struct")
		}
	}
	cols, err := d.row(rs, row, src.DB, src.Table, path, false)
	if err != nil {
		return nil, err
	}
	return &pb.RowImage{Columns: cols}, nil
}

// source decodes the source block.
func source(o *object, path string) (Source, error) {
	var s Source
	var err error
	for _, f := range []struct {
		name     string
		dst      *string
		required bool
	}{
		{"version", &s.Version, true}, {"connector", &s.Connector, false}, {"name", &s.Name, false},
		{"db", &s.DB, true}, {"table", &s.Table, true}, {"gtid", &s.GTID, false},
		{"file", &s.File, false}, {"query", &s.Query, false},
	} {
		if *f.dst, err = optString(o, f.name, path); err != nil {
			return s, err
		}
		if f.required && *f.dst == "" {
			return s, fail(Malformed, path+"."+f.name, "missing or empty")
		}
	}
	if s.Connector != "" && s.Connector != "mysql" {
		return s, fail(UnsupportedVersion, path+".connector", "not the mysql connector")
	}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"server_id", &s.ServerID}, {"pos", &s.Pos}, {"row", &s.Row}, {"thread", &s.Thread}} {
		if *f.dst, err = optInt(o, f.name, path); err != nil {
			return s, err
		}
	}
	if s.Timestamp, err = instant(o, path); err != nil {
		return s, err
	}
	snap, err := optString(o, "snapshot", path)
	if err != nil {
		return s, err
	}
	s.Snapshot = SnapshotFalse
	if snap != "" {
		if s.Snapshot = Snapshot(snap); !slices.Contains(snapshots, s.Snapshot) {
			return s, fail(Malformed, path+".snapshot", "not a known snapshot marker")
		}
	}
	return s, nil
}

// transaction decodes the transaction block; null or absent is nil.
func transaction(v any, path string) (*Transaction, error) {
	if v == nil {
		return nil, nil
	}
	o, ok := v.(*object)
	if !ok {
		return nil, fail(Malformed, path, "not a JSON object")
	}
	t := &Transaction{}
	var err error
	if t.ID, err = optString(o, "id", path); err != nil {
		return nil, err
	}
	if t.ID == "" {
		return nil, fail(Malformed, path+".id", "missing or empty")
	}
	for _, f := range []struct {
		name string
		dst  *uint64
	}{{"total_order", &t.TotalOrder}, {"data_collection_order", &t.DataCollectionOrder}} {
		n, err := optInt(o, f.name, path)
		if err != nil {
			return nil, err
		}
		if n < 1 {
			return nil, fail(Malformed, path+"."+f.name, "missing or below 1")
		}
		*f.dst = uint64(n)
	}
	return t, nil
}

// optString returns member k as a string; absent or null is "".
func optString(o *object, k, path string) (string, error) {
	v := o.vals[k]
	if v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fail(Malformed, path+"."+k, "not a string")
	}
	return s, nil
}

// optInt returns member k as an int64; absent or null is 0.
func optInt(o *object, k, path string) (int64, error) {
	v := o.vals[k]
	if v == nil {
		return 0, nil
	}
	num, ok := v.(json.Number)
	if !ok {
		return 0, fail(Malformed, path+"."+k, "not a number")
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		return 0, fail(Malformed, path+"."+k, "not an integer in range")
	}
	return n, nil
}

// instant returns the finest of ts_ns, ts_us and ts_ms present in o, in
// UTC; none present is the zero time.
func instant(o *object, path string) (time.Time, error) {
	for _, u := range []struct {
		name string
		conv func(int64) time.Time
	}{
		{"ts_ns", func(n int64) time.Time { return time.Unix(0, n) }},
		{"ts_us", time.UnixMicro},
		{"ts_ms", time.UnixMilli},
	} {
		if o.vals[u.name] == nil {
			continue
		}
		n, err := optInt(o, u.name, path)
		if err != nil {
			return time.Time{}, err
		}
		return u.conv(n).UTC(), nil
	}
	return time.Time{}, nil
}
