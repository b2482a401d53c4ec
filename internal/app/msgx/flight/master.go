package flight

import (
	"cmp"
	"iter"
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

// projectionsOf returns the MAFL of each ACTIVE master among masters, in one
// pass over the flights ids yields (each looked up with get): a master
// without children, or an id that is not an ACTIVE master (MAID == ""), has
// none.
func projectionsOf(masters map[string]bool, get func(id string) *State, ids iter.Seq[string]) map[string][]MAFLEntry {
	byMaster := make(map[string][]*State)
	for id := range ids {
		if s := get(id); s != nil && s.Status == Active && s.MAID != "" && s.MAID != s.FLID && masters[s.MAID] {
			byMaster[s.MAID] = append(byMaster[s.MAID], s)
		}
	}
	out := make(map[string][]MAFLEntry, len(byMaster))
	for id, kids := range byMaster {
		m := get(id)
		if m == nil || m.Status != Active || m.MAID != "" {
			continue // dangling MAID, or a master that is not one: no projection
		}
		slices.SortFunc(kids, byFLID)
		out[id] = entries(kids)
	}
	return out
}
