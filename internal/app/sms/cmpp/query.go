package cmpp

// Query is CMPP_QUERY (SP → ISMG), the same in 2.0 and 3.0: the ISMG's
// traffic counters for one day, in total or for one service.
//
//	Time 8 | Query_Type 1 | Query_Code 10 | Reserve 8
type Query struct {
	// Time is the day, YYYYMMDD.
	Time string
	// QueryType is 0 for the totals, 1 for one service.
	QueryType uint8
	// QueryCode is the Service_Id when QueryType is 1; ignored otherwise.
	QueryCode string
}

// Command returns CmdQuery.
func (*Query) Command() CommandID { return CmdQuery }

// AppendBody implements Packet.
func (q *Query) AppendBody(dst []byte, v Version) ([]byte, error) {
	w := newWriter(dst, v)
	w.octets("Time", q.Time, 8)
	w.u8(q.QueryType)
	w.octets("Query_Code", q.QueryCode, 10)
	w.zeros(8)
	return w.finish(CmdQuery)
}

// DecodeBody implements Packet.
func (q *Query) DecodeBody(body []byte, v Version) error {
	r := newReader(body, v)
	r.octets(&q.Time, 8)
	q.QueryType = r.u8()
	r.octets(&q.QueryCode, 10)
	r.take(8)
	return r.finish(CmdQuery)
}

// QueryResp is CMPP_QUERY_RESP (ISMG → SP), the same in 2.0 and 3.0:
//
//	Time 8 | Query_Type 1 | Query_Code 10 | MT_TLMsg 4 | MT_Tlusr 4 |
//	MT_Scs 4 | MT_WT 4 | MT_FL 4 | MO_Scs 4 | MO_WT 4 | MO_FL 4
type QueryResp struct {
	// Time, QueryType and QueryCode echo the Query.
	Time      string
	QueryType uint8
	QueryCode string
	// MTTLMsg and MTTlusr count messages and users received from the SP.
	MTTLMsg, MTTlusr uint32
	// MTScs, MTWT and MTFL count MT messages forwarded, waiting and failed.
	MTScs, MTWT, MTFL uint32
	// MOScs, MOWT and MOFL count MO messages delivered to the SP, waiting
	// and failed.
	MOScs, MOWT, MOFL uint32
}

// Command returns CmdQueryResp.
func (*QueryResp) Command() CommandID { return CmdQueryResp }

// AppendBody implements Packet.
func (q *QueryResp) AppendBody(dst []byte, v Version) ([]byte, error) {
	w := newWriter(dst, v)
	w.octets("Time", q.Time, 8)
	w.u8(q.QueryType)
	w.octets("Query_Code", q.QueryCode, 10)
	for _, x := range [...]uint32{q.MTTLMsg, q.MTTlusr, q.MTScs, q.MTWT, q.MTFL, q.MOScs, q.MOWT, q.MOFL} {
		w.u32(x)
	}
	return w.finish(CmdQueryResp)
}

// DecodeBody implements Packet.
func (q *QueryResp) DecodeBody(body []byte, v Version) error {
	r := newReader(body, v)
	r.octets(&q.Time, 8)
	q.QueryType = r.u8()
	r.octets(&q.QueryCode, 10)
	for _, x := range [...]*uint32{&q.MTTLMsg, &q.MTTlusr, &q.MTScs, &q.MTWT, &q.MTFL, &q.MOScs, &q.MOWT, &q.MOFL} {
		*x = r.u32()
	}
	return r.finish(CmdQueryResp)
}

// Cancel is CMPP_CANCEL (SP → ISMG): Msg_Id 8, the same in 2.0 and 3.0.
type Cancel struct {
	// MsgID is the Msg_Id of the submitted message to delete.
	MsgID uint64
}

// Command returns CmdCancel.
func (*Cancel) Command() CommandID { return CmdCancel }

// AppendBody implements Packet.
func (c *Cancel) AppendBody(dst []byte, v Version) ([]byte, error) {
	w := newWriter(dst, v)
	w.u64(c.MsgID)
	return w.finish(CmdCancel)
}

// DecodeBody implements Packet.
func (c *Cancel) DecodeBody(body []byte, v Version) error {
	r := newReader(body, v)
	c.MsgID = r.u64()
	return r.finish(CmdCancel)
}

// CancelResp is CMPP_CANCEL_RESP (ISMG → SP): Success_Id, 1 byte in 2.0 and
// 4 bytes in 3.0.
type CancelResp struct {
	// SuccessID is 0 when the message was deleted, 1 when not.
	SuccessID uint32
}

// Command returns CmdCancelResp.
func (*CancelResp) Command() CommandID { return CmdCancelResp }

// AppendBody implements Packet.
func (c *CancelResp) AppendBody(dst []byte, v Version) ([]byte, error) {
	w := newWriter(dst, v)
	w.status("Success_Id", c.SuccessID)
	return w.finish(CmdCancelResp)
}

// DecodeBody implements Packet.
func (c *CancelResp) DecodeBody(body []byte, v Version) error {
	r := newReader(body, v)
	c.SuccessID = r.status()
	return r.finish(CmdCancelResp)
}
