package client

import (
	"fmt"
	"runtime"
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

// eventID returns a UUID-shaped event id numbered n, as the normaliser
// writes them (lower-case canonical text).
func eventID(n int) string {
	return fmt.Sprintf("%08x-0000-5000-8000-%012x", n, n)
}

func TestReceivedEventsWaitCompactlyForTheirReceipts(t *testing.T) {
	tr := newTracker()
	tp := TP{"t", 0}
	p := tr.part(tp, nil, 0)
	var ss []*slot
	for off := range 6 {
		s := readySlot(tp, int64(off), eventID(off), 2)
		ss = append(ss, s)
		tr.add(p, s)
	}
	// 0 waits for a retry while 1-5 are received: 0 stays in full, with
	// its payload; the others are let go.
	ss[0].state = StateRetryWait
	tr.receivedAll(ss[1:])
	if len(tr.byID) != 1 || len(tr.acked) != 5 || len(p.pending) != 1 || tr.held != 100 {
		t.Fatalf("after receiving 1-5: %d in full, %d compact, %d pending, held %d; want 1, 5, 1, 100",
			len(tr.byID), len(tr.acked), len(p.pending), tr.held)
	}
	if p.wm.ReceivedNext != 0 || p.wm.TerminalNext != 0 || tr.tracked() != 6 {
		t.Fatalf("checkpoints %+v tracked %d; want both at 0 (0 not received), 6 tracked", p.wm, tr.tracked())
	}
	// 0 is received after the later offsets: it is kept in offset order.
	tr.received(ss[0])
	if len(p.pending) != 0 || p.wm.ReceivedNext != 6 || len(tr.byID) != 0 {
		t.Fatalf("after receiving 0: %d pending, %+v, %d in full", len(p.pending), p.wm, len(tr.byID))
	}
	for i, e := range p.acked {
		if e != int64(i) {
			t.Fatalf("acked %v, want offsets 0-5 in order", p.acked)
		}
	}
	// Receipts out of order: the checkpoint moves only over a contiguous run.
	for _, off := range []int{2, 1, 4} {
		if !tr.terminal(eventID(off)) {
			t.Fatalf("receipt of %d not matched", off)
		}
	}
	if p.wm.TerminalNext != 0 {
		t.Fatalf("terminal checkpoint %d before 0's receipt", p.wm.TerminalNext)
	}
	tr.terminal(eventID(0))
	if p.wm.TerminalNext != 3 || tr.tracked() != 2 {
		t.Fatalf("terminal checkpoint %d tracked %d, want 3 and 2", p.wm.TerminalNext, tr.tracked())
	}
	if tr.terminal(eventID(0)) || tr.terminal(eventID(99)) {
		t.Fatal("a repeated or unknown receipt matched")
	}
	tr.terminal(eventID(5))
	tr.terminal(eventID(3))
	if p.wm.TerminalNext != 6 || tr.tracked() != 0 || len(tr.acked) != 0 || p.acked != nil {
		t.Fatalf("all terminal: %+v tracked %d index %d list %v", p.wm, tr.tracked(), len(tr.acked), p.acked)
	}
}

func TestReceivedAfterRestartIsTrackedCompactly(t *testing.T) {
	tr := newTracker()
	tp := TP{"t", 0}
	p := tr.part(tp, map[TP]Watermark{tp: {TP: tp, ReadNext: 3, ReceivedNext: 2, TerminalNext: 0, NextSeq: 4}}, 0)
	// Re-read from the topic: 0 and 1 the store says RECEIVED, 2 READY.
	tr.add(p, &slot{tp: tp, off: 0, id: eventID(0), state: StateReceived})
	tr.add(p, &slot{tp: tp, off: 1, id: eventID(1), state: StateReceived})
	tr.add(p, readySlot(tp, 2, eventID(2), 2))
	if len(tr.acked) != 2 || len(tr.byID) != 1 || p.wm.ReceivedNext != 2 || p.wm.TerminalNext != 0 {
		t.Fatalf("restart: %d compact, %d full, %+v", len(tr.acked), len(tr.byID), p.wm)
	}
	tr.terminal(eventID(0))
	tr.terminal(eventID(1))
	if p.wm.TerminalNext != 2 {
		t.Fatalf("terminal checkpoint %d, want 2", p.wm.TerminalNext)
	}
}

func TestReadingPausesAtTheBoundsAndResumes(t *testing.T) {
	tr := newTracker()
	bulk, crit := TP{"bulk", 0}, TP{"crit", 0}
	pb, pc := tr.part(bulk, nil, 0), tr.part(crit, nil, 0)
	b := bounds{window: 100, held: 1 << 20, tracked: 17}
	alarm := readySlot(crit, 0, eventID(1000), 0)
	tr.add(pc, alarm)
	var ss []*slot
	for off := range 15 {
		s := readySlot(bulk, int64(off), eventID(off), 3)
		ss = append(ss, s)
		tr.add(pb, s)
	}
	if pause, resume := tr.flow(b); len(pause)+len(resume) != 0 {
		t.Fatalf("under every bound: pause %v resume %v", pause, resume)
	}
	tr.receivedAll(ss)
	s := readySlot(bulk, 15, eventID(15), 3)
	tr.add(pb, s)
	// 17 tracked: the partition holding them pauses; the CRITICAL one,
	// holding less than its share, reads on.
	pause, _ := tr.flow(b)
	if len(pause) != 1 || pause[0] != bulk || pc.pause != 0 {
		t.Fatalf("at the tracked bound: pause %v (crit %b), want bulk alone", pause, pc.pause)
	}
	// Receipts of compact entries: 15 tracked is not yet below 17 - 17/8.
	tr.terminal(eventID(0))
	tr.terminal(eventID(1))
	if pause, resume := tr.flow(b); len(pause)+len(resume) != 0 {
		t.Fatalf("15 tracked: pause %v resume %v, want nothing (no flapping)", pause, resume)
	}
	tr.terminal(eventID(2))
	if _, resume := tr.flow(b); len(resume) != 1 || resume[0] != bulk {
		t.Fatalf("14 tracked: resume %v, want bulk", resume)
	}
	if pb.wm.TerminalNext != 3 {
		t.Fatalf("terminal checkpoint %d, want 3", pb.wm.TerminalNext)
	}

	// A partition's own window, and the payload bytes held, pause it too;
	// it resumes only when no reason is left.
	b = bounds{window: 12, held: 200, tracked: 1000}
	pause, _ = tr.flow(b)
	if len(pause) != 2 || pb.pause != pauseWindow|pauseHeld|pauseAhead || pc.pause != pauseHeld|pauseAhead {
		t.Fatalf("window and held: pause %v (bulk %b, crit %b)", pause, pb.pause, pc.pause)
	}
	tr.receivedAll([]*slot{s, alarm})
	if _, resume := tr.flow(b); len(resume) != 1 || resume[0] != crit || pb.pause != pauseWindow || pc.pause != 0 {
		t.Fatalf("payloads let go: resume %v, want crit alone (bulk %b crit %b)", resume, pb.pause, pc.pause)
	}
	for off := 3; off < 10; off++ {
		tr.terminal(eventID(off))
	}
	if _, resume := tr.flow(b); len(resume) != 0 {
		t.Fatalf("bulk at 6 of its window of 12: resume %v", resume)
	}
	for off := 10; off < 11; off++ {
		tr.terminal(eventID(off))
	}
	if _, resume := tr.flow(b); len(resume) != 1 || resume[0] != bulk {
		t.Fatalf("bulk below half its window: resume %v, bulk %b", resume, pb.pause)
	}
}

// TestCompactEntryMemory measures what one received event costs while it
// waits for its receipt (the index entry and the offset), after its full
// slot and payload were let go.
func TestCompactEntryMemory(t *testing.T) {
	const n = 200_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr := newTracker()
	tps := []TP{{"bulk", 0}, {"bulk", 1}, {"bulk", 2}, {"bulk", 3}}
	batch := make([]*slot, 0, 500)
	for i := range n {
		tp := tps[i%len(tps)]
		s := &slot{tp: tp, off: int64(i / len(tps)), id: eventID(i), state: StateReady, raw: 80}
		tr.add(tr.part(tp, nil, 0), s)
		batch = append(batch, s)
		if len(batch) == cap(batch) {
			tr.receivedAll(batch)
			batch = batch[:0]
		}
	}
	if tr.tracked() != n || len(tr.acked) != n || len(tr.byID) != 0 {
		t.Fatalf("tracked %d, compact %d, full %d", tr.tracked(), len(tr.acked), len(tr.byID))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	runtime.KeepAlive(tr)
	t.Logf("%.1f B of heap per received event waiting for its receipt (%d events)", per, n)
	if per > 64 {
		t.Fatalf("%.1f B per compact entry, want at most 64", per)
	}
}

// TestReadingPausesAheadOfUploads: a partition holding a quarter of the
// payload bound pauses even while the client holds less than the bound,
// and resumes below an eighth, so the fetches serve the other partitions.
func TestReadingPausesAheadOfUploads(t *testing.T) {
	tr := newTracker()
	bulk, crit := TP{"bulk", 0}, TP{"crit", 0}
	pb, pc := tr.part(bulk, nil, 0), tr.part(crit, nil, 0)
	b := bounds{window: 1000, held: 1600, tracked: 1000}
	var ss []*slot
	for off := range 4 {
		s := readySlot(bulk, int64(off), eventID(off), 3)
		ss = append(ss, s)
		tr.add(pb, s)
	}
	tr.add(pc, readySlot(crit, 0, eventID(100), 0))
	pause, _ := tr.flow(b)
	if len(pause) != 1 || pause[0] != bulk || pb.pause != pauseAhead || pc.pause != 0 {
		t.Fatalf("400 B of 1600 held by bulk: pause %v (bulk %b, crit %b), want bulk ahead", pause, pb.pause, pc.pause)
	}
	tr.receivedAll(ss[:2])
	if pause, resume := tr.flow(b); len(pause)+len(resume) != 0 {
		t.Fatalf("200 B held: pause %v resume %v, want nothing until below an eighth", pause, resume)
	}
	tr.received(ss[2])
	if _, resume := tr.flow(b); len(resume) != 1 || resume[0] != bulk {
		t.Fatalf("100 B held: resume %v, want bulk", resume)
	}
}
