package relaywork

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of WorkerConfig.
const (
	// BatchSizeDefault is WorkerConfig.BatchSize when zero.
	BatchSizeDefault = 32
	// ConcurrencyDefault is WorkerConfig.Concurrency when zero.
	ConcurrencyDefault = 8
	// PollIntervalDefault is WorkerConfig.PollInterval when zero.
	PollIntervalDefault = 100 * time.Millisecond
)

// WorkerConfig configures Run. Zero values take the documented defaults.
type WorkerConfig struct {
	// Owner names this worker in lease rows; unique per process (Release
	// hands back every row of the owner). Required.
	Owner string
	// BatchSize is the most rows one Claim takes. Default BatchSizeDefault.
	BatchSize int
	// Concurrency is the most handlers running at once. Run claims no more
	// rows than it has free handlers, so no lease ticks while its claim
	// waits for a slot. Default ConcurrencyDefault.
	Concurrency int
	// PollInterval is the wait after a claim that found fewer rows than it
	// asked for (or failed). Default PollIntervalDefault. Waits run on
	// Config.Clock (the system clock when nil).
	PollInterval time.Duration
	// Handle processes one claim. Its contract:
	//
	//   - It recomputes the outcome from the stored facts and commits its
	//     side effects in a transaction that starts with Store.Lock(tx, c)
	//     and ends with Store.Done(tx, c, wakeAt) (or Store.Review), then
	//     returns nil. Lock refusing (ErrFenced) means another worker holds
	//     the row: roll back and return.
	//   - Returning nil without having called Done: Run marks the row done
	//     itself (no wake-up; pending again if new facts arrived), fenced
	//     like Done. A handler with nothing to write may rely on it; one
	//     with writes must not, or its writes are not fenced.
	//   - Returning an error: Run calls Store.Fail (retry_wait with backoff,
	//     needs_review after MaxAttempts), unless the lease was lost or Run
	//     is stopping (the row is then another worker's, or handed back).
	//     A handler that gives up because ctx ended must return an error
	//     (ctx.Err()), not nil: nil means handled.
	//
	// ctx is cancelled when Run's ctx ends or when the lease could not be
	// renewed; context.Cause(ctx) then wraps ErrLeaseLost. A panic is
	// recovered and treated as an error. Required.
	Handle func(ctx context.Context, c Claim) error
	// Logger receives claim and renewal failures. Default slog.Default().
	Logger *slog.Logger
}

func (w WorkerConfig) withDefaults() (WorkerConfig, error) {
	switch {
	case w.Owner == "":
		return w, errors.New("relaywork: WorkerConfig.Owner is required")
	case w.Handle == nil:
		return w, errors.New("relaywork: WorkerConfig.Handle is required")
	case w.BatchSize < 0:
		return w, fmt.Errorf("relaywork: WorkerConfig.BatchSize %d is negative", w.BatchSize)
	case w.Concurrency < 0:
		return w, fmt.Errorf("relaywork: WorkerConfig.Concurrency %d is negative", w.Concurrency)
	case w.PollInterval < 0:
		return w, fmt.Errorf("relaywork: WorkerConfig.PollInterval %s is negative", w.PollInterval)
	}
	w.BatchSize = cmp.Or(w.BatchSize, BatchSizeDefault)
	w.Concurrency = cmp.Or(w.Concurrency, ConcurrencyDefault)
	w.PollInterval = cmp.Or(w.PollInterval, PollIntervalDefault)
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	return w, nil
}

func (s *Store) clock() relaytype.Clock {
	if s.cfg.Clock == nil {
		return relayclock.System{}
	}
	return s.cfg.Clock
}

