package wire_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

func requireSameEvents(t *testing.T, want, got []*pb.ChangeEvent) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, proto.Equal(want[i], got[i]), "event %d differs", i)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	c := newCodec(t, wire.Config{})
	for _, n := range []int{1, 3, 500} {
		in := newBatch(events(n))
		data, err := c.Encode(in)
		require.NoError(t, err)
		out, err := c.Decode(data)
		require.NoError(t, err)
		require.Equal(t, "1.0", out.ProtocolVersion)
		require.Equal(t, in.NodeID, out.NodeID)
		require.Equal(t, in.BatchID, out.BatchID)
		require.Equal(t, in.Sequence, out.Sequence)
		require.True(t, in.CreatedAt.Equal(out.CreatedAt))
		require.Equal(t, in.Encoding, out.Encoding)
		require.Equal(t, in.UncompressedBytes, out.UncompressedBytes)
		requireSameEvents(t, in.Events, out.Events)
		for _, ev := range out.Events {
			require.NoError(t, c.ValidateEvent(ev))
		}
		// NULL, empty string and empty bytes stay distinct.
		after := out.Events[0].After.Columns
		require.IsType(t, &pb.ColumnValue_Null{}, after[1].Value)
		require.IsType(t, &pb.ColumnValue_StringValue{}, after[2].Value)
		require.IsType(t, &pb.ColumnValue_BytesValue{}, after[8].Value)
		require.Equal(t, "-12345678901234567890.000100", after[6].GetDecimalValue())
	}
}

// TestCompressionThreshold: an event list below the threshold goes as is,
// one at or above it is zstd-compressed, and a negative threshold never
// compresses.
func TestCompressionThreshold(t *testing.T) {
	t.Parallel()
	evs := events(4)
	size := proto.Size(&pb.EventList{Events: evs})

	below := newCodec(t, wire.Config{CompressThreshold: size + 1})
	at := newCodec(t, wire.Config{CompressThreshold: size})
	never := newCodec(t, wire.Config{CompressThreshold: -1})

	for _, tc := range []struct {
		c    *wire.Codec
		want pb.ContentEncoding
	}{
		{below, pb.ContentEncoding_CONTENT_ENCODING_IDENTITY},
		{at, pb.ContentEncoding_CONTENT_ENCODING_ZSTD},
		{never, pb.ContentEncoding_CONTENT_ENCODING_IDENTITY},
	} {
		b := newBatch(evs)
		data, err := tc.c.Encode(b)
		require.NoError(t, err)
		require.Equal(t, tc.want, b.Encoding)
		require.Equal(t, size, b.UncompressedBytes)
		var ub pb.UploadBatch
		require.NoError(t, proto.Unmarshal(data, &ub))
		require.Equal(t, tc.want, ub.ContentEncoding)
		out, err := below.Decode(data) // any codec decodes either encoding
		require.NoError(t, err)
		requireSameEvents(t, evs, out.Events)
	}

	// The default threshold: 500 events are far above 16 KiB and compress well.
	c := newCodec(t, wire.Config{})
	b := newBatch(events(500))
	data, err := c.Encode(b)
	require.NoError(t, err)
	require.Equal(t, pb.ContentEncoding_CONTENT_ENCODING_ZSTD, b.Encoding)
	require.Less(t, len(data), b.UncompressedBytes/3)
}

func TestEncodeLimits(t *testing.T) {
	t.Parallel()
	c := newCodec(t, wire.Config{})
	_, err := c.Encode(newBatch(events(wire.MaxEventsDefault + 1)))
	requireClass(t, err, wire.ErrTooManyEvents)
	_, err = c.Encode(newBatch(nil))
	requireClass(t, err, wire.ErrMalformedBatch)

	// Over 4 MiB before compression, under 500 events.
	big := events(5)
	for _, ev := range big {
		ev.After.Columns = append(ev.After.Columns, &pb.ColumnValue{Name: "pad", Value: &pb.ColumnValue_BytesValue{BytesValue: make([]byte, 1<<20)}})
	}
	_, err = c.Encode(newBatch(big))
	requireClass(t, err, wire.ErrBatchTooLarge)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_BATCH_TOO_LARGE, wire.ErrorBody(err).Code)

	small := newCodec(t, wire.Config{MaxEvents: 2, MaxBytes: 1000})
	_, err = small.Encode(newBatch(events(3)))
	requireClass(t, err, wire.ErrTooManyEvents)
	_, err = small.Encode(newBatch(events(2)))
	requireClass(t, err, wire.ErrBatchTooLarge)

	for name, mutate := range map[string]func(b *wire.Batch){
		"node":     func(b *wire.Batch) { b.NodeID = "" },
		"batch id": func(b *wire.Batch) { b.BatchID = "b-1" },
		"sequence": func(b *wire.Batch) { b.Sequence = 0 },
		"created":  func(b *wire.Batch) { b.CreatedAt = time.Time{} },
	} {
		b := newBatch(events(1))
		mutate(b)
		_, err := c.Encode(b)
		requireClass(t, err, wire.ErrMalformedBatch)
		require.NotEmpty(t, name)
	}
	b := newBatch(events(1))
	b.ProtocolVersion = "2.0"
	_, err = c.Encode(b)
	requireClass(t, err, wire.ErrUnsupportedMajor)
}

