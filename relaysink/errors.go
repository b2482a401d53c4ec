package relaysink

import (
	"errors"
	"fmt"

	"github.com/relayhq/relay/relaytype"
)

// Errors a Publish result wraps, whatever sink produced it: test with
// errors.Is(err, relaysink.ErrClosed) and so on. A sink may wrap further
// errors of its own (a *relaywebhook.StatusError, a Redis or Kafka error)
// beside these.
var (
	// ErrClosed: the sink was closed before the event was sent, or while it
	// was in flight.
	ErrClosed = errors.New("sink closed")
	// ErrInvalidEvent: the event breaks the Event contract (see
	// Event.Validate) or cannot be carried by this sink (a topic that is not
	// a NATS subject, a header HTTP cannot carry, …) and was not sent.
	ErrInvalidEvent = relaytype.ErrInvalidEvent
	// ErrEarlierFailed: an earlier event of the same (topic, key) in the
	// batch was not confirmed, so this one is not confirmed either (see
	// EnforceKeyOrder). It may still have been delivered if the sink had
	// already sent it; when the event failed for a reason of its own as
	// well, that reason is wrapped too.
	ErrEarlierFailed = errors.New("an earlier event of the key was not confirmed")
	// ErrPublishTimeout: the sink's own timeout (relaykafka's
	// ProduceTimeout, relayredis' and relaynats' Timeout, relaywebhook's
	// RequestTimeout) passed before the system confirmed the event. The
	// event may still have been delivered. A ctx that ends first gives
	// ctx's cause instead.
	ErrPublishTimeout = errors.New("publish timeout")
)

// PublishError is the error a sink reports for one unconfirmed event: which
// event (topic, key and ID, never its payload) and why (Err). Its message is
// "<sink>: publish <topic> key=<key> id=<id>: <reason>". Get the event of an
// error with errors.As; test the reason with errors.Is, which looks through
// PublishError.
type PublishError struct {
	// Sink is the reporting sink's package name (relaykafka, relayredis,
	// relaynats, relaywebhook), the message's prefix.
	Sink string
	// Topic, Key and ID are the event's.
	Topic, Key, ID string
	// Err is the reason; never nil.
	Err error
}

// Error returns "<sink>: publish <topic> key=<key> id=<id>: <reason>".
func (e *PublishError) Error() string {
	return fmt.Sprintf("%s: publish %s key=%s id=%s: %v", e.Sink, e.Topic, e.Key, e.ID, e.Err)
}

// Unwrap returns Err.
func (e *PublishError) Unwrap() error { return e.Err }

// FinishResult finishes one Publish result, in place: it applies the
// per-key prefix rule (EnforceKeyOrder) and then replaces every non-nil
// errs[i] with a *PublishError of sink (the package name, see
// PublishError.Sink) and events[i]. errs must have one entry per event. A
// sink defers it at the top of Publish (errs is filled in place), so that
// every return path, the early ones included (closed, no connection), ends
// the same way. Calling it again changes nothing.
func FinishResult(sink string, events []Event, errs []error) {
	EnforceKeyOrder(events, errs)
	for i, err := range errs {
		if err == nil {
			continue
		}
		if _, ok := err.(*PublishError); ok {
			continue
		}
		ev := events[i]
		errs[i] = &PublishError{Sink: sink, Topic: ev.Topic, Key: ev.Key, ID: ev.ID, Err: err}
	}
}