// Run claims rows of the store's queue and runs w.Handle for each, at most
// w.Concurrency at once, until ctx ends: it claims as many rows as it has
// free handlers (at most w.BatchSize), claims again at once when it got all
// it asked for, and waits w.PollInterval otherwise. While a handler runs its
// lease is renewed every Lease/3; a renewal that finds the lease lost
// cancels the handler's ctx with ErrLeaseLost. A claim or renewal error is
// logged and retried. When ctx ends Run stops claiming, waits for the
// running handlers, hands every row of w.Owner back (Release, bounded by
// 5s) and returns nil, or the Release error.
func (s *Store) Run(ctx context.Context, w WorkerConfig) error {
	w, err := w.withDefaults()
	if err != nil {
		return err
	}
	clock := s.clock()
	slots := make(chan struct{}, w.Concurrency) // one token per running handler
	var wg sync.WaitGroup
	for ctx.Err() == nil {
		// Wait for at least one free slot.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		free := 1
	take:
		for free < min(w.BatchSize, w.Concurrency) {
			select {
			case slots <- struct{}{}:
				free++
			default:
				break take
			}
		}
		claims, err := s.Claim(ctx, w.Owner, free)
		if err != nil && ctx.Err() == nil {
			w.Logger.WarnContext(ctx, "relaywork: claim failed", "queue", s.cfg.Queue, "err", err)
		}
		for _, c := range claims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				s.runOne(ctx, w, clock, c)
			}()
		}
		for range free - len(claims) {
			<-slots
		}
		if err == nil && len(claims) == free {
			continue
		}
		select {
		case <-ctx.Done():
		case <-clock.After(w.PollInterval):
		}
	}
	wg.Wait()
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := s.Release(relCtx, w.Owner); err != nil {
		return err
	}
	return nil
}

// runOne runs the handler of c with its lease renewed, then settles the row.
func (s *Store) runOne(ctx context.Context, w WorkerConfig, clock relaytype.Clock, c Claim) {
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		s.keepLease(hctx, w, clock, c, cancel)
	}()
	err := s.handle(hctx, w, c)
	lost := errors.Is(context.Cause(hctx), ErrLeaseLost)
	cancel(nil)
	<-renewed

	settleCtx := context.WithoutCancel(ctx)
	switch {
	case lost:
		// The row is another worker's now.
	case err == nil:
		// Handled, even when Run is stopping: settle it rather than hand it back.
		if derr := s.doneIfHeld(settleCtx, c); derr != nil {
			w.Logger.WarnContext(ctx, "relaywork: mark done", "queue", s.cfg.Queue, "err", derr)
		}
	case ctx.Err() != nil:
		// Stopping: Release hands the row back; a cancelled run is no failure.
	default:
		if ferr := s.Fail(settleCtx, c, err); ferr != nil && !errors.Is(ferr, ErrFenced) {
			w.Logger.WarnContext(ctx, "relaywork: record failure", "queue", s.cfg.Queue, "err", ferr)
		}
	}
}

// handle calls w.Handle, turning a panic into an error.
func (s *Store) handle(ctx context.Context, w WorkerConfig, c Claim) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("relaywork: handler panicked: %v", p)
		}
	}()
	return w.Handle(ctx, c)
}

// keepLease renews c's lease every Lease/3 until ctx ends; when the lease is
// lost it cancels ctx with an error wrapping ErrLeaseLost.
func (s *Store) keepLease(ctx context.Context, w WorkerConfig, clock relaytype.Clock, c Claim, cancel context.CancelCauseFunc) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-clock.After(s.cfg.Lease / 3):
		}
		lost, err := s.Renew(ctx, []Claim{c})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			w.Logger.WarnContext(ctx, "relaywork: renew failed", "queue", s.cfg.Queue, "err", err)
		case len(lost) > 0:
			cancel(fmt.Errorf("%w: %s/%s fence %d", ErrLeaseLost, c.Queue, c.Key, c.Fence))
			return
		}
	}
}

// doneIfHeld marks c done (no wake-up) when its row is still processing
// under c's fence: the handler returned nil without calling Done. A row the
// handler already finished is left alone.
func (s *Store) doneIfHeld(ctx context.Context, c Claim) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("relaywork: done %s: begin: %w", c.Key, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	_, err = tx.Exec(ctx, stmts["Done"], s.now(), c.Queue, c.Key, c.Fence, c.Owner, c.Revision, nil)
	if err != nil {
		return fmt.Errorf("relaywork: done %s: %w", c.Key, err)
	}
	return tx.Commit(ctx)
}
