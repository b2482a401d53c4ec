package cmpp

import "strconv"

// Version is a CMPP protocol version as the Connect packet carries it: the
// major number in the high nibble, the minor in the low one.
type Version uint8

// The versions whose layouts this codec implements.
const (
	// V20 is CMPP 2.0: 21-byte terminal numbers, 1-byte Status and Result
	// fields, an 8-byte Reserve where 3.0 has LinkID.
	V20 Version = 0x20
	// V30 is CMPP 3.0: 32-byte terminal numbers with a terminal-type byte,
	// 4-byte Status and Result fields, a 20-byte LinkID.
	V30 Version = 0x30
)

// String returns "2.0", "3.0", or the byte in hex for any other value.
func (v Version) String() string {
	switch v {
	case V20:
		return "2.0"
	case V30:
		return "3.0"
	}
	return "0x" + strconv.FormatUint(uint64(v), 16)
}

// check returns ErrUnsupportedVersion unless v is V20 or V30; callers put
// the packet in front (codecErr).
func (v Version) check() error {
	if v != V20 && v != V30 {
		return classErr(ErrUnsupportedVersion, "%s (want 2.0 or 3.0)", v)
	}
	return nil
}

// terminalLen is the width of a terminal number (Fee_terminal_Id,
// Dest_terminal_Id, Src_terminal_Id and the report's Dest_terminal_Id).
func (v Version) terminalLen() int {
	if v == V30 {
		return 32
	}
	return 21
}

// statusLen is the width of ConnectResp Status, SubmitResp and DeliverResp
// Result and CancelResp Success_Id.
func (v Version) statusLen() int {
	if v == V30 {
		return 4
	}
	return 1
}

// CommandID is the Command_Id of a packet header. A response is its request's
// value with the top bit set.
type CommandID uint32

// Command ids of the packets this codec implements. 0x03 is unused by the
// standard; FWD (0x09) and the route commands (0x10–0x17) run between
// gateways and are not implemented.
const (
	CmdConnect        CommandID = 0x00000001
	CmdTerminate      CommandID = 0x00000002
	CmdSubmit         CommandID = 0x00000004
	CmdDeliver        CommandID = 0x00000005
	CmdQuery          CommandID = 0x00000006
	CmdCancel         CommandID = 0x00000007
	CmdActiveTest     CommandID = 0x00000008
	CmdConnectResp    CommandID = 0x80000001
	CmdTerminateResp  CommandID = 0x80000002
	CmdSubmitResp     CommandID = 0x80000004
	CmdDeliverResp    CommandID = 0x80000005
	CmdQueryResp      CommandID = 0x80000006
	CmdCancelResp     CommandID = 0x80000007
	CmdActiveTestResp CommandID = 0x80000008
)

// respBit marks a response Command_Id.
const respBit CommandID = 0x80000000

// IsResponse reports whether c is a response Command_Id.
func (c CommandID) IsResponse() bool { return c&respBit != 0 }

// Response returns the Command_Id that answers request c.
func (c CommandID) Response() CommandID { return c | respBit }

// String returns the standard's name without the CMPP_ prefix
// ("SUBMIT_RESP"), or the value in hex for an id this codec does not know.
func (c CommandID) String() string {
	var name string
	switch c &^ respBit {
	case CmdConnect:
		name = "CONNECT"
	case CmdTerminate:
		name = "TERMINATE"
	case CmdSubmit:
		name = "SUBMIT"
	case CmdDeliver:
		name = "DELIVER"
	case CmdQuery:
		name = "QUERY"
	case CmdCancel:
		name = "CANCEL"
	case CmdActiveTest:
		name = "ACTIVE_TEST"
	default:
		return "0x" + strconv.FormatUint(uint64(c), 16)
	}
	if c.IsResponse() {
		return name + "_RESP"
	}
	return name
}