// wireBatch returns a valid UploadBatch of n events, encoded per enc, for
// tests to tamper with.
func wireBatch(t *testing.T, n int, enc pb.ContentEncoding) *pb.UploadBatch {
	t.Helper()
	threshold := -1
	if enc == pb.ContentEncoding_CONTENT_ENCODING_ZSTD {
		threshold = 1
	}
	c := newCodec(t, wire.Config{CompressThreshold: threshold})
	data, err := c.Encode(newBatch(events(n)))
	require.NoError(t, err)
	var ub pb.UploadBatch
	require.NoError(t, proto.Unmarshal(data, &ub))
	require.Equal(t, enc, ub.ContentEncoding)
	return &ub
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

func zstdAll(t *testing.T, b []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

// rebody replaces the body of ub with list, recomputing size and checksum
// honestly, so only what a case changes on purpose is wrong.
func rebody(t *testing.T, ub *pb.UploadBatch, raw []byte, enc pb.ContentEncoding) {
	t.Helper()
	sum := sha256.Sum256(raw)
	ub.Checksum = sum[:]
	ub.UncompressedBytes = uint64(len(raw))
	ub.ContentEncoding = enc
	ub.EventsBody = raw
	if enc == pb.ContentEncoding_CONTENT_ENCODING_ZSTD {
		ub.EventsBody = zstdAll(t, raw)
	}
}

// TestDecodeRefusals: every check of Decode, each refused with its class
// and a bounded error.
func TestDecodeRefusals(t *testing.T) {
	t.Parallel()
	identity, zstdEnc := pb.ContentEncoding_CONTENT_ENCODING_IDENTITY, pb.ContentEncoding_CONTENT_ENCODING_ZSTD
	cases := []struct {
		name   string
		enc    pb.ContentEncoding
		mutate func(t *testing.T, ub *pb.UploadBatch)
		class  error
		code   pb.ErrorCode
	}{
		{"no protocol_version", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.ProtocolVersion = "" }, wire.ErrMalformedVersion, pb.ErrorCode_ERROR_CODE_MALFORMED_VERSION},
		{"malformed protocol_version", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.ProtocolVersion = "1.x" }, wire.ErrMalformedVersion, pb.ErrorCode_ERROR_CODE_MALFORMED_VERSION},
		{"unsupported major", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.ProtocolVersion = "2.0" }, wire.ErrUnsupportedMajor, pb.ErrorCode_ERROR_CODE_UNSUPPORTED_MAJOR},
		{"no node_id", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.NodeId = "" }, wire.ErrMalformedBatch, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY},
		{"node_id too long", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.NodeId = strings.Repeat("x", 300) }, wire.ErrMalformedBatch, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY},
		{"batch_id not a UUID", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.BatchId = secret }, wire.ErrMalformedBatch, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY},
		{"no sequence", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.Sequence = 0 }, wire.ErrMalformedBatch, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY},
		{"no created_at", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.CreatedAt = nil }, wire.ErrMalformedBatch, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY},
		{"invalid created_at", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.CreatedAt = &timestamppb.Timestamp{Nanos: -5} }, wire.ErrMalformedBatch, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY},
		{"zero created_at", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.CreatedAt = timestamppb.New(time.Time{}) }, wire.ErrMalformedBatch, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY},
		{"no events", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.EventCount = 0 }, wire.ErrMalformedBatch, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY},
		{"declares 501 events", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.EventCount = 501 }, wire.ErrTooManyEvents, pb.ErrorCode_ERROR_CODE_BATCH_TOO_LARGE},
		{"declares over 4 MiB", zstdEnc, func(t *testing.T, ub *pb.UploadBatch) { ub.UncompressedBytes = wire.MaxBytesDefault + 1 }, wire.ErrBatchTooLarge, pb.ErrorCode_ERROR_CODE_BATCH_TOO_LARGE},
		{"short checksum", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.Checksum = ub.Checksum[:16] }, wire.ErrMalformedBatch, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY},
		{"checksum mismatch", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.Checksum[0] ^= 1 }, wire.ErrChecksumMismatch, pb.ErrorCode_ERROR_CODE_CHECKSUM_MISMATCH},
		{"body bit flip", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.EventsBody[len(ub.EventsBody)/2] ^= 0x20 }, wire.ErrChecksumMismatch, pb.ErrorCode_ERROR_CODE_CHECKSUM_MISMATCH},
		{"zstd checksum mismatch", zstdEnc, func(t *testing.T, ub *pb.UploadBatch) { ub.Checksum[31] ^= 1 }, wire.ErrChecksumMismatch, pb.ErrorCode_ERROR_CODE_CHECKSUM_MISMATCH},
		{"truncated identity body", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.EventsBody = ub.EventsBody[:len(ub.EventsBody)-1] }, wire.ErrChecksumMismatch, pb.ErrorCode_ERROR_CODE_CHECKSUM_MISMATCH},
		{"declared size too small", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.UncompressedBytes-- }, wire.ErrChecksumMismatch, pb.ErrorCode_ERROR_CODE_CHECKSUM_MISMATCH},
		{"zstd expands past declared size", zstdEnc, func(t *testing.T, ub *pb.UploadBatch) { ub.UncompressedBytes -= 10 }, wire.ErrDecompressedTooLarge, pb.ErrorCode_ERROR_CODE_BAD_COMPRESSION},
		{"zstd shorter than declared", zstdEnc, func(t *testing.T, ub *pb.UploadBatch) { ub.UncompressedBytes += 10 }, wire.ErrChecksumMismatch, pb.ErrorCode_ERROR_CODE_CHECKSUM_MISMATCH},
		{"corrupt zstd", zstdEnc, func(t *testing.T, ub *pb.UploadBatch) {
			for i := 8; i < len(ub.EventsBody); i += 7 {
				ub.EventsBody[i] ^= 0x5a
			}
		}, wire.ErrBadCompression, pb.ErrorCode_ERROR_CODE_BAD_COMPRESSION},
		{"truncated zstd", zstdEnc, func(t *testing.T, ub *pb.UploadBatch) { ub.EventsBody = ub.EventsBody[:len(ub.EventsBody)/2] }, wire.ErrBadCompression, pb.ErrorCode_ERROR_CODE_BAD_COMPRESSION},
		{"not zstd at all", zstdEnc, func(t *testing.T, ub *pb.UploadBatch) { ub.EventsBody = []byte(secret) }, wire.ErrBadCompression, pb.ErrorCode_ERROR_CODE_BAD_COMPRESSION},
		{"no content_encoding", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.ContentEncoding = 0 }, wire.ErrBadCompression, pb.ErrorCode_ERROR_CODE_BAD_COMPRESSION},
		{"unknown content_encoding", identity, func(t *testing.T, ub *pb.UploadBatch) { ub.ContentEncoding = 9 }, wire.ErrBadCompression, pb.ErrorCode_ERROR_CODE_BAD_COMPRESSION},
		{"body not an EventList", identity, func(t *testing.T, ub *pb.UploadBatch) {
			rebody(t, ub, []byte{0x0a, 0xff, 0xff, 0xff}, identity)
		}, wire.ErrMalformedBatch, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY},
		{"fewer events than declared", zstdEnc, func(t *testing.T, ub *pb.UploadBatch) {
			rebody(t, ub, marshal(t, &pb.EventList{Events: events(2)}), zstdEnc)
		}, wire.ErrChecksumMismatch, pb.ErrorCode_ERROR_CODE_CHECKSUM_MISMATCH},
		{"invalid UTF-8 in an event string", identity, func(t *testing.T, ub *pb.UploadBatch) {
			ev := validEvent(1)
			raw := marshal(t, &pb.EventList{Events: []*pb.ChangeEvent{ev, ev, ev}})
			i := bytes.Index(raw, []byte("ship-0042"))
			raw[i] = 0xff
			rebody(t, ub, raw, identity)
		}, wire.ErrMalformedBatch, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY},
	}
	c := newCodec(t, wire.Config{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ub := wireBatch(t, 3, tc.enc)
			tc.mutate(t, ub)
			_, err := c.Decode(marshal(t, ub))
			requireClass(t, err, tc.class)
			body := wire.ErrorBody(err)
			require.Equal(t, tc.code, body.Code)
			require.False(t, body.Retryable)
			require.LessOrEqual(t, len(body.Message), 200)
		})
	}

	t.Run("garbage", func(t *testing.T) {
		t.Parallel()
		for _, data := range [][]byte{{0xff}, {0x0a, 0x05, 'a'}, []byte(secret)} {
			_, err := c.Decode(data)
			requireClass(t, err, wire.ErrMalformedBatch)
		}
		_, err := c.Decode(nil) // an empty message: no version
		requireClass(t, err, wire.ErrMalformedVersion)
	})
	t.Run("body over the wire limit", func(t *testing.T) {
		t.Parallel()
		_, err := c.Decode(make([]byte, wire.MaxBytesDefault+128<<10))
		requireClass(t, err, wire.ErrBatchTooLarge)
	})
}

