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
