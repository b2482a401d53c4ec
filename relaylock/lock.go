// Package relaylock keeps one instance active per queue: a process runs a
// queue's singleton parts (the watermark intake, whose cursor is a single
// overwritten row with holes timed in one place, and the global FIFO pump)
// only while it holds the queue's lock in the store. A second instance
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
	// Name is the lock name, e.g. "pipeline:<queue>". Required.
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
	// NoWait makes Run return at once, with an error wrapping
	// relaytype.ErrLocked (or the store's error), when the lock cannot be
	// taken on the first attempt, instead of waiting for it.
	NoWait bool
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
	p, log, err := p.withDefaults()
	if err != nil {
		return err
	}
	lock, err := acquire(ctx, d, p, log, -1)
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "exclusive lock acquired", "lock", p.Name, "owner", p.Owner)
	defer release(ctx, lock, p, log)

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		keep(runCtx, lock, p, log, func(err error) { cancel(err) })
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

// Held is a lock taken by TryHold and kept renewed until Release.
type Held struct {
	lock   relaydriver.Lock
	p      Params
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{} // closed when the renewal loop has returned
	lost   chan struct{} // closed when a renewal failed
	err    error         // why it was lost; set before lost is closed
}

// TryHold takes the lock, waiting at most wait (on p.Clock, from the first
// refusal) for another holder to let go, and keeps it renewed every TTL/3
// until Release. On a lease-based store a holder that died frees the lock
// only when its lease expires, so a wait of TTL tells a dead holder (its
// lease runs out) from a live one (it keeps renewing). It returns an error
// wrapping relaytype.ErrLocked when another holder still has the lock after
// wait, the store's error at once, or ctx's error if ctx ends first; ctx
// governs only the taking. Lost reports a failed renewal.
func TryHold(ctx context.Context, d relaydriver.Driver, p Params, wait time.Duration) (*Held, error) {
	p, log, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	lock, err := acquire(ctx, d, p, log, max(wait, 0))
	if err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "exclusive lock acquired", "lock", p.Name, "owner", p.Owner)
	keepCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &Held{lock: lock, p: p, log: log, cancel: cancel, done: make(chan struct{}), lost: make(chan struct{})}
	go func() {
		defer close(h.done)
		keep(keepCtx, lock, p, log, func(err error) {
			h.err = err
			close(h.lost)
		})
	}()
	return h, nil
}

// Lost is closed when a renewal failed: the holder must stop writing what the
// lock protects. Err then says why.
func (h *Held) Lost() <-chan struct{} { return h.lost }

// Err returns nil while the lock is held, and an error wrapping ErrLost once
// Lost is closed.
func (h *Held) Err() error {
	select {
	case <-h.lost:
		return h.err
	default:
		return nil
	}
}

// Release stops the renewals and gives the lock up; ctx bounds the release.
// Safe to call more than once.
func (h *Held) Release(ctx context.Context) {
	h.cancel()
	<-h.done
	release(ctx, h.lock, h.p, h.log)
}

// withDefaults checks the required fields and fills in the defaults.
func (p Params) withDefaults() (Params, *slog.Logger, error) {
	if p.Name == "" || p.Owner == "" || p.Clock == nil {
		return p, nil, errors.New("relaylock: Params.Name, Owner and Clock are required")
	}
	p.TTL = cmp.Or(p.TTL, TTLDefault)
	p.RetryEvery = cmp.Or(p.RetryEvery, RetryEveryDefault)
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	return p, log, nil
}

// keep renews lock every TTL/3 until ctx ends; on a failed renewal it logs,
// calls lost with an error wrapping ErrLost and returns.
func keep(ctx context.Context, lock relaydriver.Lock, p Params, log *slog.Logger, lost func(error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.Clock.After(p.TTL / 3):
		}
		if err := lock.Renew(ctx, p.Clock.Now()); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.ErrorContext(ctx, "exclusive lock lost", "lock", p.Name, "err", err)
			lost(fmt.Errorf("%w: %w", ErrLost, err))
			return
		}
	}
}

// release gives the lock up, logging a failure (the store frees it anyway:
// the session dies, or the lease expires).
func release(ctx context.Context, lock relaydriver.Lock, p Params, log *slog.Logger) {
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := lock.Release(relCtx); err != nil {
		log.WarnContext(ctx, "exclusive lock release failed", "lock", p.Name, "err", err)
	}
}

// acquire takes the lock, retrying every RetryEvery while another holder has
// it: forever when wait < 0 (a store failure is logged and retried too), else
// until wait has passed since the first refusal (then an error wrapping
// relaytype.ErrLocked; a store failure is returned at once).
func acquire(ctx context.Context, d relaydriver.Driver, p Params, log *slog.Logger, wait time.Duration) (relaydriver.Lock, error) {
	var refusedAt time.Time // zero: not refused yet
	for {
		lock, err := d.TryLock(ctx, &relaydriver.LockParams{Name: p.Name, Owner: p.Owner, TTL: p.TTL, Now: p.Clock.Now()})
		if err == nil {
			return lock, nil
		}
		if p.NoWait {
			return nil, fmt.Errorf("relaylock: lock %q: %w", p.Name, err)
		}
		if !errors.Is(err, relaytype.ErrLocked) {
			if wait >= 0 {
				return nil, fmt.Errorf("relaylock: lock %q: %w", p.Name, err)
			}
			// A store failure while waiting is not fatal: log it and try again.
			log.WarnContext(ctx, "exclusive lock attempt failed", "lock", p.Name, "err", err)
		} else {
			if refusedAt.IsZero() {
				refusedAt = p.Clock.Now()
				log.InfoContext(ctx, "waiting for exclusive lock held by another instance", "lock", p.Name)
				if p.OnWaiting != nil {
					p.OnWaiting()
				}
			}
			if wait >= 0 && p.Clock.Now().Sub(refusedAt) >= wait {
				return nil, fmt.Errorf("relaylock: lock %q still held by another instance after %s: %w", p.Name, wait, err)
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
