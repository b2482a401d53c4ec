package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// outcome is what one attempt on a message came to.
type outcome int

const (
	// outcomeNone: no decision was written (the message changed under us, or a
	// store error left it as it was).
	outcomeNone outcome = iota
	outcomeSucceeded
	outcomeSkipped
	outcomeDead
	outcomeRetry
	outcomeExhausted
)

// String is the metric label of the outcome.
func (o outcome) String() string {
	return [...]string{"none", "succeeded", "skipped", "dead", "retry", "exhausted"}[o]
}

// decided reports whether the outcome was written to the store.
func (o outcome) decided() bool { return o != outcomeNone }

// terminal reports whether the outcome released the message's place in its
// queue (FIFO head, per-key head).
func (o outcome) terminal() bool {
	return o == outcomeSucceeded || o == outcomeSkipped || o == outcomeDead || o == outcomeExhausted
}

// errHandlerTimeout is the cancellation cause of a handler that overran.
var errHandlerTimeout = errors.New("relay: handler timeout")

// attempt carries one message through processOne.
type attempt struct {
	m     *relaytype.Message
	owner string // lease owner for guarded writes ("" in ModeFIFO)
}

// exhausted reports whether m must go to DEAD(EXHAUSTED) without another call
// (seed 000 §5.1 step 3).
func (e *Engine) exhausted(m *relaytype.Message) bool {
	return m.State == relaytype.StateFailed && m.Attempts >= e.cfg.MaxAttempts
}

// processOne runs one attempt on m (seed 000 §5.2). It returns the outcome it
// wrote, or an error from the store, in which case m stays as it was. It never
// logs the error it returns.
func (e *Engine) processOne(ctx context.Context, m *relaytype.Message, owner string) (outcome, error) {
	a := attempt{m: m, owner: owner}
	if e.exhausted(m) {
		return e.exhaust(ctx, a)
	}
	dec, o, err := e.prepare(ctx, a)
	if err != nil || o.decided() {
		return o, err
	}
	return e.runOne(ctx, a, dec)
}

// runOne runs the handler of a prepared message in a transaction of its own and
// commits its terminal state with it, or records its failure.
func (e *Engine) runOne(ctx context.Context, a attempt, dec *Decoded) (outcome, error) {
	m := a.m
	tx, err := e.d.Begin(ctx)
	if err != nil {
		return e.fail(ctx, a, Retry(relaytype.ClassInfra, fmt.Errorf("begin: %w", err)))
	}
	res := e.callHandler(ctx, tx, &Delivery{Message: m, Decoded: dec})
	switch res.kind {
	case resultSucceeded, resultSkip:
		if err := e.completeTx(ctx, tx, a, res); err != nil {
			if rbErr := tx.Rollback(ctx); rbErr != nil {
				e.logRollback(ctx, m, rbErr)
			}
			return e.afterCompleteError(ctx, a, err)
		}
		if err := tx.Commit(ctx); err != nil {
			// The only attempt counted for this failure: the terminal state did not
			// commit, so MessageFail is the one place the attempt is recorded.
			return e.fail(ctx, a, Retry(relaytype.ClassInfra, fmt.Errorf("commit: %w", err)))
		}
		faultpoint.Hit(faultpoint.FIFOAfterCommit)
		return e.decided(ctx, a, completedOutcome(res), res.reason, nil), nil
	default:
		// No half effects: everything the handler wrote goes before the failure is
		// recorded in its own statement.
		if err := tx.Rollback(ctx); err != nil {
			e.logRollback(ctx, m, err)
		}
		return e.fail(ctx, a, res)
	}
}

