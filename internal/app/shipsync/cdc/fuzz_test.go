package cdc_test

import (
	"errors"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// errText is the shape of every error: kind, a printable bounded field
// path, a short fixed phrase.
var errText = regexp.MustCompile(`^cdc: [a-z_]+: [ -~]{1,200}: [A-Za-z0-9 .-]{1,60}$`)

// FuzzDecode: Decode never panics; every error is a *DecodeError of a
// known kind with a bounded, printable text; every event it returns keeps
// the shape its op promises. Seeds are the testdata fixtures plus the
// stored corpus in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	schemaKey, plainKey := fixture(f, "schema/key.json"), fixture(f, "schemaless/key_1017.json")
	for _, v := range []string{"schema/insert.json", "schema/update.json", "schema/delete.json"} {
		f.Add(schemaKey, fixture(f, v))
	}
	for _, v := range []string{"schemaless/snapshot_last.json", "schemaless/truncate.json", "schemaless/pkchange_delete.json", "schemaless/pkchange_create.json"} {
		f.Add(plainKey, fixture(f, v))
	}
	f.Add(schemaKey, []byte(nil))
	f.Add([]byte(`{"leg":2,"voyage":7}`), []byte(`{"op":"c","after":{"voyage":7,"leg":2},"source":{"version":"3.0.0","db":"ops","table":"leg"}}`))
	f.Add([]byte(intKey), oneColumn(decimalSchema("4"), `"7Sm8"`))
	f.Add([]byte(intKey), oneColumn(`"type":"int64","optional":true,"name":"io.debezium.time.MicroTime"`, `-5400000000`))
	types := voyageTypes()
	types["ops.leg"] = map[string]cdc.ColumnType{"voyage": {Type: "int64"}, "leg": {Type: "int16"}}
	types["ops.t"] = map[string]cdc.ColumnType{"id": {Type: "int32"}}
	decoders := []*cdc.Decoder{newDecoder(f, cdc.Config{Types: types}), newDecoder(f, cdc.Config{})}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		for _, d := range decoders {
			ev, err := d.Decode(cdc.Message{Topic: topic, Key: key, Value: value})
			if err != nil {
				var de *cdc.DecodeError
				require.True(t, errors.As(err, &de), "not a *DecodeError: %T", err)
				require.NotEqual(t, "unknown", de.Kind.String())
				require.Regexp(t, errText, err.Error())
				continue
			}
			requireShape(t, ev)
		}
	})
}

// requireShape checks what an op promises about key and images, and that
// every column has a name and exactly one value member.
func requireShape(t *testing.T, ev *cdc.Event) {
	switch ev.Op {
	case cdc.OpTruncate:
		require.Nil(t, ev.Before)
		require.Nil(t, ev.After)
	case cdc.OpTombstone:
		require.NotEmpty(t, ev.Key)
		require.Nil(t, ev.Before)
		require.Nil(t, ev.After)
	case cdc.OpCreate, cdc.OpRead:
		require.Nil(t, ev.Before)
		require.NotNil(t, ev.After)
	case cdc.OpUpdate:
		require.NotNil(t, ev.After)
	case cdc.OpDelete:
		require.NotNil(t, ev.Before)
		require.Nil(t, ev.After)
	default:
		t.Fatalf("op %v", ev.Op)
	}
	if ev.Op != cdc.OpTruncate {
		require.NotEmpty(t, ev.Key)
		for _, c := range ev.Key {
			_, null := c.Value.(*pb.ColumnValue_Null)
			require.False(t, null)
		}
	}
	if ev.Op != cdc.OpTombstone {
		require.NotEmpty(t, ev.Source.Version)
		require.NotEmpty(t, ev.Source.DB)
		require.NotEmpty(t, ev.Source.Table)
	}
	for _, img := range []*pb.RowImage{ev.Before, ev.After, {Columns: ev.Key}} {
		if img == nil {
			continue
		}
		for _, c := range img.Columns {
			require.NotEmpty(t, c.Name)
			require.NotNil(t, c.Value)
			if n, ok := c.Value.(*pb.ColumnValue_Null); ok {
				require.True(t, n.Null)
			}
			if ts, ok := c.Value.(*pb.ColumnValue_TimestampValue); ok {
				require.NoError(t, ts.TimestampValue.CheckValid())
			}
		}
	}
}
