// Package load is the send chain's load generator (docs/sms/reconcile.md,
// "Load"): Run sends signed POST /v1/messages requests to the API at an
// offered rate for a duration, open loop, and measures what the client saw;
// Drain waits until every message accepted in a tier is decided for good;
// SubmitRate counts the full supplier submits of a tier's first attempts
// per second. Starting the roles and running the tiers belongs to the
// command that uses this package.
package load
