// Package cmppconn holds the SP side of CMPP connections to a carrier's
// ISMG: Dial logs in and returns a Conn that sends Submits under a sliding
// window, keeps the link alive and hands Delivers to the caller; a Pool
// keeps a channel's K connections up and spreads Submits over them under
// the channel's rate limit. The wire format is package cmpp's;
// docs/sms/cmpp.md ("Connections") describes this package for operators.
//
// # The pending-response race
//
// An ISMG may answer a Submit before the call that wrote it has returned.
// A client that writes first and registers the waiting request after finds
// no one waiting for the fastest responses, drops them, and later reports
// a timeout for a message the carrier accepted — which the standard's
// resend turns into a duplicate SMS (seed 002 §10.12 records it happening:
// reproduced at the 206th submit on 2.0 and the 7th on 3.0). Here Submit
// takes a window slot, allocates the Sequence_Id and registers the request
// under one lock before the packet is queued; the single writer goroutine
// only then writes it; the reader completes requests by Sequence_Id. No
// response can overtake its request's registration.
//
// # Outcomes
//
// Every Submit ends in one Outcome; SubmitError carries it with the cause.
//
//   - NotSent: no byte of the packet reached the socket. Submit returns it
//     when ctx ends or the connection closes before the request is
//     registered (rate limit, window), when the packet does not encode, and
//     when the write that was to carry it failed before its first byte, or
//     the connection closed while it was still queued. Safe to send again.
//   - Accepted, Rejected, FlowControl: a SubmitResp with the request's
//     Sequence_Id and Command_Id came back with Result 0, other than 0 and
//     8, or 8. FlowControl means "later", Rejected "never".
//   - Unknown: the write that carried the packet began (at least its first
//     byte was handed to the socket) and no SubmitResp was matched: the
//     response timeout passed, ctx ended after registration, the
//     connection closed (read error, write error after the first byte,
//     ActiveTest unanswered, the ISMG's Terminate), or the SubmitResp did
//     not decode. The carrier may have accepted the message. It is never
//     reported as failed and never resent by this package; the caller
//     reconciles it by status report, by a late SubmitResp
//     (Config.LateResponseFunc) or by a person.
//
// The window slot is freed when the request is settled, whatever the
// outcome: on the response, on the timeout, on a write error, on loss.
//
// # Time
//
// Every timeout, the keep-alive, the rate limit, the reconnect backoff and
// the Connect timestamp read Config.Clock; nothing here calls time.Now or
// sleeps, so tests drive all of it with relayclock.Fake. Socket deadlines
// are not used (they would read the wall clock): a watchdog on the clock
// closes the socket instead.
package cmppconn
