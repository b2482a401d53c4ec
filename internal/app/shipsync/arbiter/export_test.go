package arbiter

import "context"

// SetBeforeDecide sets the hook run after a case is claimed and before its
// verdict is stored.
func SetBeforeDecide(cfg *Config, f func(conflictID string) error) { cfg.beforeDecide = f }

// SetBeforeDispatch sets the hook run before a decided case is written and
// sent.
func SetBeforeDispatch(cfg *Config, f func(conflictID string) error) { cfg.beforeDispatch = f }

// SetStateForTest moves case id to state as lease owner would (the fence).
func (a *Arbiter) SetStateForTest(ctx context.Context, id, owner, state string) error {
	return a.setState(ctx, id, owner, state, "test", "conflict.test")
}
