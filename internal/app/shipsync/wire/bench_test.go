package wire_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
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
// list before compression) and the time to encode and decode the batch.
func BenchmarkNarrowUpdates(b *testing.B) {
	c := newCodec(b, wire.Config{})
	// rows=steady: the helper's keys and levels, which step by constant
	// amounts (the delta coding's best case); rows=random: keys of 50,000
	// rows and levels drawn at random, like the weak-link bench's updates.
	steady := narrowUpdates(wire.MaxEventsDefault)
	random := narrowUpdates(wire.MaxEventsDefault)
	r := rand.New(rand.NewPCG(4, 2))
	for _, ev := range random {
		ev.PrimaryKey[0].Value = &pb.ColumnValue_IntValue{IntValue: r.Int64N(50000)}
		ev.After = &pb.RowImage{Columns: []*pb.ColumnValue{ev.PrimaryKey[0],
			{Name: "level", Value: &pb.ColumnValue_IntValue{IntValue: r.Int64N(100000)}}, ev.After.Columns[2]}}
		ev.Before = &pb.RowImage{Columns: []*pb.ColumnValue{ev.PrimaryKey[0],
			{Name: "level", Value: &pb.ColumnValue_IntValue{IntValue: r.Int64N(100000)}}, ev.After.Columns[2]}}
	}
	for _, v := range []string{"1.0", wire.ColumnarVersion.String()} {
		benchNarrow(b, c, v, "steady", steady)
		benchNarrow(b, c, v, "random", random)
	}
}

func benchNarrow(b *testing.B, c *wire.Codec, v, rows string, evs []*pb.ChangeEvent) {
	b.Run("protocol="+v+"/rows="+rows, func(b *testing.B) {
		batch := newBatch(evs)
		batch.ProtocolVersion = v
		data, err := c.Encode(batch)
		require.NoError(b, err)
		b.Run("encode", func(b *testing.B) {
			for b.Loop() {
				if _, err := c.Encode(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data))/float64(len(evs)), "B/event")
			b.ReportMetric(float64(batch.UncompressedBytes)/float64(len(evs)), "raw-B/event")
		})
		b.Run("decode", func(b *testing.B) {
			for b.Loop() {
				if _, err := c.Decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
