package relay

import (
	"fmt"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// resultKind is what a Result asks the engine to do.
type resultKind int

const (
	resultInvalid resultKind = iota // the zero Result: a handler bug
	resultSucceeded
	resultSkip
	resultRetry
	resultDead
)

// Result is a Handler's decision about one message. Build it with Succeeded,
// Skip, Retry, RetryAfter or Dead. The zero Result is invalid and counts as
// Retry(INTERNAL): a handler that forgets to decide is a bug, not a success.
type Result struct {
	kind     resultKind
	reason   string
	class    relaytype.ErrorClass
	err      error
	delay    time.Duration
	hasDelay bool
}

// Succeeded commits the handler's writes together with the terminal state
// SUCCEEDED (and the acknowledgement intent, if configured).
func Succeeded() Result { return Result{kind: resultSucceeded} }

// Skip commits the handler's writes together with the terminal state SKIPPED,
// recording reason as the message's LastError (e.g. "no-match").
func Skip(reason string) Result { return Result{kind: resultSkip, reason: reason} }

// Retry rolls the handler's writes back and records one failed attempt of class
// (default INTERNAL when empty), to be retried after the backoff schedule's next
// level — or DEAD(EXHAUSTED) once the attempt limit is reached. A class listed in
// Config.DeadClasses goes to DEAD at once instead.
func Retry(class relaytype.ErrorClass, err error) Result {
	return Result{kind: resultRetry, class: class, err: err}
}

// RetryAfter is Retry with the delay d replacing the schedule's level for this
// attempt only. It still counts one attempt.
func RetryAfter(d time.Duration, class relaytype.ErrorClass, err error) Result {
	return Result{kind: resultRetry, class: class, err: err, delay: max(d, 0), hasDelay: true}
}

// Dead rolls the handler's writes back and makes the message DEAD(class)
// (default PROTOCOL when empty) at once; only a replay of a whitelisted class
// brings it back.
func Dead(class relaytype.ErrorClass, err error) Result {
	return Result{kind: resultDead, class: class, err: err}
}

// Commits reports whether r is Succeeded or Skip: the results with which
// the handler's writes commit (a BatchHandler's batch goes on only while its
// results commit).
func (r Result) Commits() bool { return r.kind == resultSucceeded || r.kind == resultSkip }

// String describes the result for logs and test failures.
func (r Result) String() string {
	switch r.kind {
	case resultSucceeded:
		return "Succeeded"
	case resultSkip:
		return fmt.Sprintf("Skip(%s)", r.reason)
	case resultRetry:
		if r.hasDelay {
			return fmt.Sprintf("RetryAfter(%s, %s, %v)", r.delay, r.class, r.err)
		}
		return fmt.Sprintf("Retry(%s, %v)", r.class, r.err)
	case resultDead:
		return fmt.Sprintf("Dead(%s, %v)", r.class, r.err)
	}
	return "Result(invalid)"
}

// errText is the LastError recorded and logged for a failure: its text
// bounded to relaytype.MaxErrorText bytes (the store bounds it again).
func errText(err error) string { return relaytype.ErrorText(err) }

// logText bounds other text the engine logs that a handler or decoder chose
// (a skip reason, a panic value) like error text.
func logText(s string) string { return relaytype.BoundText(s, relaytype.MaxErrorText) }
