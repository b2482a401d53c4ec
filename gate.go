package relay

import "context"

// LifecycleGate serialises lifecycle work on one queue within this
// instance: replay and acknowledgement write-back never interleave (seed 000
// §5.3, §9.1), because a replay that resets acknowledgement facts while a
// write-back is marking the same rows would leave either one's facts wrong.
// The processing loop does not take the gate (the FIFO exhaust step is
// explicitly outside it, seed 000 §5.1 step 3). Safe for concurrent use.
type LifecycleGate struct {
	sem chan struct{}
}

func newLifecycleGate() *LifecycleGate { return &LifecycleGate{sem: make(chan struct{}, 1)} }

// Do runs fn while holding the gate exclusively. ctx bounds the wait for the
// gate (Do returns ctx.Err() without running fn) and is passed to fn. Do is not
// reentrant: calling Do from inside fn deadlocks until ctx ends.
func (g *LifecycleGate) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-g.sem }()
	return fn(ctx)
}
