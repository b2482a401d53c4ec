package wire

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// Batch limits and the compression threshold (seed 004 §9.1, §9.3).
const (
	// MaxEventsDefault is the most events one batch may carry.
	MaxEventsDefault = 500
	// MaxBytesDefault is the largest serialized event list, before
	// compression, one batch may carry (4 MiB).
	MaxBytesDefault = 4 << 20
	// CompressThresholdDefault: event lists of at least this many bytes are
	// zstd-compressed; smaller ones go as they are (16 KiB: below it the
	// saving is a few hundred bytes and not worth a frame).
	CompressThresholdDefault = 16 << 10
	// headerSlack is what the wire body may exceed MaxBytes by: the header
	// fields around events_body (ids, version, checksum, tags), generously.
	headerSlack = 64 << 10
)

// Config sets a Codec's limits. Zero values take the defaults.
type Config struct {
	// MaxEvents is the most events per batch (default MaxEventsDefault).
	MaxEvents int
	// MaxBytes bounds the serialized event list before compression, and so
	// how far a compressed body may expand (default MaxBytesDefault).
	MaxBytes int
	// CompressThreshold: event lists of at least this many bytes are
	// compressed (default CompressThresholdDefault; negative: never).
	CompressThreshold int
	// SupportedMajors lists the protocol and schema majors accepted (default
	// SupportedMajorsDefault).
	SupportedMajors []uint32
}

func (c Config) withDefaults() Config {
	c.MaxEvents = cmp.Or(c.MaxEvents, MaxEventsDefault)
	c.MaxBytes = cmp.Or(c.MaxBytes, MaxBytesDefault)
	c.CompressThreshold = cmp.Or(c.CompressThreshold, CompressThresholdDefault)
	if len(c.SupportedMajors) == 0 {
		c.SupportedMajors = SupportedMajorsDefault
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.MaxEvents < 1:
		return fmt.Errorf("wire: config MaxEvents %d: must be ≥ 1", c.MaxEvents)
	case c.MaxBytes < 1:
		return fmt.Errorf("wire: config MaxBytes %d: must be ≥ 1", c.MaxBytes)
	}
	return nil
}

// Codec encodes and decodes upload batches under one Config. It is safe for
// concurrent use.
type Codec struct {
	cfg Config
	enc *zstd.Encoder
	dec *zstd.Decoder
}

// NewCodec returns a Codec for cfg (zero fields take their defaults) or an
// error naming the bad field.
func NewCodec(cfg Config) (*Codec, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// EncodeAll and DecodeAll start no goroutines; the concurrency options
	// only size their pools of block coders (GOMAXPROCS by default), so that
	// concurrent batches do not queue behind one coder.
	// One encoder block and a 1 MiB window at the default level keep the
	// encoder's memory at a few MiB (a ship client runs in 128 MiB): at the
	// best level it takes ≈ 100 MiB per block and 20× the CPU for ≈ 9 %
	// fewer bytes (BenchmarkNarrowUpdates). Batches are encoded one at a
	// time through it, a few ms each.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true),
		zstd.WithWindowSize(1<<20))
	if err != nil {
		return nil, fmt.Errorf("wire: zstd encoder: %w", err)
	}
	// The bomb guard: DecodeAll refuses a frame that declares, or reaches
	// while decoding, more than MaxBytes, and the window is bounded too, so
	// a hostile body costs at most MaxBytes of memory.
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderMaxMemory(uint64(cfg.MaxBytes)),
		zstd.WithDecoderMaxWindow(uint64(max(cfg.MaxBytes, zstd.MinWindowSize))),
	)
	if err != nil {
		return nil, fmt.Errorf("wire: zstd decoder: %w", err)
	}
	return &Codec{cfg: cfg, enc: enc, dec: dec}, nil
}

// Config returns the Codec's effective configuration.
func (c *Codec) Config() Config { return c.cfg }

// Batch is an upload batch as the application sees it: the header fields and
// the events. Decode also fills the fields below Events.
type Batch struct {
	// ProtocolVersion is "MAJOR.MINOR"; Encode writes CurrentVersion when
	// empty.
	ProtocolVersion string
	// NodeID is the sending node.
	NodeID string
	// BatchID is the batch's UUID (diagnosis only).
	BatchID string
	// Sequence is the node's upload sequence number (≥ 1).
	Sequence uint64
	// CreatedAt is when the node built the batch.
	CreatedAt time.Time
	// Events, in send order.
	Events []*shipsyncpb.ChangeEvent

	// Encoding is how events_body came (set by Decode and Encode).
	Encoding shipsyncpb.ContentEncoding
	// UncompressedBytes is the event list's size before compression (set by
	// Decode and Encode).
	UncompressedBytes int
	// Columns says the events travelled column by column (EventColumns,
	// protocol ≥ 1.1) rather than as an EventList (set by Decode and Encode).
	Columns bool
}

