// Package tenancy keeps the send chain's tenancy and rules in PostgreSQL
// (migration line "sms", docs/sms/model.md): carriers and number segments,
// enterprises, apps, channels (supplier accounts), signatures and their
// registrations per channel, templates, blacklists, channel groups, routes,
// prices, frequency limits, accounts and the append-only ledger.
//
// Load reads every rule in one read-only, repeatable-read transaction into
// a rules.Snapshot, which the stages use read-only for one batch. Post
// writes one ledger entry and its account change, idempotently by the
// entry's key, in the caller's transaction. Seed loads a Fixture
// idempotently (DemoFixture is the realistic one `relay sms seed-data`
// loads).
//
// Secrets: a channel's CMPP secret is never stored (a reference to a file
// is); an app's HMAC secret is stored, in a column marked as a secret,
// because the API must recompute request HMACs with it. It is read only by
// AppSecret, never by Load.
package tenancy
