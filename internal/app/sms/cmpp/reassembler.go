package cmpp

import (
	"bytes"
	"cmp"
	"fmt"
	"sync"
	"time"
)

// Defaults of ReassemblerConfig.
const (
	// ReassemblerMaxEntriesDefault bounds the messages waiting for parts.
	ReassemblerMaxEntriesDefault = 4096
	// ReassemblerMaxBytesDefault bounds the memory they hold (see
	// ReassemblerConfig.MaxBytes).
	ReassemblerMaxBytesDefault = 8 << 20
	// ReassemblerTTLDefault is how long a message may wait for its last part.
	// An ISMG resends an unanswered Deliver after 60 s, three times in all,
	// so a lost part can arrive about three minutes late; ten minutes covers
	// that with room.
	ReassemblerTTLDefault = 10 * time.Minute
)

// ReassemblerConfig bounds a Reassembler. Zero fields take the defaults.
type ReassemblerConfig struct {
	// MaxEntries is the most incomplete messages held at once
	// (default ReassemblerMaxEntriesDefault).
	MaxEntries int
	// MaxBytes is the most memory held at once, counted as the stored
	// payload bytes plus partSlotBytes per announced part
	// (default ReassemblerMaxBytesDefault).
	MaxBytes int
	// TTL is how long after its first part an incomplete message is dropped
	// (default ReassemblerTTLDefault).
	TTL time.Duration
}

// Part is one long-message part of a mobile-originated Deliver: fill it
// from a Deliver with TPUDHI 1 (SrcTerminalID, DestID, MsgFmt, MsgContent).
type Part struct {
	// SrcTerminalID and DestID are the sender and the SP number it wrote to;
	// with the UDH's reference and total they key the message.
	SrcTerminalID, DestID string
	// MsgFmt is the coding; every part of a message must have the same one.
	MsgFmt MsgFmt
	// Content is Msg_Content, starting with the UDH. It is copied; the
	// caller may reuse it.
	Content []byte
}

// Message is a reassembled long message.
type Message struct {
	SrcTerminalID, DestID string
	MsgFmt                MsgFmt
	// Content is the payloads of the parts in order, without their UDHs;
	// decode it with DecodeText. A character cut between two parts is whole
	// again here.
	Content []byte
	// Parts is how many parts it came in.
	Parts int
}

// Reassembler collects the parts of long mobile-originated messages and
// returns each message once its last part arrives. It is bounded in entries
// and bytes and refuses parts beyond the bounds (ErrReassemblyFull) instead
// of evicting: the caller answers such a Deliver with a flow-control Result,
// and the ISMG sends it again. Time is injected: Add and Expire take now,
// and nothing runs in the background; call Expire now and then.
//
// The Reassembler is in memory: parts already answered are lost with the
// process. It is safe for concurrent use (the parts of one message may come
// over several connections).
type Reassembler struct {
	cfg     ReassemblerConfig
	mu      sync.Mutex
	entries map[partKey]*partEntry
	bytes   int
}

// partKey identifies one long message: the UDH reference is only unique per
// sender, destination and total, and the two reference widths are separate
// number spaces.
type partKey struct {
	src, dest string
	ref       uint16
	ref16     bool
	total     uint8
}

type partEntry struct {
	first time.Time
	fmt   MsgFmt
	parts [][]byte // by Seq-1; nil until that part arrived
	have  int
	bytes int // accounted bytes, see ReassemblerConfig.MaxBytes
}

// partSlotBytes is what one announced part costs in the byte bound besides
// its payload: the slice header that holds it.
const partSlotBytes = 24

// NewReassembler returns an empty Reassembler; ErrInvalid for a negative
// bound.
func NewReassembler(cfg ReassemblerConfig) (*Reassembler, error) {
	if cfg.MaxEntries < 0 || cfg.MaxBytes < 0 || cfg.TTL < 0 {
		return nil, fmt.Errorf("cmpp: reassembler: %w: negative MaxEntries, MaxBytes or TTL", ErrInvalid)
	}
	cfg.MaxEntries = cmp.Or(cfg.MaxEntries, ReassemblerMaxEntriesDefault)
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, ReassemblerMaxBytesDefault)
	cfg.TTL = cmp.Or(cfg.TTL, ReassemblerTTLDefault)
	return &Reassembler{cfg: cfg, entries: map[partKey]*partEntry{}}, nil
}

