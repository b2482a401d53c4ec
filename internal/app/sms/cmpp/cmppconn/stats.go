package cmppconn

import "sync/atomic"

// Stats are a connection's counters since it was dialled. Submits are
// counted once each, by outcome.
type Stats struct {
	// InFlight is the window slots taken now.
	InFlight int
	// Accepted, Rejected, FlowControl, Unknown and NotSent count Submits by
	// outcome.
	Accepted, Rejected, FlowControl, Unknown, NotSent uint64
	// Unmatched counts responses that settled no request: an unknown
	// Sequence_Id, the wrong Command_Id for it, or a late SubmitResp.
	Unmatched uint64
	// Late counts the Unmatched that were SubmitResps for Submits already
	// returned as Unknown (LateResponseFunc got them).
	Late uint64
	// Delivers counts DeliverFunc calls that returned; DeliversDeferred the
	// Delivers answered 8 at once (no DeliverFunc, or all busy).
	Delivers, DeliversDeferred uint64
	// ActiveTestsUnanswered counts ActiveTests that waited T in vain.
	ActiveTestsUnanswered uint64
	// Writes counts socket writes; each carries every packet queued since
	// the one before, so Writes per Submit falls as the load rises.
	Writes uint64
}

type counters struct {
	accepted, rejected, flowControl, unknown, notSent atomic.Uint64
	unmatched, late                                   atomic.Uint64
	delivers, deliversDeferred                        atomic.Uint64
	activeTestsUnanswered                             atomic.Uint64
}

func (k *counters) count(o Outcome) {
	switch o {
	case OutcomeAccepted:
		k.accepted.Add(1)
	case OutcomeRejected:
		k.rejected.Add(1)
	case OutcomeFlowControl:
		k.flowControl.Add(1)
	case OutcomeUnknown:
		k.unknown.Add(1)
	case OutcomeNotSent:
		k.notSent.Add(1)
	}
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	k := &c.stats
	return Stats{
		InFlight: c.InFlight(),
		Accepted: k.accepted.Load(), Rejected: k.rejected.Load(), FlowControl: k.flowControl.Load(),
		Unknown: k.unknown.Load(), NotSent: k.notSent.Load(),
		Unmatched: k.unmatched.Load(), Late: k.late.Load(),
		Delivers: k.delivers.Load(), DeliversDeferred: k.deliversDeferred.Load(),
		ActiveTestsUnanswered: k.activeTestsUnanswered.Load(),
		Writes:                c.writes.Load(),
	}
}
