package relay

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// BatchHandler is implemented by a Handler that can apply a batch of
// messages in one call. With ModeFIFO and Config.FIFOBatch > 1 the engine then
// hands it each batch of contiguous ready heads at once; with ModeUnordered or
// ModePerKey and Config.TxBatch > 1, each batch of independent claimed
// messages that share one transaction (in claim order). So an application
// can read the state the whole batch needs in one round trip, decide the
// messages one after another in memory, and write the result once — instead
// of a read and a write per message.
//
// HandleBatch applies ds in order inside tx and returns exactly one Result per
// delivery, in the same order. The batch commits only if every Result is
// Succeeded or Skip; their terminal states are then written with tx in one
// statement. When result k is anything else (Retry, RetryAfter, Dead) the
// engine rolls tx back, calls HandleBatch again with ds[:k] in a fresh
// transaction, commits that, and records k's Result alone — exactly as for a
// Handler whose k-th call failed; results after k are ignored. (In the claim
// modes the messages other than k run again each alone with Handle, under a
// savepoint each, as after any handler failure of a TxBatch.) So an
// implementation may stop deciding after the first failure and fill the rest
// with any Result. Handle is still used for a message processed on its own
// (a single ready head, retries, the savepoint fallback), and both must decide
// a message the same way.
//
// The batch shares one Config.HandlerTimeout; a panic or a timeout fails the
// batch's first message (Retry INTERNAL / TIMEOUT), like a failed commit.
type BatchHandler interface {
	Handler
	HandleBatch(ctx context.Context, tx Tx, ds []*Delivery) []Result
}

// callBatchHandler runs HandleBatch under the handler guard and checks its
// answer: a wrong number of results or a zero Result fails the batch.
func (e *Engine) callBatchHandler(ctx context.Context, h BatchHandler, tx relaydriver.ExecutorTx, ds []*Delivery) []Result {
	var out []Result
	first, replaced := e.guardHandler(ctx, ds[0].Message.ID, func(hctx context.Context) Result {
		out = h.HandleBatch(hctx, handlerTx{tx: tx, clock: e.cfg.Clock}, ds)
		if len(out) != len(ds) {
			return Retry(relaytype.ClassInternal, fmt.Errorf("HandleBatch returned %d results for %d messages", len(out), len(ds)))
		}
		return out[0]
	})
	if replaced || len(out) != len(ds) {
		// A panic, a timeout or a wrong number of results: the batch's first
		// message carries the failure.
		return []Result{first}
	}
	for i := range out {
		if out[i].kind == resultInvalid {
			out[i] = Retry(relaytype.ClassInternal, errors.New("handler returned the zero Result"))
		}
	}
	return out
}

// guardHandler calls call with a context cancelled when HandlerTimeout
// passes on the engine's clock, and turns a panic, an overrun or the zero
// Result into a Retry (INTERNAL / TIMEOUT), reporting that it replaced call's
// answer. id names the message in logs.
func (e *Engine) guardHandler(ctx context.Context, id int64, call func(ctx context.Context) Result) (res Result, replaced bool) {
	hctx, stop := service.WithClockTimeout(ctx, e.cfg.Clock, e.cfg.HandlerTimeout, errHandlerTimeout)
	defer stop()
	defer func() {
		if p := recover(); p != nil {
			e.log.ErrorContext(ctx, "relay: handler panicked", "queue", e.cfg.Queue,
				"message_id", id, "panic", logText(fmt.Sprint(p)), "stack", string(debug.Stack()))
			res, replaced = Retry(relaytype.ClassInternal, fmt.Errorf("handler panic: %v", p)), true
		}
		if errors.Is(context.Cause(hctx), errHandlerTimeout) {
			res, replaced = Retry(relaytype.ClassTimeout, fmt.Errorf("handler exceeded %s (result discarded: %s)", e.cfg.HandlerTimeout, res)), true
		}
		if res.kind == resultInvalid {
			res, replaced = Retry(relaytype.ClassInternal, errors.New("handler returned the zero Result")), true
		}
	}()
	return call(hctx), false
}
