package snapshot

import (
	"context"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
)

// ReasonCovered is the skip reason of a change the record's snapshot row
// already contains.
const ReasonCovered = "snapshot-covered"

// Filter wraps the client's normaliser with the catch-up decision: a change
// of a snapshotted rule, read from the pinned position on, that the
// record's snapshot row already contains is skipped (ReasonCovered) instead
// of replayed over a newer row (see Covered). Other records pass unchanged.
type Filter struct {
	Next   client.Normalizer
	Runner *Runner
}

// Normalize implements client.Normalizer.
func (f *Filter) Normalize(ctx context.Context, src normalize.Source, ev *cdc.Event, trustedNow time.Time) (normalize.Outcome, error) {
	o, err := f.Next.Normalize(ctx, src, ev, trustedNow)
	if err != nil || o.Disposition != normalize.Emit || o.Rule == nil || !o.Rule.Revisioned {
		return o, err
	}
	t, ok := f.Runner.latest(o.Rule.ID, src)
	if !ok {
		return o, nil
	}
	hash := KeyHash(ev.Key)
	rev, from, err := f.Runner.cfg.Store.row(ctx, t, hash)
	if err != nil {
		return normalize.Outcome{}, err
	}
	covered, next := Covered(rev, o.Event.BaseRevision, o.Event.ResultRevision, src.Offset, from)
	if next != from {
		if err := f.Runner.cfg.Store.setApplyFrom(ctx, t, hash, next); err != nil {
			return normalize.Outcome{}, err
		}
	}
	if covered {
		return normalize.Outcome{Disposition: normalize.Skip, Reason: ReasonCovered,
			Detail: "the record's snapshot row already holds this change", Rule: o.Rule, Priority: o.Priority}, nil
	}
	return o, nil
}

// latest returns the id of the rule's latest task that pinned src's
// partition at or before src's offset.
func (r *Runner) latest(rule string, src normalize.Source) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.tasks {
		if t.RuleID != rule {
			continue
		}
		if pin, ok := t.Pinned(src.Topic, src.Partition); ok && src.Offset >= pin {
			return t.ID, true
		}
	}
	return "", false
}
