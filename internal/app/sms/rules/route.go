package rules

import (
	"fmt"
	"sort"
	"strings"
)

// RouteOpts tune route selection.
type RouteOpts struct {
	// RequireConnected skips channels whose ConnState is not connected. The
	// send chain sets it once the gateway reports connection states; until
	// then every channel's state is whatever the table was seeded with.
	RequireConnected bool
}

// Candidate is a channel a message may go out on, in the order to try.
type Candidate struct {
	ChannelID     int64
	Channel       string
	GroupID       int64
	RoutePriority int
	Priority      int
	Weight        int
	// SrcID is the channel's SrcID with the signature's extension code.
	SrcID string
}

// Candidates returns the channels that may carry app's message to carrier
// signed with signature sig, best first: the routes of (app, carrier, sig)
// if there are any, otherwise those of (app, carrier, any signature) — a
// route naming the signature replaces the catch-all, it does not add to it
// — in route priority order; within a route's group by member priority,
// then weight (heavier first), then channel id. A channel appears once.
// Skipped: inactive channels, channels of another carrier, channels on
// which sig's registration is not approved, and with
// opts.RequireConnected channels not connected.
//
// ReasonNoRoute when no route matches; ReasonNoChannel when routes match but
// every channel was skipped (the detail counts why).
func (s *Snapshot) Candidates(app int64, carrier string, sig int64, opts RouteOpts) ([]Candidate, error) {
	routes := s.routes[routeKey{app, carrier, sig}]
	if len(routes) == 0 {
		routes = s.routes[routeKey{app, carrier, 0}]
	}
	if len(routes) == 0 {
		return nil, refuse(ReasonNoRoute, "no route for app %d, carrier %s and the signature", app, carrier)
	}
	var out []Candidate
	seen := map[int64]bool{}
	var inactive, otherCarrier, unregistered, disconnected int
	for _, r := range routes {
		g := s.groups[r.GroupID]
		members := append([]GroupMember(nil), g.Members...)
		sort.SliceStable(members, func(i, j int) bool {
			a, b := members[i], members[j]
			if a.Priority != b.Priority {
				return a.Priority < b.Priority
			}
			if a.Weight != b.Weight {
				return a.Weight > b.Weight
			}
			return a.ChannelID < b.ChannelID
		})
		for _, m := range members {
			if seen[m.ChannelID] {
				continue
			}
			seen[m.ChannelID] = true
			c := s.channels[m.ChannelID]
			reg := s.regs[regKey{sig, c.ID}]
			switch {
			case !c.Active:
				inactive++
			case c.Carrier != "" && c.Carrier != carrier:
				otherCarrier++
			case reg == nil || reg.State != RegApproved:
				unregistered++
			case opts.RequireConnected && c.ConnState != ConnConnected:
				disconnected++
			default:
				out = append(out, Candidate{ChannelID: c.ID, Channel: c.Name, GroupID: g.ID, RoutePriority: r.Priority,
					Priority: m.Priority, Weight: m.Weight, SrcID: c.SrcID + reg.ExtCode})
			}
		}
	}
	if len(out) == 0 {
		var why []string
		for _, n := range []struct {
			n    int
			what string
		}{{inactive, "inactive"}, {otherCarrier, "of another carrier"}, {unregistered, "signature not approved"}, {disconnected, "not connected"}} {
			if n.n > 0 {
				why = append(why, fmt.Sprintf("%d %s", n.n, n.what))
			}
		}
		return nil, refuse(ReasonNoChannel, "app %d, carrier %s: %d channels, none usable (%s)", app, carrier, len(seen), strings.Join(why, ", "))
	}
	return out, nil
}

// Pick chooses among the first tier of cands (those sharing the first
// candidate's route and member priority) by weight, deterministically from
// key (a message's id, so a replay picks the same channel), and returns the
// index into cands; -1 when cands is empty.
func Pick(cands []Candidate, key uint64) int {
	if len(cands) == 0 {
		return -1
	}
	total, n := uint64(0), 0
	for _, c := range cands {
		if c.RoutePriority != cands[0].RoutePriority || c.Priority != cands[0].Priority {
			break
		}
		total += uint64(max(c.Weight, 1))
		n++
	}
	// Mix the key so consecutive ids spread over the weights.
	x := key * 0x9e3779b97f4a7c15
	x ^= x >> 31
	at := x % total
	for i := range n {
		w := uint64(max(cands[i].Weight, 1))
		if at < w {
			return i
		}
		at -= w
	}
	return n - 1
}
