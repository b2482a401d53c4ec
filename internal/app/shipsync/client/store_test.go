package client

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/relayhq/relay/relayclock"
)

func TestStoreRecordsReadEventsAndBlocked(t *testing.T) {
	ctx := t.Context()
	clock := relayclock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	st, err := OpenStore(ctx, filepath.Join(t.TempDir(), "state.db"), "g", clock)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tp := TP{"sync.cdc.x.db.t", 1}
	evs := []newEvent{
		{ID: "e1", TP: tp, Offset: 7, Seq: 1, RuleID: "t", RuleVersion: 1, Priority: 2, State: StateReady, RawBytes: 90,
			CapturedAt: clock.Now()},
		{ID: "raw:sync.cdc.x.db.t/1@8", TP: tp, Offset: 8, State: StateBlocked, Reason: "undecodable: value: not JSON",
			RawBytes: 12, CapturedAt: clock.Now()},
	}
	mark := Watermark{TP: tp, ReadNext: 9, ReceivedNext: 7, TerminalNext: 7, NextSeq: 2}
	if err := st.recordRead(ctx, evs, []Watermark{mark}); err != nil {
		t.Fatal(err)
	}
	// Recording the same events again (a replay after a crash) changes nothing.
	if err := st.recordRead(ctx, evs, []Watermark{mark}); err != nil {
		t.Fatal(err)
	}
	marks, err := st.Watermarks(ctx)
	if err != nil || marks[tp] != mark {
		t.Fatalf("watermarks %v, %v; want %v", marks, err, mark)
	}
	states, err := st.eventStates(ctx, []string{"e1", "nope"})
	if err != nil || len(states) != 1 || states["e1"] != (known{Seq: 1, State: StateReady}) {
		t.Fatalf("event states %v, %v", states, err)
	}
	bs, err := st.Blocked(ctx, 10)
	if err != nil || len(bs) != 1 || bs[0].Offset != 8 || bs[0].Reason != "undecodable: value: not JSON" {
		t.Fatalf("blocked %+v, %v", bs, err)
	}
	if err := st.recordSent(ctx, sendResult{Received: []string{"e1"}}, 3, nil); err != nil {
		t.Fatal(err)
	}
	n, err := st.recordTerminal(ctx, []terminal{{ID: "e1", Result: "APPLIED"}, {ID: "e1", Result: "APPLIED"},
		{ID: "unknown", Result: "APPLIED"}}, "cursor-1", nil)
	if err != nil || n != 1 {
		t.Fatalf("recordTerminal changed %d (%v), want 1: a repeated or unknown receipt changes nothing", n, err)
	}
	if c, _ := st.meta(ctx, metaReceiptCursor); c != "cursor-1" {
		t.Fatalf("receipt cursor %q", c)
	}
	counts, err := st.Counts(ctx)
	if err != nil || counts.ByResult["APPLIED"] != 1 || counts.ByState[StateBlocked] != 1 {
		t.Fatalf("counts %+v, %v", counts, err)
	}
}
