package flight

import (
	"time"

	"github.com/relayhq/relay/internal/app/msgx/sisxml"
)

// Conversions from the decoded SIS items to state items. An item is replaced
// whole (there is no per-item patch, docs/msgx/sis-xml.md §5), so inside an
// item both Absent and Empty mean NULL. Times are kept as the decoder's wall
// clocks (see Settings.MessageZone).

// ResourceOf converts one decoded resource ITEM (SEQU becomes SourceSeq).
func ResourceOf(r sisxml.Resource) Resource {
	return Resource{
		SourceSeq:   intOf(r.SEQU),
		Code:        r.CODE.Value,
		Begin:       r.BTIM.Value,
		End:         r.ETIM.Value,
		ActualBegin: r.ABTM.Value,
		ActualEnd:   r.AETM.Value,
	}
}

// DelayOf converts one decoded DELY ITEM.
func DelayOf(d sisxml.Delay) Delay {
	return Delay{SourceSeq: intOf(d.SEQU), Code: d.CODE.Value, Minutes: intOf(d.DURA), Remark: d.RMRK.Value}
}

// RoutePointOf converts one decoded ROUT or ERUT ITEM.
func RoutePointOf(p sisxml.RoutePoint) RoutePoint {
	return RoutePoint{SourceSeq: intOf(p.SEQU), Airport: p.APCD.Value, SchedArr: p.SARR.Value, SchedDep: p.SDEP.Value}
}

// ServiceOf converts one decoded SRVT or VIPF ITEM.
func ServiceOf(s sisxml.Service) Service {
	return Service{SourceSeq: intOf(s.SEQU), Code: s.CODE.Value, Quantity: intOf(s.QNTY), Remark: s.RMRK.Value}
}

// intOf maps a presence-aware integer to a nullable one.
func intOf(f sisxml.Field[int]) *int {
	if f.Presence != sisxml.Set {
		return nil
	}
	v := f.Value
	return &v
}

// policy is how one kind of message merges a record into a state.
type policy struct {
	applyEmpty  bool // an explicit empty element clears (SCHD DNLD/RESP, FLOP); ADFT ignores it
	clearAbsent bool // a missing element clears (SCHD DNLD/RESP under AbsentClear only)
}

func mergeScalar[T any](dst *T, f sisxml.Field[T], p policy) {
	var zero T
	switch f.Presence {
	case sisxml.Set:
		*dst = f.Value
	case sisxml.Empty:
		if p.applyEmpty {
			*dst = zero
		}
	default:
		if p.clearAbsent {
			*dst = zero
		}
	}
}

// mergeList replaces a whole collection; an empty result is nil (State convention).
func mergeList[S, T any](dst *[]T, l sisxml.List[S], conv func(S) T, p policy) {
	switch l.Presence {
	case sisxml.Set:
		var items []T
		for _, it := range l.Items {
			items = append(items, conv(it))
		}
		*dst = items
	case sisxml.Empty:
		if p.applyEmpty {
			*dst = nil
		}
	default:
		if p.clearAbsent {
			*dst = nil
		}
	}
}

// merge applies one decoded record to st under p. It never touches FLID or
// the computed fields (Status, Version, OperationDay, LastMsgID, CreatedAt,
// UpdatedAt).
func merge(st *State, f *sisxml.Flight, p policy) {
	mergeScalar(&st.FLNO, f.FLNO, p)
	mergeScalar(&st.AWCD, f.AWCD, p)
	mergeScalar(&st.ADID, f.ADID, p)
	mergeScalar(&st.FLTY, f.FLTY, p)
	mergeScalar[time.Time](&st.SODT, f.SODT, p)
	mergeScalar[time.Time](&st.EODT, f.EODT, p)
	mergeScalar[time.Time](&st.AODT, f.AODT, p)
	mergeScalar(&st.ACTY, f.ACTY, p)
	mergeScalar(&st.ACRG, f.ACRG, p)
	mergeScalar(&st.TERM, f.TERM, p)

	mergeScalar(&st.STAT, f.STAT, p)
	mergeScalar(&st.ABST, f.ABST, p)
	mergeScalar(&st.ABRS, f.ABRS, p)

	mergeScalar(&st.MAID, f.MAID, p)
	mergeScalar(&st.CSOP, f.CSOP, p)
	mergeScalar(&st.CSFT, f.CSFT, p)

	for k, l := range [NumResourceKinds]sisxml.List[sisxml.Resource]{
		GATE: f.GATE, CKIC: f.CKIC, BELT: f.BELT, STND: f.STND, CHUT: f.CHUT, BRDG: f.BRDG, CHOK: f.CHOK,
	} {
		mergeList(&st.Resources[k], l, ResourceOf, p)
	}
	mergeList(&st.Delays, f.DELY, DelayOf, p)
	mergeList(&st.Routes[ROUT], f.ROUT, RoutePointOf, p)
	mergeList(&st.Routes[ERUT], f.ERUT, RoutePointOf, p)
	mergeList(&st.Services[SRVT], f.SRVT, ServiceOf, p)
	mergeList(&st.Services[VIPF], f.VIPF, ServiceOf, p)
}
