package client

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
)

// BenchmarkStoreLifecycle measures what the state store costs per event
// over its life on the ship: read (insert), received (the upload's answer)
// and terminal (its receipt), in batches of 500 as the client writes them,
// on a store already holding earlier events (50,000 written the same way;
// a million final ones inserted directly, as a long drain leaves them).
// Reports events/s.
func BenchmarkStoreLifecycle(b *testing.B) {
	b.Run("existing=50k", func(b *testing.B) { benchStoreLifecycle(b, 0) })
	b.Run("existing=1M", func(b *testing.B) { benchStoreLifecycle(b, 1_000_000) })
}

func benchStoreLifecycle(b *testing.B, terminalRows int) {
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
	if terminalRows > 0 {
		// Random ids in the normaliser's text form, each already final.
		_, err := st.db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?),
			r(i, h) AS (SELECT i, lower(hex(randomblob(16))) FROM n)
			INSERT INTO event_state (event_id, direction, topic, part, off, seq, rule_id, rule_version, priority, state,
				result, raw_bytes, captured_at, created_at, updated_at)
			SELECT substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-' || substr(h, 13, 4) || '-' || substr(h, 17, 4) || '-' ||
				substr(h, 21), 'up', 'sync.cdc.bench.ship.old', 0, i, i, 'tank', 1, 2, 'TERMINAL', 'APPLIED', 290, 0, 0, 0 FROM r`,
			terminalRows)
		require.NoError(b, err)
	}
	for range 100 { // 50,000 events already there
		round()
	}
	cpu0 := processCPU(b)
	b.ResetTimer()
	for b.Loop() {
		round()
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
	// The process's CPU time per event: what the store costs whatever else
	// the shared machine runs.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N*batch), "cpu-µs/event")
}

// processCPU is this process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
