package client

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
)

// BenchmarkStoreLifecycle measures what the state store costs per event
// over its life on the ship: read (insert), received (the upload's answer)
// and terminal (its receipt), in batches of 500 as the client writes them,
// on a store already holding earlier events. Reports events/s.
func BenchmarkStoreLifecycle(b *testing.B) {
	ctx := context.Background()
	st, err := OpenStore(ctx, filepath.Join(b.TempDir(), "state.db"), "g", relayclock.System{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Close() })
	tp := TP{Topic: "sync.cdc.bench.ship.tank", Partition: 0}
	const batch = 500
	off := int64(0)
	id := func(n int64) string { // random-looking, like the normaliser's v5 ids
		return uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "event-%d", n)).String()
	}
	round := func() {
		evs := make([]newEvent, batch)
		ids := make([]string, batch)
		ts := make([]terminal, batch)
		at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
		for i := range evs {
			ids[i] = id(off + int64(i))
			evs[i] = newEvent{ID: ids[i], TP: tp, Offset: off + int64(i), Seq: uint64(off + int64(i) + 1), RuleID: "tank",
				RuleVersion: 1, Priority: 2, State: StateReady, RawBytes: 290, BusinessAt: at, CapturedAt: at}
			ts[i] = terminal{ID: ids[i], Result: "APPLIED"}
		}
		off += batch
		w := []Watermark{{TP: tp, ReadNext: off, ReceivedNext: off - batch, TerminalNext: off - batch, NextSeq: uint64(off + 1)}}
		require.NoError(b, st.recordRead(ctx, evs, w))
		require.NoError(b, st.recordSent(ctx, sendResult{Received: ids}, uint64(off/batch), w))
		_, err := st.recordTerminal(ctx, ts, fmt.Sprint(off), w)
		require.NoError(b, err)
	}
	for range 100 { // 50,000 events already there
		round()
	}
	b.ResetTimer()
	for b.Loop() {
		round()
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
}
