// Package flight is the msgx flight domain (seed 000 §11–§12): the full
// flight state (State), and the pure decision logic that turns the current
// states and a decoded SIS message into the next states and the events to
// emit. It does no I/O: a coordinator loads the states inside the PostgreSQL
// transaction that holds PIPELINE_LOCK, calls the decision, and saves the result
// with the events and the message's terminal state (seed 000 §5.2, §12).
//
// The flow for one SCHD, FLOP or FDEL message:
//
//	ids := flight.Involved(msg, cur)        // cur: whatever the coordinator already holds, may be nil
//	snap := load(ids) ∪ load(MAID ∈ ids)    // the flights and every flight pointing at one of them
//	ch, err := flight.Decide(snap, msg, flight.Msg{ID: id, Kind: msg.Meta.Kind(), Now: now}, settings)
//	// *ProtocolError: DEAD(PROTOCOL), write nothing; ch.Skipped != "": SKIPPED(reason);
//	// otherwise save ch.Saved and, per saved flight, KAFKA:msg NoticeDocument
//	// and KAFKA:schd Document(s, Children(s, states), set.MessageLocation()) (a tombstone for DELETED).
//
// Decisions made here beyond the seed's text:
//
//   - OPERATION_DAY comes only from a SCHD (DNLD, RESP, ADFT) record's SODT,
//     once; FLOP never derives or changes it, even when FLOP-BASE moves SODT.
//   - A FLOP on an unknown FLID creates an ACTIVE flight with no
//     OPERATION_DAY; a FLOP on a DELETED flight is skipped
//     ("flight-deleted:<FLID>"). FDEL of an unknown or DELETED flight is
//     skipped ("unknown-flight:<FLID>", "flight-deleted:<FLID>").
//   - A SCHD record for a DELETED flight is not applied and not validated
//     (Change.SkippedDeleted); the rest of the package applies. A plan never
//     revives a deleted flight: FLID is never reused (C-21).
//   - A valid message that changes nothing yields an empty Change (Saved and
//     Skipped both empty): a success, not a skip.
//   - Every saved flight gets one KAFKA:msg notice, shared flights included;
//     a master whose MAFL projection changed is saved with "MAFL" in its
//     notice fields, bumped once per message.
package flight