// TestBombGuard: a small zstd body that expands to far more than the limit
// is stopped at the limit, whether or not its frame declares its size, and
// whatever the batch declares.
func TestBombGuard(t *testing.T) {
	t.Parallel()
	c := newCodec(t, wire.Config{})
	huge := make([]byte, 16<<20) // 16 MiB of zeros (4× the limit): a few hundred bytes compressed

	withSize := zstdAll(t, huge) // EncodeAll writes the content size
	var stream bytes.Buffer      // the streaming writer does not
	w, err := zstd.NewWriter(&stream)
	require.NoError(t, err)
	_, err = w.Write(huge)
	require.NoError(t, err)
	require.NoError(t, w.Close())

	for name, body := range map[string][]byte{"content size in frame": withSize, "no content size": stream.Bytes()} {
		for _, declared := range []uint64{1000, wire.MaxBytesDefault} {
			require.Less(t, len(body), 16<<10, name)
			ub := wireBatch(t, 1, pb.ContentEncoding_CONTENT_ENCODING_ZSTD)
			ub.EventsBody = body
			ub.UncompressedBytes = declared
			_, err := c.Decode(marshal(t, ub))
			requireClass(t, err, wire.ErrDecompressedTooLarge)
			require.Equal(t, pb.ErrorCode_ERROR_CODE_BAD_COMPRESSION, wire.ErrorBody(err).Code, name)
		}
	}
}

