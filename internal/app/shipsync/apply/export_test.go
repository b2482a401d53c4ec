package apply

import (
	"context"
	"time"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// WriteOnly runs the target half of an apply alone — what a process that
// died right after the target's commit leaves behind.
func (t *Target) WriteOnly(ctx context.Context, inboxID int64, ev *pb.ChangeEvent, rule *shore.Rule, op Op, now time.Time) (bool, error) {
	changed, refused, err := t.Apply(ctx, []Conditional{ChangeWrite(ruleTable(rule), ev, op, ev.EventId, inboxID)}, now)
	if err != nil {
		return false, err
	}
	if refused[0] != nil {
		return false, refused[0]
	}
	return changed[0], nil
}

// RunGrouped is runGrouped: the set-based form alone, without the statement
// per write it falls back to.
func (t *Target) RunGrouped(ctx context.Context, ws []Conditional, now time.Time) error {
	return t.runGrouped(ctx, ws, now)
}

// ErrNotAllChanged is errNotAllChanged.
var ErrNotAllChanged = errNotAllChanged
