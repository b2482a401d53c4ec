package cmpp

// Terminate is CMPP_TERMINATE (either side): no body. The receiver answers
// with TerminateResp and both sides close the connection.
type Terminate struct{}

// TerminateResp is CMPP_TERMINATE_RESP: no body.
type TerminateResp struct{}

// ActiveTest is CMPP_ACTIVE_TEST (either side), the keep-alive of a long
// connection: no body.
type ActiveTest struct{}

// ActiveTestResp is CMPP_ACTIVE_TEST_RESP: Reserved 1.
type ActiveTestResp struct {
	// Reserved is the one reserved byte, normally 0.
	Reserved uint8
}

// Command returns CmdTerminate.
func (*Terminate) Command() CommandID { return CmdTerminate }

// AppendBody implements Packet.
func (*Terminate) AppendBody(dst []byte, v Version) ([]byte, error) {
	return appendEmpty(dst, v, CmdTerminate)
}

// DecodeBody implements Packet.
func (*Terminate) DecodeBody(body []byte, v Version) error {
	return decodeEmpty(body, v, CmdTerminate)
}

// Command returns CmdTerminateResp.
func (*TerminateResp) Command() CommandID { return CmdTerminateResp }

// AppendBody implements Packet.
func (*TerminateResp) AppendBody(dst []byte, v Version) ([]byte, error) {
	return appendEmpty(dst, v, CmdTerminateResp)
}

// DecodeBody implements Packet.
func (*TerminateResp) DecodeBody(body []byte, v Version) error {
	return decodeEmpty(body, v, CmdTerminateResp)
}

// Command returns CmdActiveTest.
func (*ActiveTest) Command() CommandID { return CmdActiveTest }

// AppendBody implements Packet.
func (*ActiveTest) AppendBody(dst []byte, v Version) ([]byte, error) {
	return appendEmpty(dst, v, CmdActiveTest)
}

// DecodeBody implements Packet.
func (*ActiveTest) DecodeBody(body []byte, v Version) error {
	return decodeEmpty(body, v, CmdActiveTest)
}

// Command returns CmdActiveTestResp.
func (*ActiveTestResp) Command() CommandID { return CmdActiveTestResp }

// AppendBody implements Packet.
func (a *ActiveTestResp) AppendBody(dst []byte, v Version) ([]byte, error) {
	w := newWriter(dst, v)
	w.u8(a.Reserved)
	return w.finish(CmdActiveTestResp)
}

// DecodeBody implements Packet. An empty body is accepted too (Reserved
// reads 0): some peers answer the keep-alive without the reserved byte, and
// dropping a live connection over it would help no one.
func (a *ActiveTestResp) DecodeBody(body []byte, v Version) error {
	r := newReader(body, v)
	a.Reserved = 0
	if len(body) > 0 {
		a.Reserved = r.u8()
	}
	return r.finish(CmdActiveTestResp)
}

// appendEmpty and decodeEmpty serve the packets without a body.
func appendEmpty(dst []byte, v Version, c CommandID) ([]byte, error) {
	w := newWriter(dst, v)
	return w.finish(c)
}

func decodeEmpty(body []byte, v Version, c CommandID) error {
	r := newReader(body, v)
	return r.finish(c)
}
