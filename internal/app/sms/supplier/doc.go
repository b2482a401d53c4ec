// Package supplier is a simulated carrier gateway (ISMG): a real CMPP 2.0 and
// 3.0 server over TCP for testing the sms chain, or any CMPP client, against
// the behaviours that break them. docs/sms/cmpp.md ("Supplier simulator")
// lists every setting with its default; `relay sms supplier` runs it.
//
// Seed 002 §5 step 0 runs the chain against fixed supplier accounts on a
// simulator; this is that simulator. What it does, as an ISMG does (the CMPP
// standard's §7–§8):
//
//   - Login: checks Source_Addr, the MD5 AuthenticatorSource and the version
//     per Account, answers ConnectResp with the standard's Status (2 bad
//     source address, 3 authentication, 4 version too high) or its own
//     (StatusVersionRefused, StatusTooManyConns) and signs a successful one
//     with AuthenticatorISMG.
//   - Keep-alive: answers ActiveTest; after Keepalive (C) without a packet it
//     sends ActiveTest itself, every ResponseTimeout (T), and drops the
//     connection after Tries (N) unanswered. Terminate is answered and ends
//     the connection; Close sends Terminate to every peer.
//   - Submit: enforces the window (Account.Window unanswered Submits per
//     connection: one more is answered Result 8 or dropped) and the account's
//     rate, refuses a repeated Sequence_Id (3) and bad fields, then accepts
//     or refuses by the Behaviour's draws. An accepted Submit gets Msg_Ids in
//     the standard layout (n for n destinations), unique across restarts
//     with a record, and is appended to the record before it is answered.
//   - Reports: one status-report Deliver per destination of every accepted
//     Submit that asked for one — so one per segment of a long message, each
//     with its segment's Msg_Id — after a drawn delay, optionally before the
//     SubmitResp or twice. MO messages, long ones in UDH parts, on a timer or
//     through SendMO. An account's Delivers go out on any of its connections,
//     at most Window unanswered per connection, are sent again after T
//     without an answer (N times in all), and wait while it has none.
//   - Failures on purpose: latency, flow control, failure Results, withheld
//     SubmitResps (accepted all the same), dropped connections.
//
// Every timer runs on the injected Clock (one scheduler: a heap driven by
// Clock.After), so tests drive time with a fake clock. Random draws come
// from Config.Seed: each connection draws from its own source, seeded by its
// number, so the same traffic on the same seed meets the same decisions.
//
// The record (RecordConfig) is an append-only file of JSON lines, one per
// accepted Submit, written before the SubmitResp; ReadRecord and
// Record.Counts read it back for tests and reconciliation: how many Submits
// the supplier accepted per submit key, the key being the number a gateway
// writes into the Submit's own Msg_Id (or the 3.0 LinkID).
//
// Logs carry account ids, connection numbers, commands and counts; never a
// secret, a phone number or message content.
package supplier