// Encode serializes b as an UploadBatch body: the events as one EventList
// (protocol 1.0) or, when b.ProtocolVersion is ColumnarVersion or a later
// minor, as one EventColumns in event_columns; the SHA-256 of that
// serialized list, and zstd when it reaches the compression threshold. The
// 4 MiB limit holds for the serialized list and, in the columnar form, for
// the same events as an EventList too. It
// checks the header and the limits (ErrMalformedBatch, ErrTooManyEvents,
// ErrBatchTooLarge) but not the events themselves: ValidateEvent does that.
// It sets b.Encoding and b.UncompressedBytes.
func (c *Codec) Encode(b *Batch) ([]byte, error) {
	if b.ProtocolVersion == "" {
		b.ProtocolVersion = CurrentVersion.String()
	}
	v, err := CheckVersion(b.ProtocolVersion, c.cfg.SupportedMajors)
	if err != nil {
		return nil, fmt.Errorf("wire: encode batch: protocol_version: %w", err)
	}
	if err := c.checkHeader(b.NodeID, b.BatchID, b.Sequence, len(b.Events)); err != nil {
		return nil, fmt.Errorf("wire: encode batch: %w", err)
	}
	if b.CreatedAt.IsZero() {
		return nil, fmt.Errorf("wire: encode batch: %w: created_at missing", ErrMalformedBatch)
	}
	var body []byte
	rows := 0
	columns := usesColumns(v)
	if columns {
		body, rows, err = encodeColumns(b.Events)
	} else {
		body, err = proto.MarshalOptions{Deterministic: true}.Marshal(&shipsyncpb.EventList{Events: b.Events})
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrMalformedBatch, err)
		}
		rows = len(body)
	}
	if err != nil {
		return nil, fmt.Errorf("wire: encode batch: %w", err)
	}
	// The limit holds for the events as an EventList in both forms (the
	// shore stores them as rows) and for the body itself.
	if size := max(rows, len(body)); size > c.cfg.MaxBytes {
		return nil, fmt.Errorf("wire: encode batch: %w: %d bytes > %d", ErrBatchTooLarge, size, c.cfg.MaxBytes)
	}
	sum := sha256.Sum256(body)
	b.UncompressedBytes = len(body)
	b.Columns = columns
	b.Encoding = shipsyncpb.ContentEncoding_CONTENT_ENCODING_IDENTITY
	wireBody := body
	if c.cfg.CompressThreshold >= 0 && len(body) >= c.cfg.CompressThreshold {
		b.Encoding = shipsyncpb.ContentEncoding_CONTENT_ENCODING_ZSTD
		wireBody = c.enc.EncodeAll(body, make([]byte, 0, len(body)/2))
	}
	ub := &shipsyncpb.UploadBatch{
		ProtocolVersion:   b.ProtocolVersion,
		NodeId:            b.NodeID,
		BatchId:           b.BatchID,
		Sequence:          b.Sequence,
		CreatedAt:         timestamppb.New(b.CreatedAt),
		EventCount:        uint32(len(b.Events)),
		UncompressedBytes: uint64(len(body)),
		ContentEncoding:   b.Encoding,
		Checksum:          sum[:],
	}
	if columns {
		ub.EventColumns = wireBody
	} else {
		ub.EventsBody = wireBody
	}
	return proto.Marshal(ub)
}

