package cli

import (
	"context"
)

// shipsyncRoles are the roles of `relay shipsync`.
func shipsyncRoles() map[string]command {
	return map[string]command{
		"capture": {"Debezium-format change capture without Debezium: triggers + changelog on the ship's MariaDB, " +
			"envelopes to a Kafka-API topic per table (install, uninstall, run, prune; docs/shipsync/capture.md)", runShipsyncCapture},
		"pki": {"make the development PKI of mutual TLS: a CA (init), the shore's server certificate (server) and " +
			"node certificates whose identity is the node id (node); never overwrites (docs/shipsync/shore.md)", runShipsyncPKI},
		"backlog": {"old backlog of one-way rules: approve that a node's events captured before a boundary are not " +
			"delivered (EXPIRED_APPROVED, immutable, audited), and list the approvals with what each node expired", runShipsyncBacklog},
		"blocked": {"list the ship client's blocked events from its state file: undecodable, refused by a rule, " +
			"invalid or refused by the shore; each holds its partition's checkpoint until resolved", runShipsyncBlocked},
		"client": {"the ship client: consume the CDC topics (Debezium envelopes), normalise each change under the " +
			"node's rules, keep the state in SQLite, upload batches to the shore over mutual TLS, pull receipts and " +
			"commit the consumer group only up to the contiguous terminal checkpoint (docs/shipsync/client.md)", runShipsyncClient},
		"console": {"the management API (/api/v1: nodes, rules, conflicts with decisions, audit search; bearer tokens " +
			"with roles, idempotency keys, audited) and the web console (/console/) on the shore's PostgreSQL and " +
			"database; also served by shipsync shore --console-addr (docs/shipsync/console.md)", runShipsyncConsole},
		"conflict": {"the shore's conflict cases: list, show (evidence and decision), decide by hand (re-checked " +
			"against the shore's row, audited) and cancel (docs/shipsync/conflicts.md)", runShipsyncConflict},
		"demo": {"the whole uplink on this machine: a ship database with the trigger capture → CDC topics (Kafka " +
			"API, in process) → ship client → shore over mutual TLS → shore database, with progress, then the two " +
			"databases compared row by row and every event reconciled", runShipsyncDemo},
		"node": {"the shore's node registry in PostgreSQL: add a node from its certificate, rotate (a second " +
			"active certificate for the overlap), retire a certificate, revoke a node, allow a rule version, list, audit", runShipsyncNode},
		"chaos": {"the shore's crash harness: a shore process killed with SIGKILL at random moments and at each step of " +
			"the apply workflow while a test ship uploads; then every event is reconciled (docs/shipsync/crash.md)", runShipsyncChaos},
		"probe": {"GET a health URL (/healthz, /readyz) and fail unless it answers 2xx: the health check of the " +
			"distroless image, which has no shell or curl (docs/shipsync/operations.md)", runShipsyncProbe},
		"snapshot": {"snapshot tasks on the ship: start one for a rule (the running client with --ship-db sends the " +
			"table's rows as SNAPSHOT events, holds the rule's newer changes until the shore applied them, then replays " +
			"them) and list them with their progress (docs/shipsync/snapshot.md)", runShipsyncSnapshot},
		"retain": {"the shore's retention pass (once or --every): old throughput samples, upload-batch answers and " +
			"idempotency keys deleted, settled inbox events cut down to their header; never anything still needed " +
			"(docs/shipsync/operations.md)", runShipsyncRetain},
		"rule": {"the shore's rule registry and releases: which shore table a rule version writes, its key and " +
			"the columns its events may carry (add, list); the release lifecycle draft → validate → approve → " +
			"distribute → ACTIVE on every node, rollback, status (docs/shipsync/operations.md)", runShipsyncRule},
		"shore": {"the shore server: the data API over mutual TLS (POST /sync/v1/batches into the idempotent inbox, " +
			"answered per event after commit; GET /sync/v1/receipts; heartbeat; config) and, with --target, the " +
			"applier writing released events to the shore database in source order per record", runShipsyncShore},
		"upload": {"a small test client: upload one batch of synthetic INSERT events to the shore over mutual TLS " +
			"and print the per-event answer (the same --first and --batch-id resend)", runShipsyncUpload},
	}
}

// runShipsync dispatches `relay shipsync <role>`.
func runShipsync(ctx context.Context, env *Env, args []string) error {
	return dispatchRoles(ctx, env, "shipsync", "docs/shipsync/shore.md", shipsyncRoles(), args)
}
