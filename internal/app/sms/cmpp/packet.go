package cmpp

import (
	"encoding/binary"
	"fmt"
)

// HeaderLen is the size of the header every packet starts with.
const HeaderLen = 12

// MaxPacket bounds Total_Length. The largest packet either version allows is
// a 3.0 Submit to 99 destinations with a full Msg_Content:
// 12 + 151 + 99×32 + 255 = 3586 bytes (2.0: 12 + 126 + 99×21 + 255 = 2472);
// every other packet is smaller. 4 KiB admits all of them with room to spare
// and stops a corrupt or hostile length from making a reader buffer more.
const MaxPacket = 4096

// Header is the 12-byte header of every packet (big-endian).
type Header struct {
	// TotalLength is Total_Length: the whole packet, header included.
	TotalLength uint32
	// CommandID is Command_Id.
	CommandID CommandID
	// SequenceID is Sequence_Id: a request and its response carry the same
	// value. The sender counts it up by one, wrapping.
	SequenceID uint32
}

// AppendTo appends the header to dst.
func (h Header) AppendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, h.TotalLength)
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CommandID))
	return binary.BigEndian.AppendUint32(dst, h.SequenceID)
}

// ParseHeader reads the header at the start of b. It refuses a Total_Length
// below HeaderLen (ErrMalformed) or above MaxPacket (ErrTooLong) and returns
// the header with the error, so a caller can log which command it was.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("cmpp: header: %w: need %d bytes, have %d", ErrMalformed, HeaderLen, len(b))
	}
	h := Header{
		TotalLength: binary.BigEndian.Uint32(b),
		CommandID:   CommandID(binary.BigEndian.Uint32(b[4:])),
		SequenceID:  binary.BigEndian.Uint32(b[8:]),
	}
	switch {
	case h.TotalLength < HeaderLen:
		return h, fmt.Errorf("cmpp: %s seq=%d: %w: Total_Length %d below the %d-byte header",
			h.CommandID, h.SequenceID, ErrMalformed, h.TotalLength, HeaderLen)
	case h.TotalLength > MaxPacket:
		return h, fmt.Errorf("cmpp: %s seq=%d: %w: Total_Length %d over %d",
			h.CommandID, h.SequenceID, ErrTooLong, h.TotalLength, MaxPacket)
	}
	return h, nil
}

// Packet is one CMPP packet body. Each packet type has a pointer method set
// that implements it; none uses reflection.
type Packet interface {
	// Command returns the packet's Command_Id.
	Command() CommandID
	// AppendBody appends the body in version v's layout to dst. On error it
	// returns dst as it was.
	AppendBody(dst []byte, v Version) ([]byte, error)
	// DecodeBody parses a whole body in version v's layout into the
	// receiver, overwriting every field and reusing its slices' storage.
	// Nothing keeps a reference to body. After an error the receiver's
	// fields are unspecified.
	DecodeBody(body []byte, v Version) error
}

// AppendPacket appends p as a whole packet — header with Total_Length and
// seq, then the body in version v's layout — to dst. On error dst is returned
// as it was. Encoding into a dst with room allocates nothing.
func AppendPacket(dst []byte, v Version, seq uint32, p Packet) ([]byte, error) {
	start := len(dst)
	dst = Header{CommandID: p.Command(), SequenceID: seq}.AppendTo(dst)
	dst, err := p.AppendBody(dst, v)
	if err != nil {
		return dst[:start], err
	}
	n := len(dst) - start
	if n > MaxPacket {
		return dst[:start], codecErr("encode", p.Command(), v, classErr(ErrTooLong, "packet of %d bytes over %d", n, MaxPacket))
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	return dst, nil
}

// NewPacket returns a new zero packet for Command_Id c, to decode a body into;
// ErrUnknownCommand for an id this codec does not implement.
func NewPacket(c CommandID) (Packet, error) {
	switch c {
	case CmdConnect:
		return new(Connect), nil
	case CmdConnectResp:
		return new(ConnectResp), nil
	case CmdTerminate:
		return new(Terminate), nil
	case CmdTerminateResp:
		return new(TerminateResp), nil
	case CmdSubmit:
		return new(Submit), nil
	case CmdSubmitResp:
		return new(SubmitResp), nil
	case CmdDeliver:
		return new(Deliver), nil
	case CmdDeliverResp:
		return new(DeliverResp), nil
	case CmdQuery:
		return new(Query), nil
	case CmdQueryResp:
		return new(QueryResp), nil
	case CmdCancel:
		return new(Cancel), nil
	case CmdCancelResp:
		return new(CancelResp), nil
	case CmdActiveTest:
		return new(ActiveTest), nil
	case CmdActiveTestResp:
		return new(ActiveTestResp), nil
	}
	return nil, fmt.Errorf("cmpp: %w: Command_Id %s", ErrUnknownCommand, c)
}
