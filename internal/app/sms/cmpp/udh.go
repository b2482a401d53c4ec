package cmpp

import "fmt"

// UDH is the concatenation information of a long-message segment, carried in
// the GSM 03.40 user data header at the start of Msg_Content (TP_udhi = 1).
type UDH struct {
	// Ref is the reference number shared by every segment of one message;
	// only its low byte is sent unless Ref16.
	Ref uint16
	// Ref16 selects the 16-bit reference element (IEI 0x08,
	// 06 08 04 RR RR TT SS) instead of the 8-bit one (IEI 0x00,
	// 05 00 03 RR TT SS).
	Ref16 bool
	// Total is how many segments the message has (1–255); 0 in a header
	// that has no concatenation element.
	Total uint8
	// Seq is this segment's number, 1 to Total.
	Seq uint8
}

// Information element ids and the sizes of the two concatenation headers.
const (
	ieiConcat8  = 0x00
	ieiConcat16 = 0x08
	// UDHLen8 and UDHLen16 are the whole header sizes, length byte included.
	UDHLen8  = 6
	UDHLen16 = 7
)

// Len returns the size of the header AppendTo writes: UDHLen8 or UDHLen16.
func (h UDH) Len() int {
	if h.Ref16 {
		return UDHLen16
	}
	return UDHLen8
}

// AppendTo appends the header (a single concatenation element) to dst.
func (h UDH) AppendTo(dst []byte) []byte {
	if h.Ref16 {
		return append(dst, 6, ieiConcat16, 4, byte(h.Ref>>8), byte(h.Ref), h.Total, h.Seq)
	}
	return append(dst, 5, ieiConcat8, 3, byte(h.Ref), h.Total, h.Seq)
}

// ParseUDH reads the user data header at the start of content (a
// Msg_Content with TP_udhi = 1) and returns its concatenation element and
// the payload after the header. Elements other than concatenation (port
// addressing, …) are skipped; a header without a concatenation element
// returns Total 0. ErrBadUDH when the header runs past content, an element
// past the header, a concatenation element has the wrong length, Total is 0,
// Seq is outside 1…Total, or there are two concatenation elements.
func ParseUDH(content []byte) (UDH, []byte, error) {
	if len(content) == 0 {
		return UDH{}, nil, udhErr("empty content")
	}
	end := 1 + int(content[0])
	if end > len(content) {
		return UDH{}, nil, udhErr("header length %d past content of %d bytes", content[0], len(content))
	}
	var h UDH
	found := false
	for i := 1; i < end; {
		if i+2 > end {
			return UDH{}, nil, udhErr("element at %d cut off", i)
		}
		iei, n := content[i], int(content[i+1])
		data := i + 2
		if data+n > end {
			return UDH{}, nil, udhErr("element %#02x at %d: length %d past the header", iei, i, n)
		}
		switch iei {
		case ieiConcat8, ieiConcat16:
			want := 3
			if iei == ieiConcat16 {
				want = 4
			}
			if n != want {
				return UDH{}, nil, udhErr("concatenation element %#02x has length %d, want %d", iei, n, want)
			}
			if found {
				return UDH{}, nil, udhErr("two concatenation elements")
			}
			found = true
			d := content[data : data+n]
			if iei == ieiConcat16 {
				h = UDH{Ref: uint16(d[0])<<8 | uint16(d[1]), Ref16: true, Total: d[2], Seq: d[3]}
			} else {
				h = UDH{Ref: uint16(d[0]), Total: d[1], Seq: d[2]}
			}
			if h.Total == 0 || h.Seq == 0 || h.Seq > h.Total {
				return UDH{}, nil, udhErr("segment %d of %d", h.Seq, h.Total)
			}
		}
		i = data + n
	}
	return h, content[end:], nil
}

func udhErr(format string, args ...any) error {
	return fmt.Errorf("cmpp: UDH: %w: "+format, append([]any{ErrBadUDH}, args...)...)
}
