// Package gateway is the sms gateway (issue "sms (1/2)" item 4,
// docs/sms/gateway.md): it consumes submit commands from a Redis Stream with
// a consumer group, submits each to its channel's CMPP supplier at most
// once, and writes the results, status reports and MO to result streams.
//
// The guarantees, in the order a command meets them:
//
//   - Dedupe before any supplier write. A command's submitId is claimed in
//     PostgreSQL (table gateway_submit, migration line "sms_gateway") before
//     a byte goes to the supplier. A submitId whose row exists in any state
//     but NOT_SENT is never submitted again: its recorded result is written
//     again and the entry acked.
//   - Unknown outcome. A row left CLAIMED past Config.StaleClaim belongs to
//     a gateway that died between its claim and the Submit's outcome; the
//     supplier may have the message, so it is settled UNKNOWN, never
//     resubmitted.
//   - Ack order. PostgreSQL settlement, then XADD of the result, then XACK.
//     A crash between two steps repeats the later ones only; results are at
//     least once and carry a stable event id (SubmitEventID) to dedupe on.
//   - Reports and MO are in the report stream before the DeliverResp.
//
// The gateway makes no business decision: a command carries one segment,
// split, coded and addressed by the send chain (Command).
package gateway
