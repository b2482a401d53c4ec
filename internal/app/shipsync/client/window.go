package client

import (
	"slices"
	"time"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// stateInFlight marks a slot in the batch being uploaded (memory only).
const stateInFlight = "IN_FLIGHT"

// slot is one produced event the client still tracks in memory: read from
// the topic and not yet terminal. Its payload is kept only until the shore
// has received it.
type slot struct {
	tp       TP
	off      int64
	id       string
	seq      uint64
	state    string
	reason   string
	ev       *pb.ChangeEvent // nil once received
	priority int
	raw      int
	attempts int

	ruleID      string
	ruleVersion uint64
}

func (s *slot) waiting() bool {
	return s.state == StateReady || s.state == StateRetryWait || s.state == stateInFlight
}

// partition is one topic partition's window: the slots in
// [TerminalNext, ReadNext) that are not terminal, in offset order (an
// offset in that range without a slot needed nothing or is terminal). The
// slots waiting to be uploaded are in the client's scheduler, one lane per
// partition, in sequence order.
type partition struct {
	wm      Watermark
	pending []*slot
	open    int // pending slots not terminal
	paused  bool
	dirty   bool // wm changed since last saved
	// inFlight: batches of the partition being uploaded (at most
	// Config.LaneInFlight at once; the shore holds a batch that overtook
	// an earlier one until the earlier one arrives),
	// so a stream's batches reach the shore in order); notBefore: the head
	// of its queue waits for a retry.
	inFlight  int
	notBefore time.Time
	// held is the raw size of this partition's payloads in memory;
	// heldPaused: reading it is paused because the client holds too much.
	held       int64
	heldPaused bool
}

// tracker holds every partition's window. It is not safe for concurrent
// use; the client guards it with one mutex.
type tracker struct {
	parts map[TP]*partition
	byID  map[string]*slot
	// held is the raw size of the payloads kept in memory (slots not yet
	// received by the shore).
	held  int64
	order []TP // partitions in first-seen order
}

func newTracker() *tracker {
	return &tracker{parts: map[TP]*partition{}, byID: map[string]*slot{}}
}

// part returns tp's window, creating it from wm (or from offset start when
// the partition has no saved watermark).
func (t *tracker) part(tp TP, saved map[TP]Watermark, start int64) *partition {
	if p := t.parts[tp]; p != nil {
		return p
	}
	wm, ok := saved[tp]
	if !ok {
		wm = Watermark{TP: tp, ReadNext: start, ReceivedNext: start, TerminalNext: start, NextSeq: 1}
	}
	// Reading restarts at the consumer group's committed offset, which may
	// be behind the saved terminal checkpoint (the commit is made after the
	// checkpoint is saved): ReadNext goes back to where reading resumes, the
	// offsets between are known to be terminal.
	if start > wm.TerminalNext {
		wm.TerminalNext, wm.ReceivedNext = start, start
	}
	wm.ReadNext = max(start, wm.TerminalNext)
	p := &partition{wm: wm}
	t.parts[tp] = p
	t.order = append(t.order, tp)
	return p
}

// read records that offset off of p was read and needed no event (or its
// event is terminal already).
func (p *partition) read(off int64) {
	if off+1 > p.wm.ReadNext {
		p.wm.ReadNext = off + 1
		p.dirty = true
	}
	p.settle()
}

// add tracks s (read at s.off, not terminal).
func (t *tracker) add(p *partition, s *slot) {
	p.pending = append(p.pending, s)
	p.open++
	t.byID[s.id] = s
	if s.ev != nil {
		t.held += int64(s.raw)
		p.held += int64(s.raw)
	}
	p.read(s.off)
}

// settle drops the terminal prefix and recomputes the received and
// terminal checkpoints.
func (p *partition) settle() {
	i := 0
	for i < len(p.pending) && p.pending[i].state == StateTerminal {
		i++
	}
	if i > 0 {
		p.pending = slices.Delete(p.pending, 0, i)
	}
	term := p.wm.ReadNext
	if len(p.pending) > 0 {
		term = p.pending[0].off
	}
	recv := p.wm.ReadNext
	for _, s := range p.pending {
		if s.waiting() || s.state == StateBlocked {
			recv = s.off
			break
		}
	}
	if term != p.wm.TerminalNext || recv != p.wm.ReceivedNext {
		p.wm.TerminalNext, p.wm.ReceivedNext = term, recv
		p.dirty = true
	}
}

// terminal marks event id terminal; it reports whether it was tracked.
func (t *tracker) terminal(id string) bool {
	s := t.byID[id]
	if s == nil {
		return false
	}
	delete(t.byID, id)
	p := t.parts[s.tp]
	if s.state != StateTerminal {
		p.open--
	}
	t.drop(s)
	s.state = StateTerminal
	p.settle()
	return true
}

// received marks s received by the shore.
func (t *tracker) received(s *slot) {
	if !s.waiting() {
		return
	}
	p := t.parts[s.tp]
	t.drop(s)
	s.state, s.reason = StateReceived, ""
	p.settle()
}

// blocked marks s blocked (it stays in the window and holds the terminal
// checkpoint until an operator resolves it).
func (t *tracker) blocked(s *slot, reason string) {
	p := t.parts[s.tp]
	t.drop(s)
	s.state, s.reason = StateBlocked, reason
	p.settle()
}

// drop lets go of s's payload.
func (t *tracker) drop(s *slot) {
	if s.ev != nil {
		t.held -= int64(s.raw)
		t.parts[s.tp].held -= int64(s.raw)
		s.ev = nil
	}
}

// unsent returns the slots of a failed upload to READY.
func unsent(batch []*slot) {
	for _, s := range batch {
		if s.state == stateInFlight {
			s.state = StateReady
		}
	}
}

// dirtyMarks returns the watermarks changed since the last call.
func (t *tracker) dirtyMarks() []Watermark {
	var out []Watermark
	for _, tp := range t.order {
		if p := t.parts[tp]; p.dirty {
			out = append(out, p.wm)
			p.dirty = false
		}
	}
	return out
}
