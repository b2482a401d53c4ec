package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaylock"
	"github.com/relayhq/relay/relaytype"
)

// InstanceLockTTL is the lifetime of the instance lock (see Engine.Start) on
// stores whose locks are leases (SQLite): the holder renews it every third of
// it, and a restart with the same InstanceID waits up to this long for a dead
// holder's lease to run out before it refuses to start. PostgreSQL frees a
// dead holder's lock with its session, at once, so there it bounds only how
// long Start waits before refusing a live duplicate.
const InstanceLockTTL = 10 * time.Second

// claimInstance takes the lock of (Queue, InstanceID) — refusing when
// another live engine holds it — and then releases every lease of the
// queue held by InstanceID: with the lock held, those can only be an
// earlier, dead incarnation's. The lock's owner is this incarnation (host,
// pid, random), so that a restart can tell itself from its predecessor.
func (e *Engine) claimInstance(ctx context.Context) (*relaylock.Held, error) {
	held, err := relaylock.TryHold(ctx, e.d, relaylock.Params{
		Name:  "relay-instance:" + strconv.Quote(e.cfg.Queue) + ":" + strconv.Quote(e.cfg.InstanceID),
		Owner: service.NewOwner(), TTL: InstanceLockTTL, RetryEvery: InstanceLockTTL / 10,
		Clock: e.cfg.Clock, Logger: e.log,
	}, InstanceLockTTL)
	if errors.Is(err, relaytype.ErrLocked) {
		return nil, fmt.Errorf("relay: Start queue %q: InstanceID %q is in use by another live engine "+
			"(two live engines must not share an InstanceID): %w", e.cfg.Queue, e.cfg.InstanceID, err)
	}
	if err != nil {
		return nil, fmt.Errorf("relay: Start queue %q: lock InstanceID %q: %w", e.cfg.Queue, e.cfg.InstanceID, err)
	}
	n, err := e.d.GetExecutor().MessageLeaseRelease(ctx, &relaydriver.MessageLeaseReleaseParams{
		Queue: e.cfg.Queue, Owner: e.cfg.InstanceID,
	})
	if err != nil {
		held.Release(ctx)
		return nil, fmt.Errorf("relay: Start queue %q: release the leases of InstanceID %q: %w", e.cfg.Queue, e.cfg.InstanceID, err)
	}
	if n > 0 {
		e.log.InfoContext(ctx, "relay: released the leases of an earlier incarnation of this instance",
			"queue", e.cfg.Queue, "instance_id", e.cfg.InstanceID, "released", n)
	}
	return held, nil
}

// ErrLeaseLost is the cancellation cause (context.Cause) of a handler's ctx
// when a lease renewal found that the message is no longer leased to this
// engine — another instance claimed it after the lease expired, or it was
// replayed. Whatever the handler then returns, its decision is dropped: the
// terminal write checks the lease owner in the handler's own transaction.
var ErrLeaseLost = errors.New("relay: lease lost to another owner")

// leaseKeeper holds the messages this engine has claimed and not yet
// finished (per-key and unordered modes), renews their leases while they are
// in flight, and tells an attempt when its lease was lost. Safe for
// concurrent use.
type leaseKeeper struct {
	e *Engine

	mu   sync.Mutex
	held map[int64]*heldLease
}

// heldLease is one message in flight.
type heldLease struct {
	// lost: a renewal found the message no longer ours. Not renewed again;
	// an attempt not yet started is skipped.
	lost bool
	// cancels cancels the ctx of the handler calls running on the message.
	cancels map[*int]context.CancelCauseFunc
}

func newLeaseKeeper(e *Engine) *leaseKeeper {
	return &leaseKeeper{e: e, held: make(map[int64]*heldLease)}
}

// add registers claimed messages as in flight.
func (k *leaseKeeper) add(ids []int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range ids {
		k.held[id] = &heldLease{}
	}
}

// done forgets messages whose unit of work ended, decided or not: a message
// left undecided keeps its lease until it expires (see runUnit).
func (k *leaseKeeper) done(ids []int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range ids {
		delete(k.held, id)
	}
}

// isLost reports whether a renewal found the message no longer ours.
func (k *leaseKeeper) isLost(id int64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	h := k.held[id]
	return h != nil && h.lost
}

// handlerContext returns ctx for one handler call on message id, cancelled
// with ErrLeaseLost when a renewal finds the lease lost (at once if it already
// has), and a function that detaches it; call it when the handler returned.
// A message that is not held (ModeFIFO) gets ctx itself.
func (k *leaseKeeper) handlerContext(ctx context.Context, id int64) (context.Context, func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	h := k.held[id]
	if h == nil {
		return ctx, func() {}
	}
	hctx, cancel := context.WithCancelCause(ctx)
	if h.lost {
		cancel(ErrLeaseLost)
		return hctx, func() { cancel(nil) }
	}
	token := new(int)
	if h.cancels == nil {
		h.cancels = make(map[*int]context.CancelCauseFunc)
	}
	h.cancels[token] = cancel
	return hctx, func() {
		k.mu.Lock()
		delete(h.cancels, token)
		k.mu.Unlock()
		cancel(nil)
	}
}

// run renews the leases in flight every LeaseDuration/3 of Clock time until
// ctx ends, so a message whose handler runs longer than LeaseDuration keeps
// its lease; a lease survives a renewal stall of up to two thirds of
// LeaseDuration.
func (k *leaseKeeper) run(ctx context.Context) {
	every := k.e.cfg.LeaseDuration / 3
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.e.cfg.Clock.After(every):
		}
		k.renew(ctx)
	}
}

// renew extends every lease in flight with one statement and lets go of the
// messages that are no longer ours: they are not renewed again, the handlers
// running on them are cancelled with ErrLeaseLost, and those not started are
// skipped. A message reported lost because this engine has just finished it
// is simply forgotten (its handler has returned). A failed renewal is logged
// and tried again next time: the leases are still ours until they expire,
// and even then a terminal write only commits while its lease is ours.
func (k *leaseKeeper) renew(ctx context.Context) {
	k.mu.Lock()
	ids := make([]int64, 0, len(k.held))
	for id, h := range k.held {
		if !h.lost {
			ids = append(ids, id)
		}
	}
	k.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	now := k.e.cfg.Clock.Now()
	res, err := k.e.d.GetExecutor().MessageLeaseRenew(ctx, &relaydriver.MessageLeaseRenewParams{
		Queue: k.e.cfg.Queue, Owner: k.e.cfg.InstanceID, IDs: ids, LeaseUntil: now.Add(k.e.cfg.LeaseDuration),
	})
	if err != nil {
		if ctx.Err() == nil {
			k.e.log.WarnContext(ctx, "relay: lease renewal failed; retrying at the next renewal",
				"queue", k.e.cfg.Queue, "leases", len(ids), "error", err)
		}
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range res.Lost {
		h := k.held[id]
		if h == nil {
			continue
		}
		h.lost = true
		if len(h.cancels) > 0 {
			// Its handler has not returned, so this engine has written nothing
			// for it yet: the lease really passed to someone else.
			k.e.log.WarnContext(ctx, "relay: lease lost while the handler ran; handler cancelled",
				"queue", k.e.cfg.Queue, "message_id", id, "lease_owner", k.e.cfg.InstanceID)
		}
		for _, cancel := range h.cancels {
			cancel(ErrLeaseLost)
		}
	}
}
