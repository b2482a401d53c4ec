package cmpp_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

// part returns a part of message ref from src with an 8-bit UDH.
func part(src string, ref, total, seq uint8, payload string) cmpp.Part {
	content := cmpp.UDH{Ref: uint16(ref), Total: total, Seq: seq}.AppendTo(nil)
	return cmpp.Part{SrcTerminalID: src, DestID: "106900001", MsgFmt: cmpp.FmtASCII, Content: append(content, payload...)}
}

func newReassembler(t *testing.T, cfg cmpp.ReassemblerConfig) *cmpp.Reassembler {
	t.Helper()
	r, err := cmpp.NewReassembler(cfg)
	require.NoError(t, err)
	return r
}

func TestReassembleOutOfOrderWithResends(t *testing.T) {
	t.Parallel()
	r := newReassembler(t, cmpp.ReassemblerConfig{})
	add := func(p cmpp.Part) (cmpp.Message, bool) {
		msg, done, err := r.Add(t0, p)
		require.NoError(t, err)
		return msg, done
	}
	_, done := add(part("A", 9, 3, 3, "three"))
	require.False(t, done)
	_, done = add(part("A", 9, 3, 1, "one "))
	require.False(t, done)
	_, done = add(part("A", 9, 3, 1, "one ")) // the ISMG resent it
	require.False(t, done)
	_, done = add(part("B", 9, 3, 2, "other sender ")) // same ref, other key
	require.False(t, done)
	entries, _ := r.Len()
	require.Equal(t, 2, entries)

	msg, done := add(part("A", 9, 3, 2, "two "))
	require.True(t, done)
	require.Equal(t, cmpp.Message{SrcTerminalID: "A", DestID: "106900001", MsgFmt: cmpp.FmtASCII,
		Content: []byte("one two three"), Parts: 3}, msg)
	entries, _ = r.Len()
	require.Equal(t, 1, entries)
}

func TestReassembleSinglePart(t *testing.T) {
	t.Parallel()
	r := newReassembler(t, cmpp.ReassemblerConfig{})
	msg, done, err := r.Add(t0, part("A", 1, 1, 1, "whole"))
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, "whole", string(msg.Content))

	// A UDH without a concatenation element (port addressing only).
	p := cmpp.Part{SrcTerminalID: "A", Content: []byte{0x04, 0x04, 0x02, 0x0b, 0x84, 'x'}}
	msg, done, err = r.Add(t0, p)
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, "x", string(msg.Content))
	p.Content[5] = 'y'
	require.Equal(t, "x", string(msg.Content), "the message owns its bytes")
	entries, bytes := r.Len()
	require.Zero(t, entries)
	require.Zero(t, bytes)
}

func TestReassembleRefusals(t *testing.T) {
	t.Parallel()
	r := newReassembler(t, cmpp.ReassemblerConfig{})
	_, _, err := r.Add(t0, part("A", 5, 2, 1, "first"))
	require.NoError(t, err)
	_, before := r.Len()

	_, _, err = r.Add(t0, part("A", 5, 2, 1, "FIRST"))
	require.ErrorIs(t, err, cmpp.ErrConflict)
	require.NotContains(t, err.Error(), "FIRST", "error text never holds content")
	other := part("A", 5, 2, 2, "second")
	other.MsgFmt = cmpp.FmtUCS2
	_, _, err = r.Add(t0, other)
	require.ErrorIs(t, err, cmpp.ErrConflict)

	for _, content := range [][]byte{
		nil,
		{0x05, 0x00, 0x03, 0x01},             // header past content
		{0x05, 0x00, 0x03, 0x01, 0x02, 0x00}, // segment 0
		{0x05, 0x00, 0x03, 0x01, 0x02, 0x03}, // segment 3 of 2
		{0x05, 0x00, 0x03, 0x01, 0x00, 0x00}, // total 0
		{0x04, 0x00, 0x02, 0x01, 0x02},       // concatenation element of length 2
		{0x02, 0x00, 0x03},                   // element past the header
		{0x0a, 0x00, 0x03, 0x01, 0x02, 0x01, 0x08, 0x04, 0x00, 0x01, 0x02, 0x01}, // two of them
	} {
		_, _, err := r.Add(t0, cmpp.Part{SrcTerminalID: "A", Content: content})
		require.ErrorIs(t, err, cmpp.ErrBadUDH, "% x", content)
	}
	entries, after := r.Len()
	require.Equal(t, 1, entries)
	require.Equal(t, before, after, "a refused part stores nothing")
}

