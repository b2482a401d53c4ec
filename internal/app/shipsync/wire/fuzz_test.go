package wire_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

var (
	versionErrText = regexp.MustCompile(`^malformed version: (empty|not MAJOR\.MINOR|\d+ bytes long)$`)
	fieldPath      = regexp.MustCompile(`^[a-z_]+(\[\d+\])?(\.[a-z_]+(\[\d+\])?)*$`)
	problemText    = regexp.MustCompile(`^[A-Za-z0-9 _.:\[\]-]{1,60}$`)
)

// FuzzDecodeBatch: Decode never panics, every error is of a known class and
// bounded, and whatever decodes re-encodes to a body that decodes to the
// same events. The corpus in testdata/fuzz/FuzzDecodeBatch adds stored
// bodies to the ones made here.
func FuzzDecodeBatch(f *testing.F) {
	for _, threshold := range []int{-1, 1} {
		c := newCodec(f, wire.Config{CompressThreshold: threshold})
		for _, n := range []int{1, 3} {
			for _, v := range []string{"1.0", wire.ColumnarVersion.String()} {
				b := newBatch(events(n))
				b.ProtocolVersion = v
				data, err := c.Encode(b)
				require.NoError(f, err)
				f.Add(data)
			}
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x03, '1', '.', '0'})
	// Small limits so that the fuzzer reaches the limit checks cheaply.
	c := newCodec(f, wire.Config{MaxEvents: 50, MaxBytes: 64 << 10})
	re := newCodec(f, wire.Config{MaxEvents: 50, MaxBytes: 64 << 10, CompressThreshold: 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := c.Decode(data)
		if err != nil {
			require.True(t, hasClass(err), "unclassified: %v", err)
			requireBounded(t, err)
			require.NotEqual(t, pb.ErrorCode_ERROR_CODE_INTERNAL, wire.ErrorBody(err).Code)
			return
		}
		require.NotEmpty(t, b.Events)
		for _, ev := range b.Events {
			if err := c.ValidateEvent(ev); err != nil {
				requireClass(t, err, wire.ErrInvalidEvent)
			}
		}
		requireReencodes(t, c, re, b)
	})
}

// FuzzParseSchemaVersion: ParseVersion never panics, errors are classified
// and never quote the input, and what parses prints back to itself.
func FuzzParseSchemaVersion(f *testing.F) {
	for _, s := range []string{"1.0", "1.12", "0.0", "2.0", "01.0", "1.", "", "4294967295.4294967295", "4294967296.0", "1.0.0", "-1.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := wire.ParseVersion(s)
		if err != nil {
			requireClass(t, err, wire.ErrMalformedVersion)
			require.Regexp(t, versionErrText, err.Error())
			return
		}
		require.Equal(t, s, v.String())
		_, err = wire.CheckVersion(s, wire.SupportedMajorsDefault)
		if v.Major == 1 {
			require.NoError(t, err)
		} else {
			requireClass(t, err, wire.ErrUnsupportedMajor)
		}
	})
}

// FuzzValidateEvent: any bytes that unmarshal as a ChangeEvent validate
// without panicking; a refusal names a field, carries a reason code and
// never echoes a string of the event longer than a few bytes.
func FuzzValidateEvent(f *testing.F) {
	for i, ev := range events(3) {
		switch i {
		case 1:
			ev.Operation, ev.After = pb.Operation_OPERATION_DELETE, nil
		case 2:
			ev.After.Columns[1].Value = nil
		}
		data, err := proto.Marshal(ev)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev pb.ChangeEvent
		if proto.Unmarshal(data, &ev) != nil {
			return
		}
		err := wire.ValidateEvent(&ev, nil)
		if err == nil {
			return
		}
		var fe *wire.FieldError
		require.ErrorAs(t, err, &fe)
		require.NotEmpty(t, fe.Field)
		require.NotEqual(t, pb.RejectReason_REJECT_REASON_UNSPECIFIED, fe.Reason)
		requireBounded(t, err)
		// The text is built from a field path (names and indexes) and a
		// short fixed phrase: there is no room for input text in it.
		require.Regexp(t, fieldPath, fe.Field)
		require.Regexp(t, problemText, fe.Problem)
		require.Equal(t, "invalid change event: "+fe.Field+": "+fe.Problem, err.Error())
	})
}
