// Package shipbench measures the ship client on a weak link: a backlog of
// Debezium change events built while the ship was offline is drained
// through a throttling proxy (internal/weaklink) — 128 KiB/s, a long round
// trip, connections cut mid-request, an outage — into an in-process shore.
// It reports how much of the link the drain used, the bytes per event on
// the wire, the client's peak memory (the client runs as its own process),
// and how far CRITICAL events overtake the BULK backlog. It backs
// `relay bench shipsync-weaklink`.
package shipbench