// prepare decodes, binds the identity and applies ignore rules, all outside any
// transaction. A decided outcome (or an error) ends the attempt there.
func (e *Engine) prepare(ctx context.Context, a attempt) (*Decoded, outcome, error) {
	if e.decoder == nil {
		return nil, outcomeNone, nil
	}
	dec, err := e.decode(ctx, a.m)
	if err != nil {
		o, err := e.fail(ctx, a, Retry(ClassOf(err, relaytype.ClassCodec), fmt.Errorf("decode: %w", err)))
		return nil, o, err
	}
	if dec == nil {
		return nil, outcomeNone, nil
	}
	if dec.Identity != "" && a.m.IdentityKey == "" {
		// seed 000 §2: an independent idempotent single statement, not part of the
		// business transaction. A retry keeps its binding (IdentityKey set), so it is
		// never its own duplicate.
		res, err := e.d.GetExecutor().MessageBindIdentity(ctx, &relaydriver.MessageBindIdentityParams{
			Queue: e.cfg.Queue, ID: a.m.ID, Identity: dec.Identity,
		})
		if err != nil {
			return nil, outcomeNone, fmt.Errorf("relay: bind identity of message %d: %w", a.m.ID, err)
		}
		if res.OwnerID != a.m.ID {
			o, err := e.complete(ctx, a, relaytype.StateSkipped, relaytype.ClassNone,
				"duplicate-of:"+strconv.FormatInt(res.OwnerID, 10))
			return nil, o, err
		}
		a.m.IdentityKey = res.Identity
	}
	if dec.Kind != "" {
		for _, r := range e.ignore {
			if r.match(dec.Kind) {
				o, err := e.complete(ctx, a, relaytype.StateSkipped, relaytype.ClassNone, "ignored:"+r.text)
				return nil, o, err
			}
		}
	}
	return dec, outcomeNone, nil
}

// decode calls the Decoder, turning a panic into an INTERNAL error.
func (e *Engine) decode(ctx context.Context, m *relaytype.Message) (dec *Decoded, err error) {
	defer func() {
		if p := recover(); p != nil {
			e.log.ErrorContext(ctx, "relay: decoder panicked", "queue", e.cfg.Queue,
				"message_id", m.ID, "panic", logText(fmt.Sprint(p)), "stack", string(debug.Stack()))
			dec, err = nil, Classify(relaytype.ClassInternal, fmt.Errorf("decoder panic: %v", p))
		}
	}()
	return e.decoder.Decode(ctx, m)
}

// callHandler runs the handler under HandlerTimeout (measured on Clock),
// turning a panic into Retry(INTERNAL), an overrun into Retry(TIMEOUT) and a
// zero Result into Retry(INTERNAL). A claimed message's handler ctx is also
// cancelled, with cause ErrLeaseLost, when a renewal finds its lease lost.
func (e *Engine) callHandler(ctx context.Context, tx relaydriver.ExecutorTx, d *Delivery) Result {
	// A claimed message's handler is also cancelled when its lease is lost
	// (ErrLeaseLost); its decision would be refused anyway.
	ctx, detach := e.leases.handlerContext(ctx, d.Message.ID)
	defer detach()
	res, _ := e.guardHandler(ctx, d.Message.ID, func(hctx context.Context) Result {
		return e.cfg.Handler.Handle(hctx, handlerTx{tx: tx, clock: e.cfg.Clock}, d)
	})
	return res
}

func completedOutcome(res Result) outcome {
	if res.kind == resultSkip {
		return outcomeSkipped
	}
	return outcomeSucceeded
}

// completeTx writes the terminal state of a Succeeded/Skip result in the
// handler's transaction, so business writes + state + acknowledgement intent
// commit together (seed 000 §5.3).
func (e *Engine) completeTx(ctx context.Context, tx relaydriver.ExecutorTx, a attempt, res Result) error {
	return tx.MessageComplete(ctx, e.completeParams(a, res))
}

// completeParams is the terminal write of a Succeeded/Skip result, stamped now.
func (e *Engine) completeParams(a attempt, res Result) *relaydriver.MessageCompleteParams {
	state := relaytype.StateSucceeded
	if res.kind == resultSkip {
		state = relaytype.StateSkipped
	}
	return &relaydriver.MessageCompleteParams{
		Queue: e.cfg.Queue, ID: a.m.ID, State: state, LastError: res.reason,
		AckIntent: e.cfg.AckIntent, LeaseOwner: a.owner, Now: e.cfg.Clock.Now(),
		// A message bound to an identity keeps its row: it is the record
		// that dedupes the identity.
		Delete: e.cfg.DeleteSucceeded && state == relaytype.StateSucceeded && a.m.IdentityKey == "",
	}
}

