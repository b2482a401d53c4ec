package flight

import "slices"

// Changed returns the sorted names of what differs between old and next:
// "STATE", "OPERATION_DAY", the scalar element names (FLNO … CSFT) and the
// collection names (GATE … CHOK, DELY, ROUT, ERUT, SRVT, VIPF). Version,
// LastMsgID, CreatedAt and UpdatedAt are bookkeeping and ignored. A nil old
// compares with the empty state, so for a new flight it names everything the
// flight has. Times compare as instants (time.Equal), *int by value; an empty
// result means the two states are equal.
func Changed(old, next *State) []string {
	if old == nil {
		old = &State{}
	}
	if next == nil {
		next = &State{}
	}
	var names []string
	add := func(name string, same bool) {
		if !same {
			names = append(names, name)
		}
	}
	add("STATE", old.Status == next.Status)
	add("OPERATION_DAY", old.OperationDay == next.OperationDay)
	add("FLNO", old.FLNO == next.FLNO)
	add("AWCD", old.AWCD == next.AWCD)
	add("ADID", old.ADID == next.ADID)
	add("FLTY", old.FLTY == next.FLTY)
	add("SODT", old.SODT.Equal(next.SODT))
	add("EODT", old.EODT.Equal(next.EODT))
	add("AODT", old.AODT.Equal(next.AODT))
	add("ACTY", old.ACTY == next.ACTY)
	add("ACRG", old.ACRG == next.ACRG)
	add("TERM", old.TERM == next.TERM)
	add("STAT", old.STAT == next.STAT)
	add("ABST", old.ABST == next.ABST)
	add("ABRS", old.ABRS == next.ABRS)
	add("MAID", old.MAID == next.MAID)
	add("CSOP", old.CSOP == next.CSOP)
	add("CSFT", old.CSFT == next.CSFT)
	for k := range NumResourceKinds {
		add(k.String(), slices.EqualFunc(old.Resources[k], next.Resources[k], Resource.equal))
	}
	add("DELY", slices.EqualFunc(old.Delays, next.Delays, Delay.equal))
	for k := range NumRouteKinds {
		add(k.String(), slices.EqualFunc(old.Routes[k], next.Routes[k], RoutePoint.equal))
	}
	for k := range NumServiceKinds {
		add(k.String(), slices.EqualFunc(old.Services[k], next.Services[k], Service.equal))
	}
	slices.Sort(names)
	return names
}

func (r Resource) equal(o Resource) bool {
	return eqInt(r.SourceSeq, o.SourceSeq) && r.Code == o.Code && r.Begin.Equal(o.Begin) &&
		r.End.Equal(o.End) && r.ActualBegin.Equal(o.ActualBegin) && r.ActualEnd.Equal(o.ActualEnd)
}

func (d Delay) equal(o Delay) bool {
	return eqInt(d.SourceSeq, o.SourceSeq) && d.Code == o.Code && eqInt(d.Minutes, o.Minutes) && d.Remark == o.Remark
}

func (p RoutePoint) equal(o RoutePoint) bool {
	return eqInt(p.SourceSeq, o.SourceSeq) && p.Airport == o.Airport && p.SchedArr.Equal(o.SchedArr) &&
		p.SchedDep.Equal(o.SchedDep)
}

func (s Service) equal(o Service) bool {
	return eqInt(s.SourceSeq, o.SourceSeq) && s.Code == o.Code && eqInt(s.Quantity, o.Quantity) && s.Remark == o.Remark
}

func eqInt(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
