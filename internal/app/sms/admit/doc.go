// Package admit is the front of the SMS send chain (seed 002 §4.1, stage A):
// the HTTP API that takes a client's message into the inbox, and the
// admission stage that decides it — rules, limits, billing freeze — in the
// engine's transaction.
//
// The API (NewAPI, served by `relay sms api` on a relayhttp listener)
// verifies each request's HMAC-SHA256 signature with the app's secret
// (tenancy.AppSecret) and a timestamp within MaxSkewDefault of its clock,
// then enqueues it into the engine queue Queue ("sms-admit", ModeUnordered)
// under the identity "sms:<app>:<client_msg_id>" and writes its inbox row
// (sms_message, state accepted) in the same transaction; it answers 202
// with the message id only after that commit. A resend of a client message
// id answers the first message's id with 200 and "duplicate": true.
//
// The stage (Stage, a relay.BatchHandler) claims up to TxBatchDefault
// messages per transaction, loads one rules snapshot per batch
// (tenancy.Load), checks every message and number (rules.Snapshot.Check),
// locks the batch's limit counters in key order and counts under the locks,
// writes each decision (admitted, or refused with its rules.Reason), and
// posts each admitted message's freeze (tenancy.Post, key
// "freeze:<message id>") last, in account order, so the account row — the
// chain's hottest lock — is held only for the end of the transaction and two
// batches never wait for each other in a cycle. A refusal is the message's
// business outcome: the engine message succeeds; only infrastructure errors
// retry.
//
// Why "admit" and not "chain": the package is the chain's admission — the
// inbox and its decision — and nothing after it; routing and submitting
// (stage B), the outbox to the gateway (C) and the callbacks (D) are the
// next packages. docs/sms/api.md has the request format, the signature
// recipe, every status and reason code and the guarantees with their tests.
package admit
