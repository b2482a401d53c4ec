// Package cmpp is the wire codec of CMPP 2.0 and 3.0, the protocol an SP
// speaks to a carrier's Internet Short Message Gateway (ISMG). It holds the
// packets the sms send chain meets — Connect, Terminate, Submit, Deliver (MO
// and status report), ActiveTest, Query and Cancel, each with its response —
// plus Msg_Id packing, text codings, long-message splitting and the
// reassembly of long MO messages. It does no I/O beyond FrameReader's reads
// and reads no clock: every time is a parameter. docs/sms/cmpp.md describes
// it for operators.
//
// # Encoding and decoding
//
// Each packet is a struct implementing Packet. AppendPacket appends header
// and body to a caller's buffer (no allocation when it has room);
// DecodeBody parses a body into a caller's struct, reusing its slices and
// keeping string fields that did not change, so a reader that decodes into
// one struct per command allocates little. FrameReader cuts a stream into
// packets with Total_Length bounded by MaxPacket before anything is
// allocated. Nothing uses reflection.
//
// Layouts differ by Version; every call takes one. The differences: 3.0
// terminal numbers are 32 bytes (2.0: 21) and Submit and Deliver add a
// terminal-type byte after them; Status and Result fields are 4 bytes (2.0:
// 1); Submit and Deliver end in LinkID 20 (2.0: Reserve 8). Fields 2.0 lacks
// are not sent and decode as zero.
//
// Octet Strings are fixed width and padded on the right with 0x00; decoding
// drops the trailing 0x00 bytes. Left padding with ASCII '0', which the
// standard allows for some fields, is the caller's to write and is kept.
//
// # Assumptions where the layout table is silent
//
//   - CancelResp Success_Id is 1 byte in 2.0, like the other 2.0 status
//     fields (4 in 3.0).
//   - Query and QueryResp are the same in both versions: Time 8 |
//     Query_Type 1 | Query_Code 10 | Reserve 8, and Time | Query_Type |
//     Query_Code followed by eight 4-byte counters.
//   - A body must be exactly as long as its layout: extra bytes are
//     ErrMalformed, as missing ones are. Two tolerances: ConnectResp takes
//     the width of Status from its length (a 2.0 ISMG answers a 3.0 Connect
//     in its own layout), and ActiveTestResp may come without its reserved
//     byte.
//   - Encoding refuses Msg_Content over 160 bytes for Msg_Fmt 0 and 140 for
//     the others (the standard's "<160" is read as the 160 GSM septets);
//     decoding accepts up to the 255 that Msg_Length can say, since it is
//     the ISMG's limit to enforce. DestUsr_tl must be 1–99 both ways.
//
// # Errors
//
// Every error wraps one class — ErrMalformed, ErrUnsupportedVersion,
// ErrUnknownCommand, ErrTooLong, ErrInvalid, ErrEncoding, ErrBadUDH,
// ErrConflict, ErrReassemblyFull — and names the packet, version and field;
// its text never holds message content, phone numbers or secrets.
package cmpp