// lostWrite reports whether err refused a guarded write because the message
// is no longer this attempt's: changed under it (ErrConflict) or, in a queue
// that deletes what succeeded, gone — finished by the instance its lease
// passed to.
func (e *Engine) lostWrite(err error) bool {
	return errors.Is(err, relaytype.ErrConflict) || (e.cfg.DeleteSucceeded && errors.Is(err, relaytype.ErrNotFound))
}

// afterCompleteError handles a failed MessageComplete inside the business
// transaction (already rolled back).
func (e *Engine) afterCompleteError(ctx context.Context, a attempt, err error) (outcome, error) {
	if e.lostWrite(err) {
		e.lost(ctx, a, err)
		return outcomeNone, nil
	}
	return e.fail(ctx, a, Retry(relaytype.ClassInfra, fmt.Errorf("complete: %w", err)))
}

// complete writes a terminal state in one statement of its own (SKIPPED
// duplicate/ignored, DEAD): the state and the acknowledgement intent in the
// same UPDATE (seed 000 §5.3, non-business terminal states).
func (e *Engine) complete(ctx context.Context, a attempt, state relaytype.State, class relaytype.ErrorClass, lastError string) (outcome, error) {
	return e.completeCounted(ctx, a, state, class, lastError, false)
}

// completeCounted is complete, adding the attempt it ends to Attempts when
// counted is set.
func (e *Engine) completeCounted(ctx context.Context, a attempt, state relaytype.State, class relaytype.ErrorClass, lastError string, counted bool) (outcome, error) {
	err := e.d.GetExecutor().MessageComplete(ctx, &relaydriver.MessageCompleteParams{
		Queue: e.cfg.Queue, ID: a.m.ID, State: state, ErrorClass: class, LastError: lastError,
		AckIntent: e.cfg.AckIntent, LeaseOwner: a.owner, CountAttempt: counted, Now: e.cfg.Clock.Now(),
	})
	if e.lostWrite(err) {
		e.lost(ctx, a, err)
		return outcomeNone, nil
	}
	if err != nil {
		return outcomeNone, fmt.Errorf("relay: complete message %d as %s: %w", a.m.ID, state, err)
	}
	o := outcomeSkipped
	if state == relaytype.StateDead {
		o = outcomeDead
	}
	if counted {
		a.m.Attempts++
	}
	return e.decided(ctx, a, o, lastError, nil), nil
}

// fail records a Retry or Dead result. This is the only place an attempt is
// counted (seed 000 §9.1: failures are recorded where the message is held, once).
func (e *Engine) fail(ctx context.Context, a attempt, res Result) (outcome, error) {
	class := res.class
	if res.kind == resultDead {
		if class == relaytype.ClassNone {
			class = relaytype.ClassProtocol
		}
		return e.dead(ctx, a, class, res.err)
	}
	if class == relaytype.ClassNone {
		class = relaytype.ClassInternal
	}
	if e.deadClass[class] {
		return e.dead(ctx, a, class, res.err)
	}
	now := e.cfg.Clock.Now()
	// The failure being recorded is attempt number Attempts+1; after the n-th
	// failure the message waits Backoff[n-1]. The last failure has no level: the
	// message is exhausted right away.
	delay := time.Duration(0)
	if n := a.m.Attempts; n < len(e.cfg.Backoff) {
		delay = e.cfg.Backoff[n]
	}
	if res.hasDelay {
		delay = res.delay
	}
	attempts, err := e.d.GetExecutor().MessageFail(ctx, &relaydriver.MessageFailParams{
		Queue: e.cfg.Queue, ID: a.m.ID, ErrorClass: class, LastError: errText(res.err),
		NextAttemptAt: now.Add(delay), LeaseOwner: a.owner, Now: now,
	})
	if e.lostWrite(err) {
		e.lost(ctx, a, err)
		return outcomeNone, nil
	}
	if err != nil {
		return outcomeNone, fmt.Errorf("relay: record failure of message %d (%s: %s): %w", a.m.ID, class, errText(res.err), err)
	}
	a.m.State, a.m.Attempts, a.m.ErrorClass, a.m.LastError = relaytype.StateFailed, attempts, class, errText(res.err)
	a.m.NextAttemptAt = now.Add(delay)
	if attempts >= e.cfg.MaxAttempts {
		// The last failure is counted as a retry (the metric's documented
		// meaning) but logged once, as the exhaustion that follows at once: no
		// "retry … next_attempt_at" for an attempt that will never come.
		e.count(outcomeRetry)
		o, err := e.exhaust(ctx, a)
		if err != nil {
			// The failure is recorded; the next round exhausts the message.
			return outcomeRetry, err
		}
		if o == outcomeNone {
			return outcomeRetry, nil
		}
		return o, nil
	}
	return e.decided(ctx, a, outcomeRetry, "", res.err), nil
}

