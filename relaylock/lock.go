// Package relaylock keeps one instance active per pipeline: a process runs a
// pipeline's singleton parts (the watermark intake, whose cursor is a single
// overwritten row with holes timed in one place, and the global FIFO pump)
// only while it holds the pipeline's lock in the store. A second instance
// waits for the lock instead of corrupting the watermark, and takes over when
// the holder stops or dies: PostgreSQL frees its session advisory lock with
// the dead session at once; a SQLite lease row expires after its TTL.
//
// Run is the whole API: it waits for the lock, runs a function while holding
// it, renews it, and cancels the function when the lock is lost.
package relaylock

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
	// TTLDefault is Params.TTL when zero.
	TTLDefault = 15 * time.Second
	// RetryEveryDefault is Params.RetryEvery when zero.
	RetryEveryDefault = time.Second
)

// ErrLost is returned (wrapped) by Run when the lock was lost while fn ran: a
// renewal failed, so another instance may already hold it. Test it with
// errors.Is.
var ErrLost = errors.New("relaylock: lock lost; stopped so another instance can take over")

// Params configure Run. Zero values take the documented defaults.
type Params struct {
	// Name is the lock name, e.g. "pipeline:<name>". Required.
	Name string
	// Owner names this process in lease rows and logs. Required.
	Owner string
	// TTL is the lease length on lease-based stores (SQLite); the lock is
	// renewed every TTL/3 on every store. A dead holder's lease blocks the next
	// instance for up to TTL. Default TTLDefault.
	TTL time.Duration
	// RetryEvery is how often a waiting instance tries again. Default RetryEveryDefault.
	RetryEvery time.Duration
	// Clock supplies the time for leases, renewals and waits. Required.
	Clock relaytype.Clock
	// Logger receives "waiting"/"acquired"/"lost" records. Default slog.Default().
	Logger *slog.Logger
	// OnWaiting, when set, is called once when the lock is first found taken
	// (on Run's goroutine).
	OnWaiting func()
}

// Run waits until it holds the lock named p.Name on store d, then runs fn with
// a context that is cancelled if the lock is lost (a failed renewal) or ctx
// ends, and releases the lock when fn returns. A store error while waiting is
// logged and retried every p.RetryEvery. It returns fn's error, or an error
// wrapping ErrLost (joined with fn's error unless that is a cancellation) when
// the lock was lost, or ctx's error if ctx ended while waiting. ctx governs the
// wait and fn's context; the release runs even after ctx ended, bounded by 5s.
// Run may be called from several goroutines with different names.
func Run(ctx context.Context, d relaydriver.Driver, p Params, fn func(ctx context.Context) error) error {
	if p.Name == "" || p.Owner == "" || p.Clock == nil {
		return errors.New("relaylock: Params.Name, Owner and Clock are required")
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