// Decode parses an UploadBatch body, in this order so that cheap checks come
// before costly ones: the body size; the header (protocol_version major,
// node, batch id, sequence, created_at, declared count and size against the
// limits, checksum length); which body is set (event_columns only from
// ColumnarVersion on, never with events_body); decompression bounded by the
// declared size; the declared size; the SHA-256; the event list (an
// EventColumns rebuilt into ChangeEvents, stopping once they pass the byte
// limit as an EventList); the declared count. Each
// failure wraps one class of errors.go. The events are returned as decoded:
// ValidateEvent gives each its own receive status.
func (c *Codec) Decode(data []byte) (*Batch, error) {
	if len(data) > c.cfg.MaxBytes+headerSlack {
		return nil, fmt.Errorf("wire: decode batch: %w: body of %d bytes", ErrBatchTooLarge, len(data))
	}
	var ub shipsyncpb.UploadBatch
	if err := proto.Unmarshal(data, &ub); err != nil {
		return nil, fmt.Errorf("wire: decode batch: %w: not an UploadBatch", ErrMalformedBatch)
	}
	v, err := CheckVersion(ub.ProtocolVersion, c.cfg.SupportedMajors)
	if err != nil {
		return nil, fmt.Errorf("wire: decode batch: protocol_version: %w", err)
	}
	if err := c.checkHeader(ub.NodeId, ub.BatchId, ub.Sequence, int(ub.EventCount)); err != nil {
		return nil, fmt.Errorf("wire: decode batch: %w", err)
	}
	// 0001-01-01T00:00:00Z is Go's "no time" and never a real batch time.
	if ub.CreatedAt == nil || ub.CreatedAt.CheckValid() != nil || ub.CreatedAt.AsTime().IsZero() {
		return nil, fmt.Errorf("wire: decode batch: %w: created_at missing or invalid", ErrMalformedBatch)
	}
	if ub.UncompressedBytes > uint64(c.cfg.MaxBytes) {
		return nil, fmt.Errorf("wire: decode batch: %w: uncompressed_bytes %d > %d", ErrBatchTooLarge, ub.UncompressedBytes, c.cfg.MaxBytes)
	}
	if len(ub.Checksum) != sha256.Size {
		return nil, fmt.Errorf("wire: decode batch: %w: checksum is %d bytes, want %d", ErrMalformedBatch, len(ub.Checksum), sha256.Size)
	}
	// From 1.1 on the events may come column by column instead; never both.
	columns := len(ub.EventColumns) > 0
	wireBody := ub.EventsBody
	if columns {
		if len(ub.EventsBody) > 0 || !usesColumns(v) {
			return nil, fmt.Errorf("wire: decode batch: %w: event_columns with events_body or before protocol %s",
				ErrMalformedBatch, ColumnarVersion)
		}
		wireBody = ub.EventColumns
	}
	declared := int(ub.UncompressedBytes)

	var body []byte
	switch ub.ContentEncoding {
	case shipsyncpb.ContentEncoding_CONTENT_ENCODING_IDENTITY:
		body = wireBody
	case shipsyncpb.ContentEncoding_CONTENT_ENCODING_ZSTD:
		body, err = c.dec.DecodeAll(wireBody, make([]byte, 0, declared))
		switch {
		case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
			return nil, fmt.Errorf("wire: decode batch: %w: over %d bytes", ErrDecompressedTooLarge, c.cfg.MaxBytes)
		case err != nil:
			return nil, fmt.Errorf("wire: decode batch: %w: zstd: %w", ErrBadCompression, err)
		case len(body) > declared:
			return nil, fmt.Errorf("wire: decode batch: %w: %d bytes, declared %d", ErrDecompressedTooLarge, len(body), declared)
		}
	default:
		return nil, fmt.Errorf("wire: decode batch: %w: content_encoding %d", ErrBadCompression, ub.ContentEncoding)
	}
	if len(body) != declared {
		return nil, fmt.Errorf("wire: decode batch: %w: body %d bytes, declared %d", ErrChecksumMismatch, len(body), declared)
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], ub.Checksum) {
		return nil, fmt.Errorf("wire: decode batch: %w: SHA-256 differs", ErrChecksumMismatch)
	}
	var events []*shipsyncpb.ChangeEvent
	if columns {
		if events, err = decodeColumns(body, int(ub.EventCount), c.cfg.MaxBytes); err != nil {
			return nil, fmt.Errorf("wire: decode batch: %w", err)
		}
	} else {
		var list shipsyncpb.EventList
		if err := proto.Unmarshal(body, &list); err != nil {
			return nil, fmt.Errorf("wire: decode batch: %w: events_body is not an EventList", ErrMalformedBatch)
		}
		if len(list.Events) != int(ub.EventCount) {
			return nil, fmt.Errorf("wire: decode batch: %w: %d events, declared %d", ErrChecksumMismatch, len(list.Events), ub.EventCount)
		}
		events = list.Events
	}
	return &Batch{
		ProtocolVersion:   ub.ProtocolVersion,
		NodeID:            ub.NodeId,
		BatchID:           ub.BatchId,
		Sequence:          ub.Sequence,
		CreatedAt:         ub.CreatedAt.AsTime(),
		Events:            events,
		Encoding:          ub.ContentEncoding,
		UncompressedBytes: declared,
		Columns:           columns,
	}, nil
}

// checkHeader checks the header fields Encode and Decode share.
func (c *Codec) checkHeader(nodeID, batchID string, sequence uint64, events int) error {
	if p := checkIdent(nodeID); p != "" {
		return fmt.Errorf("%w: node_id %s", ErrMalformedBatch, p)
	}
	if !isUUID(batchID) {
		return fmt.Errorf("%w: batch_id is not a UUID", ErrMalformedBatch)
	}
	if sequence == 0 {
		return fmt.Errorf("%w: sequence missing", ErrMalformedBatch)
	}
	if events == 0 {
		return fmt.Errorf("%w: no events", ErrMalformedBatch)
	}
	if events > c.cfg.MaxEvents {
		return fmt.Errorf("%w: %d > %d", ErrTooManyEvents, events, c.cfg.MaxEvents)
	}
	return nil
}

// Answer bodies (upload answers, receipt pages) travel zstd-compressed when
// the client asks for it with Accept-Encoding: zstd and the body is at least
// AnswerCompressMin bytes.
const (
	EncodingZstd      = "zstd"
	AnswerCompressMin = 1 << 10
)

// CompressAnswer returns b zstd-compressed.
func (c *Codec) CompressAnswer(b []byte) []byte { return c.enc.EncodeAll(b, nil) }

// DecompressAnswer decompresses an answer body of at most limit bytes
// once decompressed.
func (c *Codec) DecompressAnswer(b []byte, limit int) ([]byte, error) {
	out, err := c.dec.DecodeAll(b, nil)
	switch {
	case err != nil:
		return nil, fmt.Errorf("wire: answer: %w: zstd: %w", ErrBadCompression, err)
	case len(out) > limit:
		return nil, fmt.Errorf("wire: answer: %w: over %d bytes", ErrDecompressedTooLarge, limit)
	}
	return out, nil
}
