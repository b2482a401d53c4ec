package cmpp

import "fmt"

// SplitOpts are the options of Split.
type SplitOpts struct {
	// RefFunc returns the reference number of a message that needs more than
	// one segment; it is called once per such message and is required then.
	// Without Ref16 only the low 8 bits are used. The caller owns the
	// sequence: per (source, destination) it must not repeat while an earlier
	// message with the same reference may still be in flight.
	RefFunc func() uint16
	// Ref16 selects the 7-byte UDH with a 16-bit reference (one character
	// fewer per segment) instead of the 6-byte UDH with an 8-bit one, for
	// channels that ask for it.
	Ref16 bool
}

// Segment is one Submit's share of a message, ready for
// Submit.PkTotal/PkNumber/TPUDHI/MsgContent.
type Segment struct {
	// PkTotal and PkNumber are the segment count and this segment's number
	// from 1.
	PkTotal, PkNumber uint8
	// TPUDHI is 1 when Content starts with a UDH (every segment of a message
	// split in more than one), 0 for a message that fits one.
	TPUDHI uint8
	// Content is the Msg_Content: UDH and payload.
	Content []byte
}

// maxSegments is the most segments a message can have: Pk_total and the
// UDH's total are one byte.
const maxSegments = 255

// Split codes text as f and cuts it into Submit segments. A text that fits
// one message is one segment without a UDH; a longer one gets a
// concatenation UDH (8-bit reference, or 16-bit with opts.Ref16) in every
// segment, the reference taken once from opts.RefFunc. Limits, in
// characters as the handset counts them:
//
//	FmtASCII  160 alone, 153 per segment (152 with a 16-bit reference).
//	          The ISMG sends ASCII as GSM 7-bit, where ^ { } \ [ ~ ] | and
//	          form feed are escape pairs: they count two.
//	FmtUCS2   70 alone, 67 per segment (66); a character outside the BMP
//	          counts two (a surrogate pair) and is never cut in half.
//	FmtGB     as UCS2, which the ISMG turns GB text into for the handset, and
//	          also at most 140 bytes alone and 134 (133) per segment, since
//	          GB18030 characters are 1, 2 or 4 bytes; none is cut.
//	FmtBinary 140 bytes alone, 134 (133) per segment; FmtSIMWrite alike.
//
// Segments share one allocation. ErrTooLong past 255 segments, ErrEncoding
// for text f cannot carry, ErrInvalid when a reference is needed and
// opts.RefFunc is nil.
func Split(text string, f MsgFmt, opts SplitOpts) ([]Segment, error) {
	if len(text) > maxSegments*160*4 { // more UTF-8 bytes than 255 full segments can hold in any coding
		return nil, fmt.Errorf("cmpp: split: %w: text of %d bytes", ErrTooLong, len(text))
	}
	payload, err := AppendText(nil, text, f)
	if err != nil {
		return nil, err
	}
	cost := 0
	for i := 0; i < len(payload); {
		n, c := charAt(f, payload, i)
		i += n
		cost += c
	}
	if maxCost, maxBytes := segmentLimits(f, 0); cost <= maxCost && len(payload) <= maxBytes {
		return []Segment{{PkTotal: 1, PkNumber: 1, Content: payload}}, nil
	}

	udh := UDH{Ref16: opts.Ref16}
	maxCost, maxBytes := segmentLimits(f, udh.Len())
	var ends [maxSegments]int // end offset of each segment's payload
	n := 0
	for i, segCost, segStart := 0, 0, 0; i < len(payload); {
		size, c := charAt(f, payload, i)
		if segCost+c > maxCost || i+size-segStart > maxBytes {
			if n == maxSegments-1 {
				return nil, fmt.Errorf("cmpp: split: %w: more than %d segments (Msg_Fmt %d, %d bytes)", ErrTooLong, maxSegments, f, len(payload))
			}
			ends[n] = i
			n++
			segCost, segStart = 0, i
		}
		segCost += c
		i += size
	}
	ends[n] = len(payload)
	n++

	if opts.RefFunc == nil {
		return nil, fmt.Errorf("cmpp: split: %w: a %d-segment message needs SplitOpts.RefFunc", ErrInvalid, n)
	}
	udh.Ref = opts.RefFunc()
	udh.Total = uint8(n)
	buf := make([]byte, 0, len(payload)+n*udh.Len())
	segs := make([]Segment, n)
	start := 0
	for k := range n {
		udh.Seq = uint8(k + 1)
		at := len(buf)
		buf = udh.AppendTo(buf)
		buf = append(buf, payload[start:ends[k]]...)
		segs[k] = Segment{PkTotal: udh.Total, PkNumber: udh.Seq, TPUDHI: 1, Content: buf[at:len(buf):len(buf)]}
		start = ends[k]
	}
	return segs, nil
}

// segmentLimits returns the most characters (as charAt counts them) and
// bytes of payload one message of coding f carries after a UDH of udhLen
// bytes (0: a single message without UDH). Every coding is bounded by the
// 140 octets of GSM user data; 7-bit text fits 160 septets in them, and a
// UDH takes its bits out of those.
func segmentLimits(f MsgFmt, udhLen int) (maxCost, maxBytes int) {
	switch f {
	case FmtASCII:
		return (140*8 - udhLen*8) / 7, 160 - udhLen
	case FmtUCS2, FmtGB:
		return (140 - udhLen) / 2, 140 - udhLen
	}
	return 140 - udhLen, 140 - udhLen
}

// charAt returns the size in bytes of the character of coded payload p at i
// and what it counts against segmentLimits. p is AppendText's output, so it
// is well formed; a truncated tail is still bounded by len(p).
func charAt(f MsgFmt, p []byte, i int) (size, cost int) {
	switch f {
	case FmtASCII:
		if gsmEscaped(p[i]) {
			return 1, 2
		}
		return 1, 1
	case FmtUCS2:
		if i+4 <= len(p) && p[i]&0xfc == 0xd8 && p[i+2]&0xfc == 0xdc { // high then low surrogate
			return 4, 2
		}
		return min(2, len(p)-i), 1
	case FmtGB:
		switch {
		case p[i] < 0x80:
			return 1, 1
		case i+1 < len(p) && p[i+1] >= 0x30 && p[i+1] <= 0x39: // four-byte sequence
			if p[i] >= 0x90 { // 0x90308130 and up: outside the BMP, two UTF-16 units
				return min(4, len(p)-i), 2
			}
			return min(4, len(p)-i), 1
		}
		return min(2, len(p)-i), 1
	}
	return 1, 1
}

// gsmEscaped reports whether ASCII byte c is in the GSM 7-bit extension
// table, sent as an escape and a second septet.
func gsmEscaped(c byte) bool {
	switch c {
	case '^', '{', '}', '\\', '[', '~', ']', '|', '\f':
		return true
	}
	return false
}
