package relaysink

import (
	"errors"
	"fmt"
)

// EnforceKeyOrder applies the per-key prefix rule to one Publish result, in
// place: after the first unconfirmed event of a (topic, key) in events,
// every later event of that (topic, key) is reported failed with
// ErrEarlierFailed. A later event that was confirmed gets ErrEarlierFailed;
// one that failed for a reason of its own gets ErrEarlierFailed with that
// reason wrapped beside it; one that already wraps ErrEarlierFailed is left
// as it is. Events of other keys, and of the same key on another topic (its
// own sequence), are not affected. errs must have one entry per event.
//
// Why: the dispatcher marks every confirmed event SENT and re-publishes a key
// from its first unconfirmed event. Confirming an event behind an
// unconfirmed predecessor would mark it SENT ahead of that predecessor, and
// the key's order would be lost. A sink often cannot prevent such a
// confirmation (Redis runs every command of a queue; a broker may store a
// later, smaller message after rejecting an earlier one), so it reports the
// event unconfirmed instead: the dispatcher then sends it again after its
// predecessor. A consumer that dedupes by the event ID and accepts only each
// key's next Seq sees the key in order.
//
// A sink that knows before sending that an event fails (Event.Validate, a
// closed sink) should also keep the later events of its key off the wire;
// EnforceKeyOrder only fixes the reported result.
func EnforceKeyOrder(events []Event, errs []error) {
	type topicKey struct{ topic, key string }
	failed := map[topicKey]bool{}
	for i, ev := range events {
		tk := topicKey{ev.Topic, ev.Key}
		switch {
		case !failed[tk]:
			if errs[i] != nil {
				failed[tk] = true
			}
		case errs[i] == nil:
			errs[i] = ErrEarlierFailed
		case !errors.Is(errs[i], ErrEarlierFailed):
			errs[i] = fmt.Errorf("%w (this event: %w)", ErrEarlierFailed, errs[i])
		}
	}
}
