package relaydriver

import (
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// Input checks every driver runs before it writes, so that both stores refuse
// the same calls with the same words. Drivers prefix the error with their
// name and operation.

// LimitOr returns limit, or def when limit <= 0: the rule of every Limit
// field of the driver calls ("<= 0 means the driver's LimitDefault").
func LimitOr(limit, def int) int {
	if limit <= 0 {
		return def
	}
	return limit
}

// CheckOutboxAppend validates the events of one OutboxAppend call.
func CheckOutboxAppend(params []*OutboxAppendParams) error {
	for i, p := range params {
		switch {
		case p == nil:
			return fmt.Errorf("params[%d] is nil", i)
		case p.Now.IsZero():
			return fmt.Errorf("params[%d].Now is required", i)
		}
		if err := p.CheckAppend(); err != nil {
			return fmt.Errorf("params[%d]: %w", i, err)
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
		return errors.New("params.Target is empty")
	case p.Type != OutboxUpsert && p.Type != OutboxTombstone:
		return fmt.Errorf("params.Type %q is neither UPSERT nor TOMBSTONE", p.Type)
	case p.Type == OutboxTombstone && p.Payload != nil:
		return errors.New("a TOMBSTONE has no payload")
	case p.Now.IsZero():
		return errNowRequired
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

// errNowRequired is the refusal of a call whose Now is the zero time: the
// store never reads its own clock.
var errNowRequired = errors.New("params.Now is required")

// CheckMessageInsertMany validates the inputs of one MessageInsertMany call.
func CheckMessageInsertMany(params []*MessageInsertParams) error {
	for i, p := range params {
		switch {
		case p == nil:
			return fmt.Errorf("params[%d] is nil", i)
		case p.Queue == "":
			return fmt.Errorf("params[%d].Queue is empty", i)
		case p.ID < 0:
			return fmt.Errorf("params[%d].ID %d is negative", i, p.ID)
		case p.Now.IsZero():
			return fmt.Errorf("params[%d].Now is required (it becomes EnqueuedAt)", i)
		}
	}
	return nil
}

// Check validates a MessageBindIdentity call.
func (p *MessageBindIdentityParams) Check() error {
	if p.Identity == "" {
		return errors.New("empty identity")
	}
	return nil
}

// Check validates a MessageBindIdentities call: one non-empty identity per id.
func (p *MessageBindIdentitiesParams) Check() error {
	if len(p.IDs) != len(p.Identities) {
		return fmt.Errorf("%d ids but %d identities", len(p.IDs), len(p.Identities))
	}
	for i, identity := range p.Identities {
		if identity == "" {
			return fmt.Errorf("message %d: empty identity", p.IDs[i])
		}
	}
	return nil
}

// Check validates one completion (MessageComplete, and each input of
// MessageCompleteMany).
func (p *MessageCompleteParams) Check() error {
	switch {
	case !p.State.Terminal():
		return fmt.Errorf("state %q is not terminal", p.State)
	case p.Now.IsZero():
		return errNowRequired
	case p.Delete && (p.State != relaytype.StateSucceeded || p.AckIntent || p.CountAttempt):
		return fmt.Errorf("delete is only for SUCCEEDED without an acknowledgement intent or a counted attempt (state %s)", p.State)
	}
	return nil
}

// Check validates a MessageFail call.
func (p *MessageFailParams) Check() error {
	if p.Now.IsZero() {
		return errNowRequired
	}
	return nil
}

// Check validates a MessageExhaust call.
func (p *MessageExhaustParams) Check() error {
	if p.Now.IsZero() {
		return errNowRequired
	}
	return nil
}

// Check validates a MessageClaim call: an owner and a lease that ends after
// Now.
func (p *MessageClaimParams) Check() error {
	switch {
	case p.Owner == "":
		return errors.New("params.Owner is required")
	case p.Now.IsZero() || !p.LeaseUntil.After(p.Now):
		return fmt.Errorf("LeaseUntil %v is not after Now %v", p.LeaseUntil, p.Now)
	}
	return nil
}

// Check validates a MessageLeaseRenew call.
func (p *MessageLeaseRenewParams) Check() error {
	if p.Owner == "" || p.LeaseUntil.IsZero() {
		return errors.New("params.Owner and LeaseUntil are required")
	}
	return nil
}

// Check validates a MessageLeaseRelease call.
func (p *MessageLeaseReleaseParams) Check() error {
	if p.Owner == "" {
		return errors.New("params.Owner is required")
	}
	return nil
}

// Check validates a MessageReplay call.
func (p *MessageReplayParams) Check() error {
	switch {
	case len(p.Classes) == 0:
		return errors.New("params.Classes is required")
	case p.Now.IsZero():
		return errNowRequired
	}
	return nil
}

// Check validates a CursorSave call.
func (p *CursorSaveParams) Check() error {
	if p.Now.IsZero() {
		return errNowRequired
	}
	return nil
}

// Check validates a CursorSeed call.
func (p *CursorSeedParams) Check() error {
	if p.Now.IsZero() {
		return errNowRequired
	}
	return nil
}

// CheckHoleInsert validates a HoleInsert call.
func CheckHoleInsert(hole *relaytype.Hole) error {
	if hole == nil {
		return errors.New("nil hole")
	}
	return nil
}

// Check validates an AckScan call.
func (p *AckScanParams) Check() error {
	switch {
	case p.Now.IsZero():
		return errNowRequired
	case p.R <= 0:
		return fmt.Errorf("params.R %s must be positive", p.R)
	}
	return nil
}

// Check validates an AckDone call.
func (p *AckDoneParams) Check() error {
	if p.Now.IsZero() {
		return errNowRequired
	}
	return nil
}

// Check validates an AckRetry call.
func (p *AckRetryParams) Check() error {
	if p.Now.IsZero() || p.NextAt.IsZero() {
		return errors.New("params.Now and NextAt are required")
	}
	return nil
}

// Check validates an AckAbandon call: Reason is one of the AckReason
// constants.
func (p *AckAbandonParams) Check() error {
	switch {
	case p.Now.IsZero():
		return errNowRequired
	case p.Reason != AckReasonMissingRow && p.Reason != AckReasonTransientDeadline:
		return fmt.Errorf("unknown reason %q", p.Reason)
	}
	return nil
}

// Check validates an AckReopen call.
func (p *AckReopenParams) Check() error {
	switch {
	case p.Now.IsZero():
		return errNowRequired
	case len(p.IDs) == 0 && p.Reason == "":
		return errors.New("IDs or Reason is required")
	}
	return nil
}

// Check validates an OutboxFetch call.
func (p *OutboxFetchParams) Check() error {
	if p.Now.IsZero() {
		return errNowRequired
	}
	return nil
}

// Check validates an OutboxMarkSent call.
func (p *OutboxMarkSentParams) Check() error {
	if p.Now.IsZero() {
		return errNowRequired
	}
	return nil
}

// Check validates an OutboxFail call.
func (p *OutboxFailParams) Check() error {
	return checkFail(p.Now, p.MaxAttempts)
}

// CheckOutboxDeleteSent validates an OutboxDeleteSent call.
func CheckOutboxDeleteSent(sentBefore time.Time) error {
	if sentBefore.IsZero() {
		return errors.New("sentBefore is required")
	}
	return nil
}

// Check validates a LatestFetch call.
func (p *LatestFetchParams) Check() error {
	if p.Now.IsZero() {
		return errNowRequired
	}
	return nil
}

// Check validates a LatestMarkSent call.
func (p *LatestMarkSentParams) Check() error {
	if p.Now.IsZero() {
		return errNowRequired
	}
	return nil
}

// Check validates a LatestFail call.
func (p *LatestFailParams) Check() error {
	return checkFail(p.Now, p.MaxAttempts)
}

// checkFail validates a failed delivery of an outbox event or a latest-state
// row.
func checkFail(now time.Time, maxAttempts int) error {
	switch {
	case now.IsZero():
		return errNowRequired
	case maxAttempts < 1:
		return fmt.Errorf("MaxAttempts %d < 1", maxAttempts)
	}
	return nil
}

// Check validates a MessageArchive call.
func (p *MessageArchiveParams) Check() error {
	switch {
	case p.Queue == "":
		return errors.New("params.Queue is empty")
	case p.Now.IsZero():
		return errNowRequired
	case p.TerminalBefore.IsZero():
		return errors.New("TerminalBefore is required")
	}
	return nil
}

// CheckMessageListLimit validates the effective page size of a MessageList
// call (its Limit after the driver's default for <= 0).
func CheckMessageListLimit(limit int) error {
	if limit > MessageListLimitMax {
		return fmt.Errorf("limit %d above %d", limit, MessageListLimitMax)
	}
	return nil
}

// Check validates a MessageClasses call.
func (p *MessageClassesParams) Check() error {
	if len(p.IDs) > MessageClassesIDsMax {
		return fmt.Errorf("%d ids above %d", len(p.IDs), MessageClassesIDsMax)
	}
	return nil
}
