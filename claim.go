package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// workClaim runs the per-key and unordered modes until a claim comes back
// empty. Each round leases up to BatchSize ready messages to this instance in a
// short lease-only transaction (SKIP LOCKED where supported) and processes them
// outside it with up to Workers goroutines. Caller holds workMu.
func (e *Engine) workClaim(ctx context.Context, stop <-chan struct{}) (int, error) {
	n := 0
	for !stopping(stop) && ctx.Err() == nil {
		now := e.cfg.Clock.Now()
		msgs, err := e.d.GetExecutor().MessageClaim(ctx, &relaydriver.MessageClaimParams{
			Pipeline:   e.cfg.Pipeline,
			PerKey:     e.cfg.Mode == ModePerKey,
			Limit:      e.cfg.BatchSize,
			Owner:      e.cfg.InstanceID,
			LeaseUntil: now.Add(e.cfg.LeaseDuration),
			Now:        now,
		})
		if err != nil {
			return n, fmt.Errorf("relay: claim from %q: %w", e.cfg.Pipeline, err)
		}
		if len(msgs) == 0 {
			return n, nil
		}
		decided, err := e.runClaimed(ctx, e.groups(msgs))
		n += decided
		if err != nil {
			return n, err
		}
	}
	return n, ctx.Err()
}

// groups splits a claim into units that must run serially: one group per key
// in ModePerKey (the claim already takes one head per key; grouping keeps the
// order even if a store returned more), one message per group otherwise.
func (e *Engine) groups(msgs []*relaytype.Message) [][]*relaytype.Message {
	if e.cfg.Mode != ModePerKey {
		out := make([][]*relaytype.Message, len(msgs))
		for i, m := range msgs {
			out[i] = []*relaytype.Message{m}
		}
		return out
	}
	idx := make(map[string]int)
	var out [][]*relaytype.Message
	for _, m := range msgs { // ascending id order from the claim
		i, ok := idx[m.Key]
		if !ok {
			i = len(out)
			idx[m.Key] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], m)
	}
	return out
}

// runClaimed processes the groups with up to Workers goroutines, each group on
// one goroutine in order; a group stops at its first message that did not reach
// a terminal state, so a failing head pauses only its own key. Store errors are
// joined and returned once.
func (e *Engine) runClaimed(ctx context.Context, groups [][]*relaytype.Message) (int, error) {
	var (
		mu      sync.Mutex
		decided int
		errs    []error
		wg      sync.WaitGroup
		sem     = make(chan struct{}, e.cfg.Workers)
	)
	for _, g := range groups {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, m := range g {
				o, err := e.processOne(ctx, m, e.cfg.InstanceID)
				mu.Lock()
				if o.decided() {
					decided++
				}
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if err != nil || !o.terminal() {
					return
				}
			}
		}()
	}
	wg.Wait()
	return decided, errors.Join(errs...)
}
