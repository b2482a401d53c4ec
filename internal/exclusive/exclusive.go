// Package exclusive turns the seed's single-active-instance precondition
// (seed 000 §4.5, PRE-5: the watermark is a single-row overwrite and holes are
// timed in one place) into a guarantee: a process runs a pipeline's intake and
// FIFO pump only while it holds the pipeline's store lock. A second instance
// waits for the lock instead of corrupting the watermark, and takes over when
// the holder stops or dies (PostgreSQL frees the advisory lock with the dead
// session at once; a SQLite lease expires after its TTL).
package exclusive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of Params.
const (
	TTLDefault        = 15 * time.Second
	RetryEveryDefault = time.Second
)

// ErrLost is returned (wrapped) by Run when the lock was lost while fn ran.
var ErrLost = errors.New("exclusive: lock lost; stopped so another instance can take over")

// Params configure Run.
type Params struct {
	// Name is the lock name, e.g. "pipeline:<name>". Required.
	Name string
	// Owner names this process in lease rows and logs. Required.
	Owner string
	// TTL is the lease length on lease-based stores; the lock is renewed every
	// TTL/3. Default TTLDefault.
	TTL time.Duration
	// RetryEvery is how often a waiting instance tries again. Default RetryEveryDefault.
	RetryEvery time.Duration
	// Clock supplies the time for leases and waits. Required.
	Clock relaytype.Clock
	// Logger receives "waiting"/"acquired"/"lost" records. Default slog.Default().
	Logger *slog.Logger
	// OnWaiting, when set, is called once when the lock is first found taken.
	OnWaiting func()
	// NoWait makes Run return at once, with an error wrapping
	// relaytype.ErrLocked (or the store's error), when the lock cannot be
	// taken on the first attempt, instead of waiting for it.
	NoWait bool
}

// Run waits until it holds the lock, then runs fn with a context that is
// cancelled if the lock is lost (a failed renewal) or ctx ends, and releases
// the lock when fn returns. It returns fn's error, or an error wrapping ErrLost
// when the lock was lost, or ctx's error if ctx ended while waiting (with
// Params.NoWait: the first attempt's error instead of waiting).
func Run(ctx context.Context, d relaydriver.Driver, p Params, fn func(ctx context.Context) error) error {
	if p.Name == "" || p.Owner == "" || p.Clock == nil {
		return errors.New("exclusive: Params.Name, Owner and Clock are required")
	}
	p.TTL = cmp.Or(p.TTL, TTLDefault)
	p.RetryEvery = cmp.Or(p.RetryEvery, RetryEveryDefault)
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}

	lock, err := acquire(ctx, d, p, log)
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "exclusive lock acquired", "lock", p.Name, "owner", p.Owner)
	defer func() {
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := lock.Release(relCtx); err != nil {
			log.WarnContext(ctx, "exclusive lock release failed", "lock", p.Name, "err", err)
		}
	}()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		for {
			select {
			case <-runCtx.Done():
				return
			case <-p.Clock.After(p.TTL / 3):
			}
			if err := lock.Renew(runCtx, p.Clock.Now()); err != nil {
				if runCtx.Err() != nil {
					return
				}
				log.ErrorContext(ctx, "exclusive lock lost", "lock", p.Name, "err", err)
				cancel(fmt.Errorf("%w: %w", ErrLost, err))
				return
			}
		}
	}()
	fnErr := fn(runCtx)
	cause := context.Cause(runCtx)
	cancel(nil)
	<-renewDone
	if errors.Is(cause, ErrLost) {
		return errors.Join(cause, ignoreCanceled(fnErr))
	}
	return fnErr
}

func acquire(ctx context.Context, d relaydriver.Driver, p Params, log *slog.Logger) (relaydriver.Lock, error) {
	waiting := false
	for {
		lock, err := d.TryLock(ctx, &relaydriver.LockParams{Name: p.Name, Owner: p.Owner, TTL: p.TTL, Now: p.Clock.Now()})
		if err == nil {
			return lock, nil
		}
		if p.NoWait {
			return nil, fmt.Errorf("exclusive: lock %q: %w", p.Name, err)
		}
		if !errors.Is(err, relaytype.ErrLocked) {
			// A store failure while waiting is not fatal: log it and try again.
			log.WarnContext(ctx, "exclusive lock attempt failed", "lock", p.Name, "err", err)
		} else if !waiting {
			waiting = true
			log.InfoContext(ctx, "waiting for exclusive lock held by another instance", "lock", p.Name)
			if p.OnWaiting != nil {
				p.OnWaiting()
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.Clock.After(p.RetryEvery):
		}
	}
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
