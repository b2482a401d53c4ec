// Package smscrash is the sms gateway's crash harness (docs/sms/gateway.md,
// "Crash harness"): it runs the supplier simulator and real `relay sms
// gateway` child processes on Redis and PostgreSQL, pushes thousands of
// submit commands (some of them twice), kills the gateway with SIGKILL at
// random moments and at its four fault points (internal/faultpoint), restarts
// it under its old consumer name or a new one, lets a last life drain, and
// reconciles the supplier's record, the gateway_submit table and the result
// stream: every submitId submitted at most once (exactly once when
// ACCEPTED), settled, with one identical result per event id, and nothing
// left pending.
package smscrash
