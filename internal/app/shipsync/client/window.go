package client

import (
	"cmp"
	"slices"
	"time"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// stateInFlight marks a slot in the batch being uploaded (memory only).
const stateInFlight = "IN_FLIGHT"

// slot is one produced event the client still tracks in full: read from
// the topic and not yet received by the shore (or blocked). Its payload
// is kept until the shore has received it; from then on the event is
// tracked compactly (see partition.acked) until its receipt.
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

// Reasons a partition's reading is paused (partition.pause).
const (
	pauseWindow  uint8 = 1 << iota // the partition's own window is full
	pauseHeld                      // the client holds too many payload bytes
	pauseTracked                   // the client tracks too many events
	pauseAhead                     // the partition holds a quarter of the payload bound
)

// partition is one topic partition's window: the events in
// [TerminalNext, ReadNext) that are not terminal, in offset order (an
// offset in that range that is in neither list needed nothing or is
// terminal). Events not yet received (or blocked) are full slots in
// pending; events the shore received wait for their receipt as offsets
// in acked, their ids in the tracker's acked index: the shore's inbox is
// durable, so the ship needs only to match the receipt and move the
// checkpoint, never the payload (a restart re-reads it from the topic
// and finds the event RECEIVED in the store). The slots waiting to be
// uploaded are in the client's scheduler, one lane per partition, in
// sequence order.
type partition struct {
	idx     int // in tracker.order
	wm      Watermark
	pending []*slot
	// acked: offsets of received events not yet terminal, ascending; a
	// terminal one is stored as -1-offset until the prefix before it is
	// dropped.
	acked []int64
	open  int   // events not terminal: in pending and live in acked
	pause uint8 // why reading it is paused (pause* bits); 0: reading
	moved bool  // pending has received slots to move to acked
	dirty bool  // wm changed since last saved
	// inFlight: batches of the partition being uploaded (at most
	// Config.LaneInFlight at once; the shore holds a batch that overtook
	// an earlier one until the earlier one arrives),
	// so a stream's batches reach the shore in order); notBefore: the head
	// of its queue waits for a retry.
	inFlight  int
	notBefore time.Time
	// held is the raw size of this partition's payloads in memory.
	held int64
}

// ackedOffset returns the offset of an acked entry, terminal or not.
func ackedOffset(e int64) int64 {
	if e < 0 {
		return -1 - e
	}
	return e
}

// tracker holds every partition's window. It is not safe for concurrent
// use; the client guards it with one mutex.
type tracker struct {
	parts map[TP]*partition
	byID  map[string]*slot
	// acked indexes the received events not yet terminal by id: the
	// partition's index in order (high 16 bits) and the offset (low 48
	// bits). An id that is not a UUID (never the case for a normalised
	// event) is in ackedText instead.
	acked     map[[16]byte]uint64
	ackedText map[string]uint64
	// held is the raw size of the payloads kept in memory (slots not yet
	// received by the shore); open counts the events not terminal.
	held  int64
	open  int
	order []TP // partitions in first-seen order
	list  []*partition
}

const ackedOffBits = 48

func newTracker() *tracker {
	return &tracker{parts: map[TP]*partition{}, byID: map[string]*slot{}, acked: map[[16]byte]uint64{},
		ackedText: map[string]uint64{}}
}

// tracked returns how many events are not terminal.
func (t *tracker) tracked() int { return t.open }

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
	p := &partition{idx: len(t.order), wm: wm}
	t.parts[tp] = p
	t.order = append(t.order, tp)
	t.list = append(t.list, p)
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

// add tracks s (read at s.off, not terminal). A slot already received
// (read again after a restart) is tracked compactly at once.
func (t *tracker) add(p *partition, s *slot) {
	p.open++
	t.open++
	if s.state == StateReceived {
		t.compact(p, s)
	} else {
		p.pending = append(p.pending, s)
		t.byID[s.id] = s
		if s.ev != nil {
			t.held += int64(s.raw)
			p.held += int64(s.raw)
		}
	}
	p.read(s.off)
}

// compact tracks received slot s of p by its id and offset alone.
func (t *tracker) compact(p *partition, s *slot) {
	delete(t.byID, s.id)
	ref := uint64(p.idx)<<ackedOffBits | uint64(s.off)
	if u, ok := wire.ParseUUID(s.id); ok {
		t.acked[u] = ref
	} else {
		t.ackedText[s.id] = ref
	}
	if n := len(p.acked); n == 0 || ackedOffset(p.acked[n-1]) < s.off {
		p.acked = append(p.acked, s.off)
		return
	}
	// Received after later offsets (a retried event): keep the order.
	i, _ := slices.BinarySearchFunc(p.acked, s.off, func(e, off int64) int { return cmp.Compare(ackedOffset(e), off) })
	p.acked = slices.Insert(p.acked, i, s.off)
}

// settle drops the terminal prefixes and recomputes the received and
// terminal checkpoints.
func (p *partition) settle() {
	i := 0
	for i < len(p.pending) && p.pending[i].state == StateTerminal {
		i++
	}
	if i > 0 {
		clear(p.pending[:i])
		p.pending = p.pending[i:]
	}
	i = 0
	for i < len(p.acked) && p.acked[i] < 0 {
		i++
	}
	if i > 0 {
		p.acked = p.acked[i:]
	}
	if len(p.acked) == 0 {
		p.acked = nil // let the drained array go
	}
	term := p.wm.ReadNext
	if len(p.pending) > 0 {
		term = p.pending[0].off
	}
	if len(p.acked) > 0 && p.acked[0] < term {
		term = p.acked[0]
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
// Every terminal result counts alike here (APPLIED, CONFLICT_RECORDED,
// REJECTED, …): the event is final on the shore and its result is in the
// store; nothing of it is sent again.
func (t *tracker) terminal(id string) bool {
	if s := t.byID[id]; s != nil {
		delete(t.byID, id)
		p := t.parts[s.tp]
		if s.state != StateTerminal {
			p.open--
			t.open--
		}
		t.drop(s)
		s.state = StateTerminal
		p.settle()
		return true
	}
	var ref uint64
	var ok bool
	if u, isUUID := wire.ParseUUID(id); isUUID {
		if ref, ok = t.acked[u]; ok {
			delete(t.acked, u)
		}
	} else if ref, ok = t.ackedText[id]; ok {
		delete(t.ackedText, id)
	}
	if !ok {
		return false
	}
	p := t.list[ref>>ackedOffBits]
	off := int64(ref & (1<<ackedOffBits - 1))
	i, found := slices.BinarySearchFunc(p.acked, off, func(e, off int64) int { return cmp.Compare(ackedOffset(e), off) })
	if !found || p.acked[i] < 0 {
		return false // cannot happen: the index and the list change together
	}
	p.acked[i] = -1 - off
	p.open--
	t.open--
	p.settle()
	return true
}

// received marks s received by the shore.
func (t *tracker) received(s *slot) { t.receivedAll([]*slot{s}) }

// receivedAll marks the slots of one upload answer received by the shore:
// their payloads are let go and they are tracked compactly until their
// receipts.
func (t *tracker) receivedAll(ss []*slot) {
	var touched []*partition
	for _, s := range ss {
		if !s.waiting() {
			continue
		}
		p := t.parts[s.tp]
		t.drop(s)
		s.state, s.reason = StateReceived, ""
		if !p.moved {
			p.moved = true
			touched = append(touched, p)
		}
	}
	for _, p := range touched {
		keep := p.pending[:0]
		for _, s := range p.pending {
			if s.state == StateReceived {
				t.compact(p, s)
				continue
			}
			keep = append(keep, s)
		}
		clear(p.pending[len(keep):])
		p.pending = keep
		p.moved = false
		p.settle()
	}
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

// bounds are the limits reading pauses at (Config.Window, MaxHeldBytes,
// MaxTracked).
type bounds struct {
	window  int
	held    int64
	tracked int
}

// flow updates every partition's reasons to pause against b and returns
// the partitions whose reading is to pause and to resume. Each bound
// pauses at its limit and releases with some room, so reading does not
// flap:
//   - window: a partition with window events not terminal pauses, and
//     resumes below half;
//   - held: at b.held payload bytes every partition holding some pauses (one
//     holding none, a CRITICAL rule's say, reads on); all resume below half;
//   - ahead: a partition holding a quarter of b.held pauses, and resumes
//     below an eighth: a few batches queued keep its uploads busy, and a
//     partition read no further ahead leaves the fetches room for the
//     others (a consumer fetching busy partitions without pause served a
//     quiet one's record 75 s after it was written, 110,000 records later);
//   - tracked: at b.tracked events not terminal, every partition holding at
//     least half its share (b.tracked over twice the partitions) pauses; all
//     resume below seven eighths. A partition with a few events (a CRITICAL
//     rule's) reads on, so the total may pass the bound by up to half of it.
func (t *tracker) flow(b bounds) (pause, resume []TP) {
	heldOver, heldUnder := t.held >= b.held, t.held < b.held/2
	trackedOver, trackedUnder := t.open >= b.tracked, t.open < b.tracked-b.tracked/8
	share := b.tracked / (2 * max(len(t.list), 1))
	for i, p := range t.list {
		was := p.pause
		switch {
		case p.open >= b.window:
			p.pause |= pauseWindow
		case p.open < b.window/2:
			p.pause &^= pauseWindow
		}
		switch {
		case heldOver && p.held > 0:
			p.pause |= pauseHeld
		case heldUnder:
			p.pause &^= pauseHeld
		}
		switch {
		case p.held >= b.held/4:
			p.pause |= pauseAhead
		case p.held < b.held/8:
			p.pause &^= pauseAhead
		}
		switch {
		case trackedOver && p.open >= share:
			p.pause |= pauseTracked
		case trackedUnder:
			p.pause &^= pauseTracked
		}
		switch {
		case was == 0 && p.pause != 0:
			pause = append(pause, t.order[i])
		case was != 0 && p.pause == 0:
			resume = append(resume, t.order[i])
		}
	}
	return pause, resume
}

// dirtyMarks returns the watermarks changed since the last call.
func (t *tracker) dirtyMarks() []Watermark {
	var out []Watermark
	for _, p := range t.list {
		if p.dirty {
			out = append(out, p.wm)
			p.dirty = false
		}
	}
	return out
}
