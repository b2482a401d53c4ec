package relay

import (
	"context"
	"fmt"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Tx is the transaction a Handler writes its business effects in. The engine
// commits it together with the message's terminal state (and acknowledgement
// intent) when the handler returns Succeeded or Skip, and rolls it back when the
// handler returns Retry or Dead, panics or overruns its timeout (seed 000 §5.3).
// A Tx is valid only during the Handle call and is not safe for concurrent use;
// the handler must not commit or roll it back.
//
// The same interface names a transaction the caller began, so one
// signature serves both: EnqueueTx, AppendEventsTx and UpsertLatestTx take
// either the handler's Tx, a driver's Begin result, or the caller's own
// pgx.Tx / *sql.Tx wrapped by the driver (relaypgx.Driver.WrapTx,
// relaysqlite.Driver.WrapTx) — a raw pgx.Tx does not compile there. Inside a
// handler, relaypgx.PgxTx(tx) and relaysqlite.SQLTx(tx) give the driver's own
// transaction, typed.
type Tx interface {
	relaydriver.Querier
	// Unwrap returns the driver's own transaction (pgx.Tx or *sql.Tx).
	Unwrap() any
}

// resolveTx returns the store executor and the clock behind tx for op: a
// handler's Tx carries the engine's transaction and clock; a transaction the
// caller began (a driver's Begin, or its own pgx.Tx / *sql.Tx wrapped by the
// driver's WrapTx) is used with the system clock. Any other implementation of
// Tx is refused: the engine can write only through its own drivers.
func resolveTx(op string, tx Tx) (relaydriver.ExecutorTx, relaytype.Clock, error) {
	switch t := tx.(type) {
	case outboxTx:
		ex, clock := t.outboxTx()
		return ex, clock, nil
	case relaydriver.ExecutorTx:
		return t, relayclock.System{}, nil
	case nil:
		return nil, nil, fmt.Errorf("relay: %s: nil transaction", op)
	}
	return nil, nil, fmt.Errorf("relay: %s: transaction %T is neither a handler's Tx nor a driver's transaction (Begin, or WrapTx of your own)", op, tx)
}

// handlerTx hides Commit/Rollback and the engine's own queries from handlers.
// AppendEventsTx reaches the executor (and the engine's clock) through
// outboxTx.
type handlerTx struct {
	tx    relaydriver.ExecutorTx
	clock relaytype.Clock
}

func (t handlerTx) outboxTx() (relaydriver.ExecutorTx, relaytype.Clock) { return t.tx, t.clock }

func (t handlerTx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	return t.tx.Exec(ctx, sql, args...)
}

func (t handlerTx) Query(ctx context.Context, sql string, args ...any) (relaydriver.Rows, error) {
	return t.tx.Query(ctx, sql, args...)
}

func (t handlerTx) QueryRow(ctx context.Context, sql string, args ...any) relaydriver.Row {
	return t.tx.QueryRow(ctx, sql, args...)
}

func (t handlerTx) Unwrap() any { return t.tx.Unwrap() }

// Decoded is what a Decoder made of a message.
type Decoded struct {
	// Identity is the message's business identity as the sender defines it: a
	// string that two copies of one message share and two different messages
	// never do (an event id, or a composite such as sender|type|sequence).
	// When non-empty it is bound to the message once; a second message with the
	// same identity is SKIPPED duplicate-of:<first id>. Empty: no dedupe. It is
	// for messages that carry their identity only in the payload: a message
	// enqueued with EnqueueParams.Identity is bound already, and this identity
	// is then not bound (the message keeps the enqueued one, and is never a
	// duplicate at processing time). Both share one namespace per queue: a
	// decoder's identity held by a message enqueued with it makes a duplicate,
	// and vice versa.
	Identity string
	// Kind is what sort of message this is, written "TYPE-SUBTYPE" (e.g.
	// "ORDER-CREATED"; a bare "TYPE" has an empty subtype). Config.IgnoreRules
	// match against it. Empty: never ignored.
	Kind string
	// Value is the decoded body, handed to the Handler in Delivery.Decoded.
	Value any
}

// Decoder is implemented by a Handler that wants messages decoded before
// identity binding and ignore rules. Decode runs outside any transaction and
// must not write. A returned error is classified with ClassOf: a class in
// Config.DeadClasses (default MALFORMED, PROTOCOL) makes the message DEAD at
// once; any other class — and an unclassified error, which counts as
// CODEC_ERROR — is retried with backoff. A nil *Decoded with a nil error means
// "nothing to bind or ignore". Decode may be called from several goroutines at
// once in the per-key and unordered modes.
type Decoder interface {
	Decode(ctx context.Context, m *relaytype.Message) (*Decoded, error)
}

// Delivery is one message handed to a Handler.
type Delivery struct {
	// Message is the stored row as it was read before this attempt (Attempts
	// counts earlier failed attempts). Handlers must not modify it.
	Message *relaytype.Message
	// Decoded is the Decoder's result, or nil when the Handler is no Decoder.
	Decoded *Decoded
}

// Handler applies one message inside the engine's transaction and steers the
// outcome with its Result. ctx is cancelled when Config.HandlerTimeout passes
// (the attempt then counts as Retry(TIMEOUT)) or the engine stops; a handler
// must honour it, because the engine waits for Handle to return before it rolls
// the transaction back. A panic is recovered and counts as Retry(INTERNAL). In
// the per-key and unordered modes Handle is called from several goroutines at
// once (never twice at once for one key in ModePerKey).
//
// A handler's effects must live only in tx: the engine may call it again for
// the same message after rolling tx back without recording anything — with
// Config.FIFOBatch, when a later message of the batch fails, the messages
// before it run again in a fresh transaction; with Config.TxBatch, when one
// message of the batch fails, the others run again under savepoints. Work outside tx (an HTTP call, a
// write to another database) could then happen twice.
type Handler interface {
	Handle(ctx context.Context, tx Tx, d *Delivery) Result
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, tx Tx, d *Delivery) Result

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, tx Tx, d *Delivery) Result { return f(ctx, tx, d) }

// ClassError attaches an error class to an error; it is relaytype.ClassError,
// named here so handlers need only this package.
type ClassError = relaytype.ClassError

// Classify returns err tagged with class (nil when err is nil). See
// relaytype.Classify; codecs that must not import the engine call that one.
func Classify(class relaytype.ErrorClass, err error) error { return relaytype.Classify(class, err) }

// ClassOf returns the class of the first ClassError in err's chain, or def
// when there is none. See relaytype.ClassOf.
func ClassOf(err error, def relaytype.ErrorClass) relaytype.ErrorClass {
	return relaytype.ClassOf(err, def)
}
