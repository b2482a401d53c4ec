package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

func TestParseVersion(t *testing.T) {
	t.Parallel()
	ok := map[string]wire.Version{
		"1.0":                   {Major: 1, Minor: 0},
		"1.12":                  {Major: 1, Minor: 12},
		"0.0":                   {Major: 0, Minor: 0},
		"4294967295.4294967295": {Major: 4294967295, Minor: 4294967295},
	}
	for s, want := range ok {
		got, err := wire.ParseVersion(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
		require.Equal(t, s, got.String())
	}
	for _, s := range []string{
		"", "1", "1.", ".1", "1.0.0", "01.0", "1.00", "+1.0", "-1.0", " 1.0", "1.0 ",
		"v1.0", "1,0", "4294967296.0", "1.4294967296", "1.0\x00", "١.٠", "99999999999999999999999.1",
	} {
		_, err := wire.ParseVersion(s)
		requireClass(t, err, wire.ErrMalformedVersion)
	}
}

// TestCheckVersion is the major/minor rule: a supported major with any
// minor is accepted, any other major is refused as unsupported.
func TestCheckVersion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v         string
		supported []uint32
		want      error
	}{
		{"1.0", []uint32{1}, nil},
		{"1.9", []uint32{1}, nil}, // newer minor: accepted
		{"2.0", []uint32{1}, wire.ErrUnsupportedMajor},
		{"0.9", []uint32{1}, wire.ErrUnsupportedMajor},
		{"2.3", []uint32{1, 2}, nil},
		{"3.0", []uint32{1, 2}, wire.ErrUnsupportedMajor},
		{"1.0", nil, wire.ErrUnsupportedMajor},
		{"x.0", []uint32{1}, wire.ErrMalformedVersion},
	}
	for _, c := range cases {
		_, err := wire.CheckVersion(c.v, c.supported)
		if c.want == nil {
			require.NoError(t, err, c.v)
			continue
		}
		requireClass(t, err, c.want)
	}
	require.Equal(t, "1.0", wire.CurrentVersion.String())
}

// TestNewerMinorWithUnknownFields: an event of a newer minor carrying a
// field this code does not know decodes and validates; the unknown field is
// kept aside (and re-sent if re-marshalled), never interpreted.
func TestNewerMinorWithUnknownFields(t *testing.T) {
	t.Parallel()
	ev := validEvent(1)
	ev.SchemaVersion = "1.7"
	b, err := proto.Marshal(ev)
	require.NoError(t, err)
	b = protowire.AppendTag(b, 99, protowire.BytesType)
	b = protowire.AppendString(b, "a field from version 1.7")
	var got pb.ChangeEvent
	require.NoError(t, proto.Unmarshal(b, &got))
	require.NoError(t, wire.ValidateEvent(&got, nil))
	require.NotEmpty(t, got.ProtoReflect().GetUnknown())

	got.SchemaVersion = "2.0"
	err = wire.ValidateEvent(&got, nil)
	requireClass(t, err, wire.ErrUnsupportedMajor)
	requireClass(t, err, wire.ErrInvalidEvent)
	var fe *wire.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "schema_version", fe.Field)
	require.Equal(t, pb.RejectReason_REJECT_REASON_UNSUPPORTED_SCHEMA_MAJOR, fe.Reason)
}
