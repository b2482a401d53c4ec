package relaydriver

import (
	"errors"
	"fmt"
)

// Input checks every driver runs before it writes, so that both stores refuse
// the same calls with the same words. Drivers prefix the error with their
// name and operation.

// CheckOutboxAppend validates the events of one OutboxAppend call.
func CheckOutboxAppend(params []*OutboxAppendParams) error {
	for i, p := range params {
		switch {
		case p == nil:
			return fmt.Errorf("params[%d] is nil", i)
		case p.EventID == "":
			return fmt.Errorf("params[%d].EventID is empty", i)
		case p.Target == "":
			return fmt.Errorf("params[%d].Target is empty", i)
		case p.Type != OutboxUpsert && p.Type != OutboxTombstone:
			return fmt.Errorf("params[%d].Type %q is neither UPSERT nor TOMBSTONE", i, p.Type)
		case p.Type == OutboxTombstone && p.Payload != nil:
			return fmt.Errorf("params[%d]: a TOMBSTONE has no payload", i)
		case p.Now.IsZero():
			return fmt.Errorf("params[%d].Now is required", i)
		}
	}
	return nil
}

// CheckLatestUpsert validates one latest state to write.
func CheckLatestUpsert(p *LatestUpsertParams) error {
	switch {
	case p == nil:
		return errors.New("params is nil")
	case p.Target == "":
		return errors.New("Target is empty")
	case p.Type != OutboxUpsert && p.Type != OutboxTombstone:
		return fmt.Errorf("Type %q is neither UPSERT nor TOMBSTONE", p.Type)
	case p.Type == OutboxTombstone && p.Payload != nil:
		return errors.New("a TOMBSTONE has no payload")
	case p.Now.IsZero():
		return errors.New("Now is required")
	}
	return nil
}

// CheckLatestUpsertMany validates every state of a LatestUpsertMany call and
// that no (Target, Key) appears twice.
func CheckLatestUpsertMany(params []*LatestUpsertParams) error {
	type key struct{ target, key string }
	seen := make(map[key]int, len(params))
	for i, p := range params {
		if err := CheckLatestUpsert(p); err != nil {
			return fmt.Errorf("state %d: %w", i, err)
		}
		k := key{p.Target, p.Key}
		if j, dup := seen[k]; dup {
			return fmt.Errorf("states %d and %d both write %s/%s: one call writes a key at most once", j, i, p.Target, p.Key)
		}
		seen[k] = i
	}
	return nil
}
