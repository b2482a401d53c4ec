package cmpp

import (
	"errors"
	"fmt"
)

// The error classes of the codec. Every error this package returns wraps
// exactly one of them (test with errors.Is) and starts with "cmpp: ". The text
// around the class names packets, fields, versions and sizes only: never a
// phone number, a secret or message content.
var (
	// ErrMalformed: the bytes break the packet layout (a body shorter or longer
	// than its fields, a count out of range, a Total_Length below the header).
	// A peer that sends one is answered with a structure error (Result 1) or
	// cut off; retrying the same bytes never helps.
	ErrMalformed = errors.New("malformed")
	// ErrUnsupportedVersion: a Version other than V20 or V30 was asked for.
	ErrUnsupportedVersion = errors.New("unsupported version")
	// ErrUnknownCommand: a Command_Id this codec has no packet for. The frame
	// itself was read whole, so the stream stays usable.
	ErrUnknownCommand = errors.New("unknown command")
	// ErrTooLong: a length over a bound — Total_Length over MaxPacket, a string
	// wider than its field, Msg_Content over the limit of its Msg_Fmt, a text
	// that needs more than 255 segments.
	ErrTooLong = errors.New("too long")
	// ErrInvalid: a value the caller asked to encode cannot go on the wire
	// (a 2.0 Status over 255, no destination, a time field out of range, a
	// missing option).
	ErrInvalid = errors.New("invalid value")
	// ErrEncoding: text that the Msg_Fmt cannot carry (non-ASCII text for
	// FmtASCII, invalid UTF-8) or message bytes that are not valid in it (an
	// odd number of UCS2 bytes).
	ErrEncoding = errors.New("bad text encoding")
	// ErrBadUDH: a user data header that does not parse, or whose
	// concatenation element is inconsistent (total 0, sequence 0 or past the
	// total, two concatenation elements).
	ErrBadUDH = errors.New("bad user data header")
	// ErrConflict: a long-message part whose sequence number was already
	// filled with different bytes or another Msg_Fmt — usually a reference
	// number reused while an older message with the same key was incomplete.
	ErrConflict = errors.New("conflicting long-message part")
	// ErrReassemblyFull: the Reassembler is at its entry or byte bound. The
	// part was not stored; answer the Deliver with a flow-control Result (8)
	// so the ISMG sends it again later.
	ErrReassemblyFull = errors.New("reassembly buffer full")
)

// classErr returns "<class>: <detail>" wrapping class. Details are built from
// field names and numbers only.
func classErr(class error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{class}, args...)...)
}
