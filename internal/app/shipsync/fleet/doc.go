// Package fleet simulates a fleet of ships reconnecting at once after an
// outage against one shore process: every node has its own certificate
// and a small backlog, waits a random start-up jitter, then uploads its
// backlog through the real data API over mutual TLS, honours 429 and
// Retry-After, heartbeats and pulls receipts until every event has its
// terminal result. It measures how long the fleet takes to catch up,
// how often the shore pushed back, how many requests the shore had in
// flight and how many PostgreSQL connections it used against its pool
// budget, and reconciles every event: in the shore's inbox exactly once
// and terminal at its node. It backs `relay bench shipsync-fleet`.
package fleet
