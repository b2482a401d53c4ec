// Package relaydrivertest is the store conformance suite: one Exercise that
// every relaydriver implementation runs (relaypgx on PostgreSQL, relaysqlite on
// SQLite), so both stores keep one behaviour. Each rule of the driver contract
// is one subtest, written to fail if the rule breaks.
//
// The suite is dialect-neutral: it drives stores through the relaydriver
// interfaces only, except for a few raw statements that both dialects accept
// ($1 placeholders, standard SQL on the engine's own tables).
package relaydrivertest
