package sisxml

import "time"

// MsgKind is the dispatch kind of a decoded message (seed 000 §2 MsgKind).
type MsgKind string

const (
	// KindSchd: SCHD-DNLD, SCHD-RESP or SCHD-ADFT; Message.Schd is set.
	KindSchd MsgKind = "Schd"
	// KindFlop: FLOP-<subtype> for a subtype in FlopSubtypes; Message.Flop is set.
	KindFlop MsgKind = "Flop"
	// KindFdel: FDEL-DELE; Message.Fdel is set.
	KindFdel MsgKind = "Fdel"
	// KindRef: REFD-RESP, a reference-data response (seed 000 §7.2); Message.Ref is set.
	KindRef MsgKind = "Ref"
	// KindRequest: REQT-SCHD or REQT-REFD, an outbound request (written by msgx
	// to COUTMSGS); Message.Request is set. Inbound it is unsupported.
	KindRequest MsgKind = "Request"
	// KindIgnored: TYPE is one of the baseline ignored kinds (LDM, REGN, RSTA,
	// EROR); only the envelope is decoded, the body is not read.
	KindIgnored MsgKind = "Ignored"
	// KindUnsupported: a well-formed envelope whose TYPE-STYP this codec does not
	// know; the body is not read. Dispatch fails it as UNSUPPORTED (retried).
	KindUnsupported MsgKind = "Unsupported"
)

// Message is one decoded SIS XML message. Exactly one of the body pointers is
// set, matching Kind; none for KindIgnored and KindUnsupported.
type Message struct {
	Meta    Meta
	Kind    MsgKind
	Schd    *Schedule
	Flop    *FlightOp
	Fdel    *FlightDelete
	Ref     *RefData
	Request *Request
}

// Meta is the MSG/META envelope. SNDR, SEQN, DTTM, TYPE and STYP are
// required; RCVR is optional. Values are whitespace-trimmed; TYPE and STYP are
// upper-cased.
type Meta struct {
	SNDR string // sender system code
	RCVR string // receiver system code ("" when absent)
	SEQN string // sender's sequence number, kept verbatim (identity part)
	// DTTM is the send time, YYYYMMDDhhmmss wall clock of the sender, held in
	// time.UTC without any zone conversion.
	DTTM time.Time
	TYPE string // message type, e.g. SCHD, FLOP
	STYP string // message subtype, e.g. DNLD, GATE
}

// Schedule is a SCHD body: DNLD (daily plan download), RESP (answer to a
// REQT-SCHD) or ADFT (ad-hoc flight, set-only, seed 000 §12.3).
type Schedule struct {
	// Subtype is DNLD, RESP or ADFT.
	Subtype string
	// RQSQ echoes the SEQN of the REQT this RESP answers (seed 000 §7.2 echo
	// matching); Absent when not sent.
	RQSQ Field[string]
	// RCNT is the declared record count; Decode has checked it equals len(Flights).
	RCNT int
	// Flights are the FLGT records in document order.
	Flights []Flight
}

// FlightOp is a FLOP body: one dynamic change of one flight. Subtype names the
// change (see FlopSubtypes); Decode has checked Flight carries only FLID and
// the elements that subtype owns, and at least one of them.
type FlightOp struct {
	Subtype string
	Flight  Flight
}

// FlightDelete is an FDEL body: the business deletion of FLID (seed 000 §12.3).
type FlightDelete struct {
	FLID string
}

// RefData is a REFD-RESP body: reference data of one type for REF_MASTER.
type RefData struct {
	RTYP    string        // reference type, e.g. AIRLINE, GATE
	RQSQ    Field[string] // SEQN of the REQT-REFD answered
	RCNT    int           // declared record count, checked against Records
	Records []RefRecord   // in document order
}

// RefRecord is one REF_MASTER row: (RTYP, RKEY) unique.
type RefRecord struct {
	RKEY string        // required
	RVAL Field[string] // description / value
}

