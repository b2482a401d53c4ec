package flight

import (
	"cmp"
	"slices"
)

// MAFLEntry is one member of a master flight's MAFL projection: a shared
// (child) flight's FLID and FLNO (seed 000 §11.4).
type MAFLEntry struct {
	FLID string
	FLNO string
}

// Children returns the MAFL members of master among states (seed 000 §11.4):
// the ACTIVE flights whose MAID is master.FLID, excluding master itself (a
// MAID = FLID self-reference is never in any MAFL), in FLID ascending (byte)
// order. Only a master — MAID == "" — has children: for a shared flight, or
// nil, it returns nil. It does not look at master's own Status.
func Children(master *State, states map[string]*State) []*State {
	if master == nil || master.MAID != "" {
		return nil
	}
	var out []*State
	for _, s := range states {
		if s != nil && s.Status == Active && s.MAID == master.FLID && s.FLID != master.FLID {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, byFLID)
	return out
}

// Projection returns the MAFL of s among states: nil unless s is an ACTIVE
// master (MAID == ""), else its Children as (FLID, FLNO) pairs — nil too
// when it has none. Decide compares projections by value to find the masters
// a message affects (seed 000 §12.3: by FLID value, never by reference).
func Projection(s *State, states map[string]*State) []MAFLEntry {
	if s == nil || s.Status != Active {
		return nil
	}
	return entries(Children(s, states))
}

func entries(children []*State) []MAFLEntry {
	var out []MAFLEntry
	for _, c := range children {
		out = append(out, MAFLEntry{FLID: c.FLID, FLNO: c.FLNO})
	}
	return out
}

func byFLID(a, b *State) int { return cmp.Compare(a.FLID, b.FLID) }

// projections returns the MAFL of each master of byMaster (master FLID →
// its children, in any order) that get finds as an ACTIVE master (MAID ==
// ""); a dangling MAID, or a master that is not one, has none.
func projections(byMaster map[string][]*State, get func(id string) *State) map[string][]MAFLEntry {
	out := make(map[string][]MAFLEntry, len(byMaster))
	for id, kids := range byMaster {
		m := get(id)
		if m == nil || m.Status != Active || m.MAID != "" {
			continue
		}
		slices.SortFunc(kids, byFLID)
		out[id] = entries(kids)
	}
	return out
}