func TestNewCodecConfig(t *testing.T) {
	t.Parallel()
	c := newCodec(t, wire.Config{})
	cfg := c.Config()
	require.Equal(t, wire.MaxEventsDefault, cfg.MaxEvents)
	require.Equal(t, wire.MaxBytesDefault, cfg.MaxBytes)
	require.Equal(t, wire.CompressThresholdDefault, cfg.CompressThreshold)
	require.Equal(t, wire.SupportedMajorsDefault, cfg.SupportedMajors)
	_, err := wire.NewCodec(wire.Config{MaxEvents: -1})
	require.ErrorContains(t, err, "MaxEvents")
	_, err = wire.NewCodec(wire.Config{MaxBytes: -1})
	require.ErrorContains(t, err, "MaxBytes")
}

func TestErrorBodyOfUnknownError(t *testing.T) {
	t.Parallel()
	b := wire.ErrorBody(errors.New(strings.Repeat("é", 300) + "\xff"))
	require.Equal(t, pb.ErrorCode_ERROR_CODE_INTERNAL, b.Code)
	require.True(t, b.Retryable)
	require.LessOrEqual(t, len(b.Message), 200)
	require.True(t, utf8.ValidString(b.Message))
}

// TestConcurrentUse: one Codec serves many goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	c := newCodec(t, wire.Config{CompressThreshold: 1})
	evs := events(20)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				data, err := c.Encode(newBatch(evs))
				if !assert.NoError(t, err) {
					return
				}
				b, err := c.Decode(data)
				if assert.NoError(t, err) {
					assert.Len(t, b.Events, len(evs))
				}
			}
		})
	}
	wg.Wait()
}
