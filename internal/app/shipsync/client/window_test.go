package client

import (
	"testing"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

func readySlot(tp TP, off int64, id string, prio int) *slot {
	return &slot{tp: tp, off: off, id: id, state: StateReady, ev: &pb.ChangeEvent{EventId: id}, priority: prio, raw: 100}
}

func TestCheckpointsAdvanceOnlyOverContiguousTerminal(t *testing.T) {
	tr := newTracker()
	tp := TP{"sync.cdc.x.db.t", 0}
	p := tr.part(tp, nil, 10)
	// Offsets 10 (skipped), 11, 12, 13 (skipped), 14.
	p.read(10)
	for _, off := range []int64{11, 12} {
		tr.add(p, readySlot(tp, off, string(rune('a'+off)), 2))
	}
	p.read(13)
	tr.add(p, readySlot(tp, 14, "o", 2))
	if got := p.wm; got.ReadNext != 15 || got.TerminalNext != 11 || got.ReceivedNext != 11 {
		t.Fatalf("after read: %+v, want read 15 terminal 11 received 11", got)
	}
	tr.received(tr.byID["m"])
	if p.wm.ReceivedNext != 11 {
		t.Fatalf("received 12 before 11 moved the received checkpoint to %d", p.wm.ReceivedNext)
	}
	tr.received(tr.byID["l"])
	if p.wm.ReceivedNext != 14 {
		t.Fatalf("received checkpoint %d, want 14 (13 needed nothing)", p.wm.ReceivedNext)
	}
	tr.terminal("m")
	if p.wm.TerminalNext != 11 {
		t.Fatalf("terminal 12 before 11 moved the terminal checkpoint to %d", p.wm.TerminalNext)
	}
	tr.terminal("l")
	if p.wm.TerminalNext != 14 {
		t.Fatalf("terminal checkpoint %d, want 14", p.wm.TerminalNext)
	}
	tr.received(tr.byID["o"])
	tr.terminal("o")
	if p.wm.TerminalNext != 15 || p.open != 0 || len(tr.byID) != 0 {
		t.Fatalf("all terminal: %+v open %d tracked %d", p.wm, p.open, len(tr.byID))
	}
}

func TestBlockedEventHoldsTheTerminalCheckpoint(t *testing.T) {
	tr := newTracker()
	tp := TP{"t", 0}
	p := tr.part(tp, nil, 0)
	tr.add(p, &slot{tp: tp, off: 0, id: "bad", state: StateBlocked, reason: "undecodable"})
	tr.add(p, readySlot(tp, 1, "good", 2))
	tr.received(tr.byID["good"])
	tr.terminal("good")
	if p.wm.TerminalNext != 0 || p.wm.ReceivedNext != 0 {
		t.Fatalf("a blocked event at 0 must hold both checkpoints: %+v", p.wm)
	}
	if p.wm.ReadNext != 2 {
		t.Fatalf("reading must go on past a blocked event: read %d", p.wm.ReadNext)
	}
}

func TestRestartResumesAtSavedCheckpoint(t *testing.T) {
	tr := newTracker()
	tp := TP{"t", 3}
	saved := map[TP]Watermark{tp: {TP: tp, ReadNext: 50, ReceivedNext: 45, TerminalNext: 40, NextSeq: 31}}
	// The group committed 35 (a commit after the checkpoint was lost).
	p := tr.part(tp, saved, 35)
	if p.wm.ReadNext != 40 || p.wm.TerminalNext != 40 || p.wm.NextSeq != 31 {
		t.Fatalf("resume: %+v, want reading from the terminal checkpoint 40 and sequence 31", p.wm)
	}
	// The group committed past the checkpoint (saved state older than the
	// commit cannot happen, but must not move reading backwards).
	tr2 := newTracker()
	p2 := tr2.part(tp, saved, 42)
	if p2.wm.ReadNext != 42 || p2.wm.TerminalNext != 42 {
		t.Fatalf("resume past checkpoint: %+v", p2.wm)
	}
}

func TestHeldBytesCountPayloadsUntilReceived(t *testing.T) {
	tr := newTracker()
	a, b := TP{"a", 0}, TP{"b", 0}
	pa, pb := tr.part(a, nil, 0), tr.part(b, nil, 0)
	tr.add(pa, readySlot(a, 0, "a0", 1))
	tr.add(pa, readySlot(a, 1, "a1", 1))
	tr.add(pb, readySlot(b, 0, "b0", 4))
	if tr.held != 300 || pa.held != 200 || pb.held != 100 {
		t.Fatalf("held %d (a %d, b %d), want 300 (200, 100)", tr.held, pa.held, pb.held)
	}
	tr.received(tr.byID["a0"])
	tr.blocked(tr.byID["a1"], "x")
	tr.terminal("b0")
	if tr.held != 0 || pa.held != 0 || pb.held != 0 {
		t.Fatalf("held %d (a %d, b %d) after every payload was let go", tr.held, pa.held, pb.held)
	}
	tr.terminal("a0") // received earlier: nothing held any more
	if tr.held != 0 {
		t.Fatalf("held %d went negative or stayed", tr.held)
	}
}
