package cmpp

// Deliver is CMPP_DELIVER (ISMG → SP): a mobile-originated message (MO) or,
// with RegisteredDelivery 1, a status report whose Msg_Content is a Report.
// Field by field (widths 3.0 / 2.0 where they differ):
//
//	Msg_Id 8 | Dest_Id 21 | Service_Id 10 | TP_pid 1 | TP_udhi 1 | Msg_Fmt 1 |
//	Src_terminal_Id 32/21 | Src_terminal_type 1 (3.0 only) |
//	Registered_Delivery 1 | Msg_Length 1 | Msg_Content Msg_Length |
//	LinkID 20 (3.0) / Reserve 8 (2.0)
type Deliver struct {
	// MsgID is this Deliver's own Msg_Id; the DeliverResp echoes it. (A
	// report's Submit Msg_Id is inside the Report.)
	MsgID uint64
	// DestID is Dest_Id (21): the SP's service number the user sent to.
	DestID string
	// ServiceID is Service_Id (10).
	ServiceID string
	// TPPID and TPUDHI are the GSM 03.40 TP-PID and TP-UDHI; TPUDHI is 1 when
	// MsgContent starts with a user data header (a long-message part, see
	// Reassembler).
	TPPID, TPUDHI uint8
	// MsgFmt is Msg_Fmt, the coding of MsgContent.
	MsgFmt MsgFmt
	// SrcTerminalID is Src_terminal_Id: the sending handset for an MO; for a
	// report, the number the Submit went to.
	SrcTerminalID string
	// SrcTerminalType is Src_terminal_type (3.0): 0 real, 1 pseudo number.
	SrcTerminalType uint8
	// RegisteredDelivery is 0 for an MO, 1 for a status report.
	RegisteredDelivery uint8
	// MsgContent is Msg_Content; see Submit.MsgContent for the length rules.
	MsgContent []byte
	// LinkID is LinkID (3.0, 20).
	LinkID string
}

// IsReport reports whether d carries a status report.
func (d *Deliver) IsReport() bool { return d.RegisteredDelivery == 1 }

// Command returns CmdDeliver.
func (*Deliver) Command() CommandID { return CmdDeliver }

// AppendBody implements Packet.
func (d *Deliver) AppendBody(dst []byte, v Version) ([]byte, error) {
	w := newWriter(dst, v)
	w.u64(d.MsgID)
	w.octets("Dest_Id", d.DestID, 21)
	w.octets("Service_Id", d.ServiceID, 10)
	w.u8(d.TPPID)
	w.u8(d.TPUDHI)
	w.u8(uint8(d.MsgFmt))
	w.octets("Src_terminal_Id", d.SrcTerminalID, v.terminalLen())
	if v == V30 {
		w.u8(d.SrcTerminalType)
	}
	w.u8(d.RegisteredDelivery)
	w.content(d.MsgFmt, d.MsgContent)
	w.tail(d.LinkID)
	return w.finish(CmdDeliver)
}

// DecodeBody implements Packet.
func (d *Deliver) DecodeBody(body []byte, v Version) error {
	r := newReader(body, v)
	d.MsgID = r.u64()
	r.octets(&d.DestID, 21)
	r.octets(&d.ServiceID, 10)
	d.TPPID = r.u8()
	d.TPUDHI = r.u8()
	d.MsgFmt = MsgFmt(r.u8())
	r.octets(&d.SrcTerminalID, v.terminalLen())
	d.SrcTerminalType = 0
	if v == V30 {
		d.SrcTerminalType = r.u8()
	}
	d.RegisteredDelivery = r.u8()
	d.MsgContent = r.bytes(d.MsgContent, int(r.u8()))
	r.tail(&d.LinkID)
	return r.finish(CmdDeliver)
}

// DeliverResp is CMPP_DELIVER_RESP (SP → ISMG):
// Msg_Id 8 | Result (2.0: 1 byte, 3.0: 4 bytes).
type DeliverResp struct {
	// MsgID is the Deliver's own Msg_Id (not the one inside a report).
	MsgID uint64
	// Result is 0 on success; 1 structure, 2 command, 3 duplicate sequence,
	// 4 length, 5 fee code, 6 over maximum length, 7 service code, 8 flow
	// control, 9 and up other errors.
	Result uint32
}

// Command returns CmdDeliverResp.
func (*DeliverResp) Command() CommandID { return CmdDeliverResp }

// AppendBody implements Packet.
func (d *DeliverResp) AppendBody(dst []byte, v Version) ([]byte, error) {
	return appendIDResult(dst, v, CmdDeliverResp, d.MsgID, d.Result)
}

// DecodeBody implements Packet.
func (d *DeliverResp) DecodeBody(body []byte, v Version) error {
	var err error
	d.MsgID, d.Result, err = decodeIDResult(body, v, CmdDeliverResp)
	return err
}

// Report is the Msg_Content of a status-report Deliver (71 bytes in 3.0, 60
// in 2.0):
//
//	Msg_Id 8 | Stat 7 | Submit_time 10 | Done_time 10 |
//	Dest_terminal_Id 32/21 | SMSC_sequence 4
type Report struct {
	// MsgID is the Msg_Id the ISMG returned in the SubmitResp.
	MsgID uint64
	// Stat is the outcome: DELIVRD, EXPIRED, DELETED, UNDELIV, ACCEPTD,
	// UNKNOWN, REJECTD, or a vendor code such as "MA:0001". ACCEPTD is an
	// intermediate state, not a final one.
	Stat string
	// SubmitTime and DoneTime are YYMMDDHHMM, kept as text.
	SubmitTime, DoneTime string
	// DestTerminalID is the number the Submit went to.
	DestTerminalID string
	// SMSCSequence is SMSC_sequence, the SMSC's own id of the report.
	SMSCSequence uint32
}

// ReportLen returns the length of a Report in version v (71 or 60 bytes).
func ReportLen(v Version) int { return 8 + 7 + 10 + 10 + v.terminalLen() + 4 }

// AppendTo appends the report in version v's layout to dst, to put into a
// Deliver's MsgContent. On error it returns dst as it was.
func (rp *Report) AppendTo(dst []byte, v Version) ([]byte, error) {
	w := newWriter(dst, v)
	w.u64(rp.MsgID)
	w.octets("Stat", rp.Stat, 7)
	w.octets("Submit_time", rp.SubmitTime, 10)
	w.octets("Done_time", rp.DoneTime, 10)
	w.octets("Dest_terminal_Id", rp.DestTerminalID, v.terminalLen())
	w.u32(rp.SMSCSequence)
	return w.finishAs("encode report", CmdDeliver)
}

// Decode parses a report Msg_Content in version v's layout into rp; the
// content must be exactly ReportLen(v) bytes.
func (rp *Report) Decode(content []byte, v Version) error {
	r := newReader(content, v)
	rp.MsgID = r.u64()
	r.octets(&rp.Stat, 7)
	r.octets(&rp.SubmitTime, 10)
	r.octets(&rp.DoneTime, 10)
	r.octets(&rp.DestTerminalID, v.terminalLen())
	rp.SMSCSequence = r.u32()
	return r.finishAs("decode report", CmdDeliver)
}
