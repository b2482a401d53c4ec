// Package chaincrash is the send chain's crash harness (docs/sms/crash.md):
// it seeds the tenancy fixture into a fresh PostgreSQL schema, runs a
// simulated supplier per channel in its own process, and runs every role of
// the chain — `relay sms api --no-stage`, `worker`, `publisher`, `gateway
// --channels-from-db` and `callback` — as a child process of its own. While
// signed requests go through the HTTP API (each resent with the same
// client_msg_id until answered), it kills the roles in turn with SIGKILL at
// random moments, restarts every other one armed at its fault points
// (internal/faultpoint), makes suppliers drop their connections and,
// optionally, restarts Redis. Then every role runs a clean life until every
// message is decided and the chain is quiet, stops with SIGTERM, and the
// chain is reconciled (internal/app/sms/reconcile): nothing lost, no
// submitId accepted twice by a supplier, no ledger key twice, the ledger
// balanced, nothing left pending.
package chaincrash