// dead makes the message DEAD(class) in one statement. It ends a failed
// processing attempt, so the attempt is counted there (Attempts+1), as
// MessageFail counts a retried one: a MALFORMED or PROTOCOL message dead on
// its first attempt shows attempts=1.
func (e *Engine) dead(ctx context.Context, a attempt, class relaytype.ErrorClass, cause error) (outcome, error) {
	return e.completeCounted(ctx, a, relaytype.StateDead, class, errText(cause), true)
}

// exhaust moves a FAILED message at the attempt limit to DEAD(EXHAUSTED),
// keeping LastError, in one statement: no handler call, no transaction, no gate
// (seed 000 §5.1 step 3).
func (e *Engine) exhaust(ctx context.Context, a attempt) (outcome, error) {
	err := e.d.GetExecutor().MessageExhaust(ctx, &relaydriver.MessageExhaustParams{
		Queue: e.cfg.Queue, ID: a.m.ID, MaxAttempts: e.cfg.MaxAttempts,
		AckIntent: e.cfg.AckIntent, Now: e.cfg.Clock.Now(),
	})
	if e.lostWrite(err) {
		e.lost(ctx, a, err)
		return outcomeNone, nil
	}
	if err != nil {
		return outcomeNone, fmt.Errorf("relay: exhaust message %d: %w", a.m.ID, err)
	}
	return e.decided(ctx, a, outcomeExhausted, a.m.LastError, nil), nil
}

// decided counts and logs an outcome that was written, and returns it.
func (e *Engine) decided(ctx context.Context, a attempt, o outcome, reason string, cause error) outcome {
	e.count(o)
	attrs := []any{"queue", e.cfg.Queue, "message_id", a.m.ID, "outcome", o.String()}
	level := slog.LevelDebug
	switch o {
	case outcomeSkipped:
		level = slog.LevelInfo
		attrs = append(attrs, "reason", logText(reason))
	case outcomeRetry:
		level = slog.LevelWarn
		attrs = append(attrs, "error_class", a.m.ErrorClass, "attempts", a.m.Attempts,
			"next_attempt_at", a.m.NextAttemptAt, "error", errText(cause))
	case outcomeDead, outcomeExhausted:
		level = slog.LevelError
		attrs = append(attrs, "attempts", a.m.Attempts, "last_error", logText(reason))
	}
	e.log.Log(ctx, level, "relay: message "+o.String(), attrs...)
	return o
}

// count counts an outcome in the processed metric.
func (e *Engine) count(o outcome) {
	if e.metrics != nil {
		e.metrics.processed.WithLabelValues(o.String()).Inc()
	}
}

// lost logs a write the store refused because the message is no longer ours
// (finished elsewhere, replayed, or its lease passed to another instance).
func (e *Engine) lost(ctx context.Context, a attempt, err error) {
	e.log.WarnContext(ctx, "relay: message changed under this instance; decision dropped",
		"queue", e.cfg.Queue, "message_id", a.m.ID, "lease_owner", a.owner, "error", err)
}

func (e *Engine) logRollback(ctx context.Context, m *relaytype.Message, err error) {
	e.log.WarnContext(ctx, "relay: rollback failed", "queue", e.cfg.Queue, "message_id", m.ID, "error", err)
}
