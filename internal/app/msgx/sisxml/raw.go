package sisxml

// The raw* types mirror the XML one-to-one. Every element is a pointer (nil =
// absent) or a slice, and every leaf a string, so unmarshalling never fails on
// a value: value formats are checked afterwards, where a failure can be
// classified CODEC_ERROR. Unknown elements are skipped (forward compatible).

type rawMsg struct {
	META []rawMeta `xml:"META"`
	SCHD []rawSchd `xml:"SCHD"`
	FLOP []rawFlop `xml:"FLOP"`
	FDEL []rawFdel `xml:"FDEL"`
	REFD []rawRefd `xml:"REFD"`
	REQT []rawReqt `xml:"REQT"`
}

type rawMeta struct {
	SNDR *string `xml:"SNDR"`
	RCVR *string `xml:"RCVR"`
	SEQN *string `xml:"SEQN"`
	DTTM *string `xml:"DTTM"`
	TYPE *string `xml:"TYPE"`
	STYP *string `xml:"STYP"`
}

type rawSchd struct {
	RCNT *string     `xml:"RCNT"`
	RQSQ *string     `xml:"RQSQ"`
	FLGT []rawFlight `xml:"FLGT"`
}

type rawFlop struct {
	FLGT []rawFlight `xml:"FLGT"`
}

type rawFdel struct {
	FLID *string `xml:"FLID"`
}

type rawRefd struct {
	RTYP *string     `xml:"RTYP"`
	RCNT *string     `xml:"RCNT"`
	RQSQ *string     `xml:"RQSQ"`
	REFR []rawRefRec `xml:"REFR"`
}

type rawRefRec struct {
	RKEY *string `xml:"RKEY"`
	RVAL *string `xml:"RVAL"`
}

type rawReqt struct {
	ODAY *string `xml:"ODAY"`
	RTYP *string `xml:"RTYP"`
}

type rawList[T any] struct {
	Text string `xml:",chardata"`
	ITEM []T    `xml:"ITEM"`
}

type rawResource struct {
	SEQU *string `xml:"SEQU"`
	CODE *string `xml:"CODE"`
	BTIM *string `xml:"BTIM"`
	ETIM *string `xml:"ETIM"`
	ABTM *string `xml:"ABTM"`
	AETM *string `xml:"AETM"`
}

type rawDelay struct {
	SEQU *string `xml:"SEQU"`
	CODE *string `xml:"CODE"`
	DURA *string `xml:"DURA"`
	RMRK *string `xml:"RMRK"`
}

type rawRoutePoint struct {
	SEQU *string `xml:"SEQU"`
	APCD *string `xml:"APCD"`
	SARR *string `xml:"SARR"`
	SDEP *string `xml:"SDEP"`
}

type rawService struct {
	SEQU *string `xml:"SEQU"`
	CODE *string `xml:"CODE"`
	QNTY *string `xml:"QNTY"`
	RMRK *string `xml:"RMRK"`
}

type rawFlight struct {
	FLID *string `xml:"FLID"`

	FLNO *string `xml:"FLNO"`
	AWCD *string `xml:"AWCD"`
	ADID *string `xml:"ADID"`
	FLTY *string `xml:"FLTY"`
	SODT *string `xml:"SODT"`
	EODT *string `xml:"EODT"`
	AODT *string `xml:"AODT"`
	ACTY *string `xml:"ACTY"`
	ACRG *string `xml:"ACRG"`
	TERM *string `xml:"TERM"`

	STAT *string `xml:"STAT"`
	ABST *string `xml:"ABST"`
	ABRS *string `xml:"ABRS"`

	MAID *string `xml:"MAID"`
	CSOP *string `xml:"CSOP"`
	CSFT *string `xml:"CSFT"`

	GATE *rawList[rawResource]   `xml:"GATE"`
	CKIC *rawList[rawResource]   `xml:"CKIC"`
	BELT *rawList[rawResource]   `xml:"BELT"`
	STND *rawList[rawResource]   `xml:"STND"`
	CHUT *rawList[rawResource]   `xml:"CHUT"`
	BRDG *rawList[rawResource]   `xml:"BRDG"`
	CHOK *rawList[rawResource]   `xml:"CHOK"`
	DELY *rawList[rawDelay]      `xml:"DELY"`
	ROUT *rawList[rawRoutePoint] `xml:"ROUT"`
	ERUT *rawList[rawRoutePoint] `xml:"ERUT"`
	SRVT *rawList[rawService]    `xml:"SRVT"`
	VIPF *rawList[rawService]    `xml:"VIPF"`
}

// element is one carried-or-not element of a flight record and the FLOP
// subtype that owns it.
type element struct {
	name, group string
	carried     bool
}

// elements lists every flight element except FLID with its owning FLOP
// subtype (docs/msgx/sis-xml.md "FLOP subtypes").
func (r *rawFlight) elements() []element {
	return []element{
		{"FLNO", "BASE", r.FLNO != nil}, {"AWCD", "BASE", r.AWCD != nil}, {"ADID", "BASE", r.ADID != nil},
		{"FLTY", "BASE", r.FLTY != nil}, {"SODT", "BASE", r.SODT != nil}, {"EODT", "BASE", r.EODT != nil},
		{"AODT", "BASE", r.AODT != nil}, {"ACTY", "BASE", r.ACTY != nil}, {"ACRG", "BASE", r.ACRG != nil},
		{"TERM", "BASE", r.TERM != nil},
		{"STAT", "STAT", r.STAT != nil}, {"ABST", "STAT", r.ABST != nil}, {"ABRS", "STAT", r.ABRS != nil},
		{"MAID", "SHAR", r.MAID != nil}, {"CSOP", "SHAR", r.CSOP != nil}, {"CSFT", "SHAR", r.CSFT != nil},
		{"GATE", "GATE", r.GATE != nil}, {"CKIC", "CKIC", r.CKIC != nil}, {"BELT", "BELT", r.BELT != nil},
		{"STND", "STND", r.STND != nil}, {"CHUT", "CHUT", r.CHUT != nil}, {"BRDG", "BRDG", r.BRDG != nil},
		{"CHOK", "CHOK", r.CHOK != nil}, {"DELY", "DELY", r.DELY != nil}, {"ROUT", "ROUT", r.ROUT != nil},
		{"ERUT", "ERUT", r.ERUT != nil}, {"SRVT", "SRVT", r.SRVT != nil}, {"VIPF", "VIPF", r.VIPF != nil},
	}
}
