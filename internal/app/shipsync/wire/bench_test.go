package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// BenchmarkBatch measures a full batch of 500 events (zstd) through Encode,
// Decode and ValidateEvent, reporting events/s and the compression ratio.
func BenchmarkBatch(b *testing.B) {
	c := newCodec(b, wire.Config{})
	batch := newBatch(events(wire.MaxEventsDefault))
	data, err := c.Encode(batch)
	require.NoError(b, err)
	b.ReportMetric(float64(batch.UncompressedBytes)/float64(len(data)), "ratio")

	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(batch.UncompressedBytes))
		for b.Loop() {
			if _, err := c.Encode(batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*wire.MaxEventsDefault)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("decode+validate", func(b *testing.B) {
		b.SetBytes(int64(batch.UncompressedBytes))
		for b.Loop() {
			out, err := c.Decode(data)
			if err != nil {
				b.Fatal(err)
			}
			for _, ev := range out.Events {
				if err := c.ValidateEvent(ev); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.N*wire.MaxEventsDefault)/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkNarrowUpdates encodes a full batch of the typical weak-link
// event — an UPDATE of a narrow row (id, an integer, a short text) with
// its before image, time-based revisions as MariaDB's UUID() writes them
// and a trace id derived from the event id — in both forms of the event
// list (rows: protocol 1.0; columns: 1.1) and reports the bytes per event
// on the wire (B/event: the whole UploadBatch body; raw-B/event: the event
// list before compression).
func BenchmarkNarrowUpdates(b *testing.B) {
	c := newCodec(b, wire.Config{})
	evs := narrowUpdates(wire.MaxEventsDefault)
	for _, v := range []string{"1.0", wire.ColumnarVersion.String()} {
		b.Run("protocol="+v, func(b *testing.B) {
			batch := newBatch(evs)
			batch.ProtocolVersion = v
			var data []byte
			for b.Loop() {
				var err error
				if data, err = c.Encode(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data))/float64(len(evs)), "B/event")
			b.ReportMetric(float64(batch.UncompressedBytes)/float64(len(evs)), "raw-B/event")
		})
	}
}