func TestReassembleBounds(t *testing.T) {
	t.Parallel()
	r := newReassembler(t, cmpp.ReassemblerConfig{MaxEntries: 2})
	_, _, err := r.Add(t0, part("A", 1, 2, 1, "x"))
	require.NoError(t, err)
	_, _, err = r.Add(t0, part("B", 1, 2, 1, "x"))
	require.NoError(t, err)
	_, _, err = r.Add(t0, part("C", 1, 2, 1, "x"))
	require.ErrorIs(t, err, cmpp.ErrReassemblyFull)
	// Parts of messages already held still go in.
	_, done, err := r.Add(t0, part("A", 1, 2, 2, "y"))
	require.NoError(t, err)
	require.True(t, done)
	_, _, err = r.Add(t0, part("C", 1, 2, 1, "x"))
	require.NoError(t, err, "room again once a message completed")

	// Bytes: two slots of 24 plus the payloads.
	r = newReassembler(t, cmpp.ReassemblerConfig{MaxBytes: 2*24 + 10})
	_, _, err = r.Add(t0, part("A", 1, 2, 1, "0123456789"))
	require.NoError(t, err)
	_, bytes := r.Len()
	require.Equal(t, 2*24+10, bytes)
	_, _, err = r.Add(t0, part("A", 1, 2, 2, "!"))
	require.ErrorIs(t, err, cmpp.ErrReassemblyFull)
	_, _, err = r.Add(t0, part("B", 1, 2, 1, ""))
	require.ErrorIs(t, err, cmpp.ErrReassemblyFull)

	_, err = cmpp.NewReassembler(cmpp.ReassemblerConfig{MaxBytes: -1})
	require.ErrorIs(t, err, cmpp.ErrInvalid)
}

func TestReassembleExpiry(t *testing.T) {
	t.Parallel()
	r := newReassembler(t, cmpp.ReassemblerConfig{TTL: time.Minute})
	_, _, err := r.Add(t0, part("A", 1, 2, 1, "old "))
	require.NoError(t, err)
	_, _, err = r.Add(t0.Add(30*time.Second), part("B", 1, 2, 1, "b"))
	require.NoError(t, err)

	require.Zero(t, r.Expire(t0.Add(59*time.Second)))
	require.Equal(t, 1, r.Expire(t0.Add(time.Minute)))
	entries, _ := r.Len()
	require.Equal(t, 1, entries)

	// Without an Expire call, a stale message never absorbs a part of a new
	// one that reuses its reference.
	_, _, err = r.Add(t0, part("C", 1, 2, 1, "stale "))
	require.NoError(t, err)
	later := t0.Add(2 * time.Minute)
	_, done, err := r.Add(later, part("C", 1, 2, 2, "new-2"))
	require.NoError(t, err)
	require.False(t, done, "the stale part 1 was dropped, not joined")
	msg, done, err := r.Add(later, part("C", 1, 2, 1, "new-1 "))
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, "new-1 new-2", string(msg.Content))
}

func TestReassembleConcurrent(t *testing.T) {
	t.Parallel()
	r := newReassembler(t, cmpp.ReassemblerConfig{})
	var wg sync.WaitGroup
	done := make(chan string, 64)
	for i := range 64 {
		src := fmt.Sprintf("S%02d", i)
		for seq := uint8(1); seq <= 3; seq++ {
			wg.Go(func() {
				msg, ok, err := r.Add(t0, part(src, 7, 3, seq, string('0'+rune(seq))))
				if err != nil {
					panic(err)
				}
				if ok {
					done <- msg.SrcTerminalID + ":" + string(msg.Content)
				}
			})
		}
	}
	wg.Wait()
	close(done)
	n := 0
	for s := range done {
		require.Equal(t, "123", s[len(s)-3:])
		n++
	}
	require.Equal(t, 64, n)
	entries, bytes := r.Len()
	require.Zero(t, entries)
	require.Zero(t, bytes)
}