// Add stores part p received at now. When p completes its message, Add
// returns the message and true and forgets it; a message of one part (Total
// 1, or a UDH without a concatenation element) completes at once. A part
// that repeats one already stored with the same bytes is accepted and
// ignored (an ISMG resend). Errors: ErrBadUDH, ErrConflict (same slot,
// different bytes or Msg_Fmt), ErrReassemblyFull; a refused part is not
// stored. An incomplete message with p's key older than the TTL is dropped
// before p is looked at, so a reused reference never joins a stale message.
func (r *Reassembler) Add(now time.Time, p Part) (Message, bool, error) {
	h, payload, err := ParseUDH(p.Content)
	if err != nil {
		return Message{}, false, err
	}
	if h.Total <= 1 {
		return Message{SrcTerminalID: p.SrcTerminalID, DestID: p.DestID, MsgFmt: p.MsgFmt,
			Content: bytes.Clone(payload), Parts: 1}, true, nil
	}
	k := partKey{src: p.SrcTerminalID, dest: p.DestID, ref: h.Ref, ref16: h.Ref16, total: h.Total}

	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[k]
	if e != nil && now.Sub(e.first) >= r.cfg.TTL {
		r.drop(k, e)
		e = nil
	}
	if e == nil {
		cost := len(payload) + int(h.Total)*partSlotBytes
		if len(r.entries) >= r.cfg.MaxEntries || r.bytes+cost > r.cfg.MaxBytes {
			return Message{}, false, r.full()
		}
		e = &partEntry{first: now, fmt: p.MsgFmt, parts: make([][]byte, h.Total), bytes: int(h.Total) * partSlotBytes}
		r.entries[k] = e
		r.bytes += e.bytes
	} else if e.fmt != p.MsgFmt {
		return Message{}, false, fmt.Errorf("cmpp: reassemble: %w: part %d of %d has Msg_Fmt %d, message has %d",
			ErrConflict, h.Seq, h.Total, p.MsgFmt, e.fmt)
	}
	slot := &e.parts[h.Seq-1]
	switch {
	case *slot != nil && bytes.Equal(*slot, payload):
		return Message{}, false, nil
	case *slot != nil:
		return Message{}, false, fmt.Errorf("cmpp: reassemble: %w: part %d of %d already holds other bytes",
			ErrConflict, h.Seq, h.Total)
	case r.bytes+len(payload) > r.cfg.MaxBytes:
		return Message{}, false, r.full()
	}
	*slot = append(make([]byte, 0, max(len(payload), 1)), payload...) // non-nil even when empty
	e.have++
	e.bytes += len(payload)
	r.bytes += len(payload)
	if e.have < len(e.parts) {
		return Message{}, false, nil
	}
	r.drop(k, e)
	out := make([]byte, 0, e.bytes-len(e.parts)*partSlotBytes)
	for _, part := range e.parts {
		out = append(out, part...)
	}
	return Message{SrcTerminalID: p.SrcTerminalID, DestID: p.DestID, MsgFmt: e.fmt, Content: out, Parts: len(e.parts)}, true, nil
}

// Expire drops every incomplete message whose first part came TTL or more
// before now and returns how many it dropped.
func (r *Reassembler) Expire(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, e := range r.entries {
		if now.Sub(e.first) >= r.cfg.TTL {
			r.drop(k, e)
			n++
		}
	}
	return n
}

// Len returns the number of incomplete messages held and the bytes they
// account for.
func (r *Reassembler) Len() (entries, bytes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries), r.bytes
}

func (r *Reassembler) drop(k partKey, e *partEntry) {
	delete(r.entries, k)
	r.bytes -= e.bytes
}

func (r *Reassembler) full() error {
	return fmt.Errorf("cmpp: reassemble: %w: %d messages, %d bytes held (bounds %d, %d)",
		ErrReassemblyFull, len(r.entries), r.bytes, r.cfg.MaxEntries, r.cfg.MaxBytes)
}
