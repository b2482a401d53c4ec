// Package reconcile checks the send chain's databases after a load tier or a
// fault run has drained (docs/sms/reconcile.md): Run reads PostgreSQL (the
// sms tables, the engine's tables, the gateway's dedupe table and the
// completion work records), the Redis streams between the stages and the
// supplier simulator's record files, and returns a Report of six named
// checks, each passed or failed with its figures and a few example ids:
//
//  1. no accepted message lost;
//  2. message ids and client message ids unique;
//  3. at most one supplier submit per submitId (counted at the simulator),
//     every accepted submit there exactly once, every retry linked to the
//     attempt it retries;
//  4. inbox, outbox, completion work and streams drained;
//  5. the ledger's identities per account and per completed message;
//  6. database health: no long idle-in-transaction session, no lock wait,
//     connections within a budget.
//
// Everything is read; nothing is written. A check never prints a phone
// number or content: examples are message, attempt, submit and ledger ids.
package reconcile
