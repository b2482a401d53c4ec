package cmpp

// MaxDestUsers is the most destinations one Submit may carry: the standard
// says DestUsr_tl is "fewer than 100".
const MaxDestUsers = 99

// Submit is CMPP_SUBMIT (SP → ISMG). Field by field, in order (widths
// 3.0 / 2.0 where they differ):
//
//	Msg_Id 8 | Pk_total 1 | Pk_number 1 | Registered_Delivery 1 | Msg_level 1 |
//	Service_Id 10 | Fee_UserType 1 | Fee_terminal_Id 32/21 |
//	Fee_terminal_type 1 (3.0 only) | TP_pId 1 | TP_udhi 1 | Msg_Fmt 1 |
//	Msg_src 6 | FeeType 2 | FeeCode 6 | ValId_Time 17 | At_Time 17 | Src_Id 21 |
//	DestUsr_tl 1 | Dest_terminal_Id 32/21 × DestUsr_tl |
//	Dest_terminal_type 1 (3.0 only) | Msg_Length 1 | Msg_Content Msg_Length |
//	LinkID 20 (3.0) / Reserve 8 (2.0)
//
// Fields 2.0 lacks (FeeTerminalType, DestTerminalType, LinkID) are not sent in
// 2.0 and decode as zero; the 2.0 Reserve is sent as zeros and ignored when
// read.
type Submit struct {
	// MsgID is Msg_Id; an SP sends 0 and the ISMG assigns the id in the
	// SubmitResp.
	MsgID uint64
	// PkTotal and PkNumber are Pk_total and Pk_number: how many segments share
	// this message and which one this is, both from 1 (see Split).
	PkTotal, PkNumber uint8
	// RegisteredDelivery is 1 to ask for a status report, 0 not to.
	RegisteredDelivery uint8
	// MsgLevel is Msg_level, the message priority.
	MsgLevel uint8
	// ServiceID is Service_Id (10), the SP's service code.
	ServiceID string
	// FeeUserType is Fee_UserType: 0 charge the destination, 1 the source,
	// 2 the SP, 3 the number in FeeTerminalID.
	FeeUserType uint8
	// FeeTerminalID is Fee_terminal_Id, the charged number when FeeUserType is 3.
	FeeTerminalID string
	// FeeTerminalType is Fee_terminal_type (3.0): 0 real number, 1 pseudo number.
	FeeTerminalType uint8
	// TPPID and TPUDHI are the GSM 03.40 TP-PID and TP-UDHI; TPUDHI is 1 when
	// MsgContent starts with a user data header (a long-message segment).
	TPPID, TPUDHI uint8
	// MsgFmt is Msg_Fmt, the coding of MsgContent.
	MsgFmt MsgFmt
	// MsgSrc is Msg_src (6), the SP_Id.
	MsgSrc string
	// FeeType is FeeType (2): "01" free, "02" per message, "03" monthly.
	FeeType string
	// FeeCode is FeeCode (6), the fee in fen.
	FeeCode string
	// ValidTime and AtTime are ValId_Time and At_Time (17 each) in the
	// SMPP 3.3 time format; empty for the ISMG's default and "now".
	ValidTime, AtTime string
	// SrcID is Src_Id (21), the number the handset shows as the sender.
	SrcID string
	// DestTerminalIDs are the Dest_terminal_Id numbers, 1 to MaxDestUsers.
	DestTerminalIDs []string
	// DestTerminalType is Dest_terminal_type (3.0): 0 real, 1 pseudo numbers.
	DestTerminalType uint8
	// MsgContent is Msg_Content, UDH included. Encoding allows at most
	// MaxContent(MsgFmt) bytes; decoding accepts whatever Msg_Length (at most
	// 255) announces.
	MsgContent []byte
	// LinkID is LinkID (3.0, 20), the on-demand service's link id.
	LinkID string
}

// Command returns CmdSubmit.
func (*Submit) Command() CommandID { return CmdSubmit }

// AppendBody implements Packet.
func (s *Submit) AppendBody(dst []byte, v Version) ([]byte, error) {
	term := v.terminalLen()
	w := newWriter(dst, v)
	w.u64(s.MsgID)
	w.u8(s.PkTotal)
	w.u8(s.PkNumber)
	w.u8(s.RegisteredDelivery)
	w.u8(s.MsgLevel)
	w.octets("Service_Id", s.ServiceID, 10)
	w.u8(s.FeeUserType)
	w.octets("Fee_terminal_Id", s.FeeTerminalID, term)
	if v == V30 {
		w.u8(s.FeeTerminalType)
	}
	w.u8(s.TPPID)
	w.u8(s.TPUDHI)
	w.u8(uint8(s.MsgFmt))
	w.octets("Msg_src", s.MsgSrc, 6)
	w.octets("FeeType", s.FeeType, 2)
	w.octets("FeeCode", s.FeeCode, 6)
	w.octets("ValId_Time", s.ValidTime, 17)
	w.octets("At_Time", s.AtTime, 17)
	w.octets("Src_Id", s.SrcID, 21)
	w.destCount(len(s.DestTerminalIDs))
	w.u8(uint8(len(s.DestTerminalIDs)))
	for _, d := range s.DestTerminalIDs {
		w.octets("Dest_terminal_Id", d, term)
	}
	if v == V30 {
		w.u8(s.DestTerminalType)
	}
	w.content(s.MsgFmt, s.MsgContent)
	w.tail(s.LinkID)
	return w.finish(CmdSubmit)
}

