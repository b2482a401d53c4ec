package relay

import (
	"context"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// withClockTimeout returns a context that is cancelled with cause once d has
// passed on clock (armed before it returns, so deterministic with a fake
// clock), and a stop function that releases it; call stop when the bounded
// call has returned. context.Cause tells a timeout from any other end.
func withClockTimeout(ctx context.Context, clock relaytype.Clock, d time.Duration, cause error) (context.Context, func()) {
	tctx, cancel := context.WithCancelCause(ctx)
	timer := clock.After(d)
	done := make(chan struct{})
	go func() {
		select {
		case <-timer:
			cancel(cause)
		case <-done:
		}
	}()
	return tctx, func() {
		close(done)
		cancel(nil)
	}
}