// Request is an outbound REQT body (seed 000 §7.2).
type Request struct {
	// Subtype is SCHD (request a day's plan; answered by SCHD-RESP) or REFD
	// (request reference data; answered by REFD-RESP).
	Subtype string
	// ODAY is the operating day covered (YYYYMMDD) for REQT-SCHD.
	ODAY Field[string]
	// RTYP is the reference type for REQT-REFD.
	RTYP Field[string]
}

// Flight is one flight record (FLGT). FLID is always present; every other
// field is presence-aware (seed 000 §12.1: absent = not carried, empty = clear).
type Flight struct {
	// FLID is the flight instance's unique id (seed 000 §11); never inferred.
	FLID string

	// Base fields (FLOP-BASE).
	FLNO Field[string]    // flight number, e.g. CA1234
	AWCD Field[string]    // airline code
	ADID Field[string]    // "A" arrival or "D" departure
	FLTY Field[string]    // flight type / task code
	SODT Field[time.Time] // scheduled operation time (OPERATION_DAY source, §11.2)
	// SODTUnparsed is, in a SCHD record only, the trimmed text of a SODT
	// that is present but not a SIS time (quote it with relaytype.QuoteValue
	// in errors); SODT is then Absent. The domain decides what it means (seed
	// 000 §12.3: an ADFT creates the flight without OPERATION_DAY; §7.1 step
	// 2: a plan cannot derive the day, DEAD(PROTOCOL)). Empty otherwise; in a
	// FLOP an unparseable SODT is a CODEC_ERROR like any other value.
	SODTUnparsed string
	EODT         Field[time.Time] // estimated operation time
	AODT         Field[time.Time] // actual operation time
	ACTY         Field[string]    // aircraft type
	ACRG         Field[string]    // aircraft registration
	TERM         Field[string]    // terminal

	// Status fields (FLOP-STAT).
	STAT Field[string] // flight status code
	ABST Field[string] // abnormal status code (异常状态)
	ABRS Field[string] // abnormal reason code

	// Master/shared fields (FLOP-SHAR, seed 000 §11.4): MAID is the FLID of the
	// master flight (shared flights only); CSOP/CSFT the shared operator / flight.
	MAID Field[string]
	CSOP Field[string]
	CSFT Field[string]

	// Resource collections (seed 000 §11.1), one FLOP subtype each.
	GATE List[Resource]   // boarding gates
	CKIC List[Resource]   // check-in counters
	BELT List[Resource]   // baggage belts / carousels
	STND List[Resource]   // stands
	CHUT List[Resource]   // baggage chutes
	BRDG List[Resource]   // boarding bridges (dock / undock)
	CHOK List[Resource]   // chocks on / off
	DELY List[Delay]      // delays
	ROUT List[RoutePoint] // route (ROUTE_KIND=ROUT)
	ERUT List[RoutePoint] // route (ROUTE_KIND=ERUT), independent of ROUT
	SRVT List[Service]    // services (G-SRVT-VIPF)
	VIPF List[Service]    // VIP services (G-SRVT-VIPF)
}

// Resource is one allocation of a resource collection. Two items with the same
// CODE are two allocations (seed 000 §11.3: never de-duplicated by code).
type Resource struct {
	SEQU Field[int]       // upstream sequence (SOURCE_SEQ; may repeat)
	CODE Field[string]    // resource code, e.g. gate "B12"
	BTIM Field[time.Time] // planned begin
	ETIM Field[time.Time] // planned end
	ABTM Field[time.Time] // actual begin
	AETM Field[time.Time] // actual end
}

// Delay is one delay record.
type Delay struct {
	SEQU Field[int]
	CODE Field[string] // delay reason code
	DURA Field[int]    // minutes, >= 0
	RMRK Field[string]
}

// RoutePoint is one ROUT or ERUT point.
type RoutePoint struct {
	SEQU Field[int]
	APCD Field[string]    // airport code
	SARR Field[time.Time] // scheduled arrival at the point
	SDEP Field[time.Time] // scheduled departure from the point
}

// Service is one SRVT or VIPF item.
type Service struct {
	SEQU Field[int]
	CODE Field[string]
	QNTY Field[int] // quantity, >= 0
	RMRK Field[string]
}