// DecodeBody implements Packet.
func (s *Submit) DecodeBody(body []byte, v Version) error {
	term := v.terminalLen()
	r := newReader(body, v)
	s.MsgID = r.u64()
	s.PkTotal = r.u8()
	s.PkNumber = r.u8()
	s.RegisteredDelivery = r.u8()
	s.MsgLevel = r.u8()
	r.octets(&s.ServiceID, 10)
	s.FeeUserType = r.u8()
	r.octets(&s.FeeTerminalID, term)
	s.FeeTerminalType = 0
	if v == V30 {
		s.FeeTerminalType = r.u8()
	}
	s.TPPID = r.u8()
	s.TPUDHI = r.u8()
	s.MsgFmt = MsgFmt(r.u8())
	r.octets(&s.MsgSrc, 6)
	r.octets(&s.FeeType, 2)
	r.octets(&s.FeeCode, 6)
	r.octets(&s.ValidTime, 17)
	r.octets(&s.AtTime, 17)
	r.octets(&s.SrcID, 21)
	n := int(r.u8())
	r.destCount(n)
	if r.err == nil {
		s.DestTerminalIDs = growStrings(s.DestTerminalIDs, n)
		for i := range s.DestTerminalIDs {
			r.octets(&s.DestTerminalIDs[i], term)
		}
	}
	s.DestTerminalType = 0
	if v == V30 {
		s.DestTerminalType = r.u8()
	}
	s.MsgContent = r.bytes(s.MsgContent, int(r.u8()))
	r.tail(&s.LinkID)
	return r.finish(CmdSubmit)
}

// SubmitResp is CMPP_SUBMIT_RESP (ISMG → SP):
// Msg_Id 8 | Result (2.0: 1 byte, 3.0: 4 bytes).
type SubmitResp struct {
	// MsgID is the Msg_Id the ISMG gave the Submit with the same Sequence_Id;
	// with n destinations it stands for MsgID … MsgID+n−1.
	MsgID uint64
	// Result is 0 on success; 1 structure, 2 command, 3 duplicate sequence,
	// 4 length, 5 fee code, 6 over maximum length, 7 service code, 8 flow
	// control, 9 fee number not served here, 10 Src_Id, 11 Msg_src,
	// 12 Fee_terminal_Id, 13 Dest_terminal_Id; 100–199 vendor codes.
	Result uint32
}

// Command returns CmdSubmitResp.
func (*SubmitResp) Command() CommandID { return CmdSubmitResp }

// AppendBody implements Packet.
func (s *SubmitResp) AppendBody(dst []byte, v Version) ([]byte, error) {
	return appendIDResult(dst, v, CmdSubmitResp, s.MsgID, s.Result)
}

// DecodeBody implements Packet.
func (s *SubmitResp) DecodeBody(body []byte, v Version) error {
	var err error
	s.MsgID, s.Result, err = decodeIDResult(body, v, CmdSubmitResp)
	return err
}

// appendIDResult and decodeIDResult carry the Msg_Id | Result body that
// SubmitResp and DeliverResp share.
func appendIDResult(dst []byte, v Version, c CommandID, id uint64, result uint32) ([]byte, error) {
	w := newWriter(dst, v)
	w.u64(id)
	w.status("Result", result)
	return w.finish(c)
}

func decodeIDResult(body []byte, v Version, c CommandID) (uint64, uint32, error) {
	r := newReader(body, v)
	id := r.u64()
	result := r.status()
	return id, result, r.finish(c)
}

// destCount refuses a DestUsr_tl outside 1…MaxDestUsers.
func (w *writer) destCount(n int) {
	if n < 1 || n > MaxDestUsers {
		w.fail(classErr(ErrInvalid, "DestUsr_tl %d outside 1…%d", n, MaxDestUsers))
	}
}

func (r *reader) destCount(n int) {
	if r.err == nil && (n < 1 || n > MaxDestUsers) {
		r.err = classErr(ErrMalformed, "DestUsr_tl %d outside 1…%d", n, MaxDestUsers)
	}
}

// content appends Msg_Length and Msg_Content, refusing content over
// MaxContent(f).
func (w *writer) content(f MsgFmt, p []byte) {
	if limit := MaxContent(f); len(p) > limit {
		w.fail(classErr(ErrTooLong, "Msg_Content has %d bytes, Msg_Fmt %d allows %d", len(p), f, limit))
		p = p[:limit]
	}
	w.u8(uint8(len(p)))
	w.raw(p)
}

// tail appends the last field of Submit and Deliver: LinkID 20 in 3.0,
// Reserve 8 (zeros) in 2.0.
func (w *writer) tail(linkID string) {
	if w.v == V30 {
		w.octets("LinkID", linkID, 20)
		return
	}
	w.zeros(8)
}

func (r *reader) tail(linkID *string) {
	if r.v == V30 {
		r.octets(linkID, 20)
		return
	}
	*linkID = ""
	r.take(8)
}

// growStrings returns s resized to n, keeping its storage (and the strings
// in it, which octets compares against) when it is large enough.
func growStrings(s []string, n int) []string {
	if cap(s) < n {
		return append(s[:cap(s)], make([]string, n-cap(s))...)
	}
	return s[:n]
}
