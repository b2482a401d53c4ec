package cmpp

import (
	"encoding/binary"
	"fmt"
)

// writer appends big-endian fields to b and keeps the first error. Packets
// encode field by field through it, so the layout reads like the standard's
// table and a field error does not need a check after every line.
type writer struct {
	dst []byte // what the caller passed, returned unchanged on error
	b   []byte
	v   Version
	err error
}

// newWriter starts encoding version v after dst; an unsupported v is the
// first error.
func newWriter(dst []byte, v Version) writer {
	return writer{dst: dst, b: dst, v: v, err: v.check()}
}

// finish returns the bytes, or the caller's dst and the first error with
// the packet and version in front of it.
func (w *writer) finish(c CommandID) ([]byte, error) { return w.finishAs("encode", c) }

func (w *writer) finishAs(op string, c CommandID) ([]byte, error) {
	if w.err != nil {
		return w.dst, codecErr(op, c, w.v, w.err)
	}
	return w.b, nil
}

func (w *writer) u8(x uint8)   { w.b = append(w.b, x) }
func (w *writer) u32(x uint32) { w.b = binary.BigEndian.AppendUint32(w.b, x) }
func (w *writer) u64(x uint64) { w.b = binary.BigEndian.AppendUint64(w.b, x) }
func (w *writer) raw(p []byte) { w.b = append(w.b, p...) }

// zeros appends n zero bytes (a Reserve field).
func (w *writer) zeros(n int) { w.b = append(w.b, make([]byte, n)...) }

// octets appends s as a fixed-width Octet String padded on the right with
// 0x00; a longer s is ErrTooLong, named by field.
func (w *writer) octets(field string, s string, width int) {
	if len(s) > width {
		w.fail(classErr(ErrTooLong, "%s has %d bytes, field width %d", field, len(s), width))
		s = s[:width]
	}
	w.b = append(w.b, s...)
	w.zeros(width - len(s))
}

// status appends an unsigned integer as wide as the version's status fields
// (Version.statusLen); a value over 255 in 2.0's one byte is ErrInvalid.
func (w *writer) status(field string, x uint32) {
	if w.v.statusLen() == 4 {
		w.u32(x)
		return
	}
	if x > 0xff {
		w.fail(classErr(ErrInvalid, "%s %d does not fit the 1-byte field of version 2.0", field, x))
	}
	w.u8(uint8(x))
}

func (w *writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// reader takes big-endian fields off the front of b and keeps the first
// error. After an error every read returns zero values, so a decoder can run
// to its end and check once.
type reader struct {
	b   []byte
	off int
	v   Version
	err error
}

// newReader starts decoding body in version v's layout; an unsupported v is
// the first error.
func newReader(body []byte, v Version) reader { return reader{b: body, v: v, err: v.check()} }

// finish returns the first error, with the packet and version in front, or
// ErrMalformed when bytes are left over: a body longer than its fields is as
// wrong as a shorter one (a 3.0 body decoded with the 2.0 layout, for one).
func (r *reader) finish(c CommandID) error { return r.finishAs("decode", c) }

func (r *reader) finishAs(op string, c CommandID) error {
	if r.err == nil && r.off != len(r.b) {
		r.err = classErr(ErrMalformed, "body has %d bytes, layout ends at %d", len(r.b), r.off)
	}
	return codecErr(op, c, r.v, r.err)
}

// take returns the next n bytes, or nil and ErrMalformed when fewer remain.
func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b)-r.off {
		r.err = classErr(ErrMalformed, "body has %d bytes, field at offset %d needs %d", len(r.b), r.off, n)
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) u8() uint8 {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if p := r.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// status reads an unsigned integer as wide as the version's status fields.
func (r *reader) status() uint32 {
	if r.v.statusLen() == 4 {
		return r.u32()
	}
	return uint32(r.u8())
}

// octets reads a fixed-width Octet String into *dst without its trailing
// 0x00 padding. When *dst already holds the same text it is kept, so
// decoding a stream of packets into one reused struct does not allocate for
// fields that repeat (Service_Id, Src_Id, Msg_src …).
func (r *reader) octets(dst *string, width int) {
	p := r.take(width)
	n := len(p)
	for n > 0 && p[n-1] == 0 {
		n--
	}
	if *dst != string(p[:n]) {
		*dst = string(p[:n])
	}
}

// bytes copies the next n bytes into dst's storage and returns it.
func (r *reader) bytes(dst []byte, n int) []byte {
	return append(dst[:0], r.take(n)...)
}

// codecErr puts the packet and version in front of a field error.
func codecErr(op string, c CommandID, v Version, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cmpp: %s %s %s: %w", op, c, v, err)
}
