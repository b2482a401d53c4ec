package relaydriver

import (
	"context"

	"github.com/relayhq/relay/relaytype"
)

// MessageListLimitMax is the largest page MessageList returns; a larger Limit
// is refused, so an operator listing never reads a whole queue at once.
const MessageListLimitMax = 1000

// MessageClassesIDsMax is the most ids one MessageClasses call reads.
const MessageClassesIDsMax = 1000

// AdminExecutor is the store side of the operator surface (relay admin,
// docs/operations.md): bounded, read-only listings for humans. Mutations
// (replay, reopen) are not here: they go through the running engine so they
// run inside its lifecycle gate (seed 000 §5.3, §9.1).
type AdminExecutor interface {
	// MessageList returns up to Limit messages of Queue with id > AfterID in
	// ascending id order (keyset pagination: pass the last id of a page as the
	// next AfterID), filtered by States (empty: every state except ARCHIVED,
	// which is listed only when named), Classes (empty: any class) and, with
	// AckAbandoned, only rows whose acknowledgement was abandoned (abandoned, not
	// acknowledged). Payload is never read: every returned Payload is nil, and
	// LastError holds at most relaytype.MaxErrorText characters, even of a row
	// stored before error text was bounded (StoredText). A Limit <= 0 means the
	// driver's LimitDefault; above MessageListLimitMax it is refused.
	MessageList(ctx context.Context, params *MessageListParams) ([]*relaytype.Message, error)
	// MessageClasses returns the distinct error classes of the FAILED and
	// DEAD messages of Queue among IDs, sorted bytewise, in one statement:
	// the classes a replay of those ids would have to be allowed (relay admin
	// replay --ids). Unknown ids and messages in other states add nothing;
	// no such message gives an empty result. At most MessageClassesIDsMax
	// ids; more are refused.
	MessageClasses(ctx context.Context, params *MessageClassesParams) ([]relaytype.ErrorClass, error)
}

// MessageClassesParams names the messages whose classes MessageClasses reads.
type MessageClassesParams struct {
	Queue string
	// IDs are the messages (at most MessageClassesIDsMax).
	IDs []int64
}

// MessageListParams selects messages for an operator listing.
type MessageListParams struct {
	Queue string
	// States, when set, lists only these states.
	States []relaytype.State
	// Classes, when set, lists only these error classes.
	Classes []relaytype.ErrorClass
	// AckAbandoned lists only rows whose acknowledgement was abandoned
	// (ack_abandoned_at set, ack_at NULL).
	AckAbandoned bool
	// AfterID starts the page after this id (0: from the start).
	AfterID int64
	// Limit caps the page (<= 0: LimitDefault; at most MessageListLimitMax).
	Limit int
}
