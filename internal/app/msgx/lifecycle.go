package msgx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// historyBatch bounds one flight-history transaction (it holds PIPELINE_LOCK,
// so the pump waits for it: keep it short).
const historyBatch = 200

// purgeBatch bounds one purge statement.
const purgeBatch = 1000

// Lifecycle is the msgx maintenance job (seed 000 §9.3 JobRunner): flight
// history cleanup, SCHD_SNAP_LOG retention, REQ_TRACK retention and the
// history store's own retention. It never takes part in the FIFO; only the
// flight-history deletion takes PIPELINE_LOCK, in short batches (INV-18).
type Lifecycle struct {
	cfg   Config
	d     relaydriver.Driver // the msgx store (PostgreSQL), for ExecutorTx
	pool  *pgxpool.Pool
	clock relaytype.Clock
	log   *slog.Logger
}

// NewLifecycle returns the job over the msgx store d (a relaypgx driver) and its pool.
func NewLifecycle(cfg Config, d relaydriver.Driver, pool *pgxpool.Pool, clock relaytype.Clock, log *slog.Logger) *Lifecycle {
	return &Lifecycle{cfg: cfg, d: d, pool: pool, clock: clock, log: log}
}

// LifecycleResult counts what one pass did.
type LifecycleResult struct {
	Archived, Tombstoned, SnapLogPurged, RequestsPurged, HistoryPurged int
}

// Pass runs every lifecycle task once.
func (l *Lifecycle) Pass(ctx context.Context) (LifecycleResult, error) {
	var res LifecycleResult
	// Page through the candidates by FLID: a page whose families must wait
	// archives nothing but does not stop the pass.
	for after := ""; ; {
		n, tomb, last, err := l.historyBatch(ctx, after)
		res.Archived += n
		res.Tombstoned += tomb
		if err != nil {
			return res, err
		}
		if last == "" {
			break
		}
		after = last
	}
	now := l.clock.Now()
	var err error
	if res.SnapLogPurged, err = purgeAll(ctx, func(ctx context.Context) (int, error) {
		return flightstore.PurgeSnapLog(ctx, l.pool, now.Add(-l.cfg.SnapLogRetention), purgeBatch)
	}); err != nil {
		return res, err
	}
	if res.RequestsPurged, err = purgeAll(ctx, func(ctx context.Context) (int, error) {
		return flightstore.RequestPurgeClosed(ctx, l.pool, now.Add(-l.cfg.RequestRetention), purgeBatch)
	}); err != nil {
		return res, err
	}
	res.HistoryPurged, err = purgeAll(ctx, func(ctx context.Context) (int, error) {
		return flightstore.PurgeHistory(ctx, l.pool, now.Add(-l.cfg.HistoryRetention), purgeBatch)
	})
	return res, err
}

func purgeAll(ctx context.Context, f func(context.Context) (int, error)) (int, error) {
	total := 0
	for {
		n, err := f(ctx)
		total += n
		if err != nil || n < purgeBatch {
			return total, err
		}
	}
}

// historyBatch archives then deletes one batch of finished flights (seed 000
// §9.3, §12.5, D1) in one transaction under PIPELINE_LOCK: candidates are
// flights of an operating day more than FlightKeepDays old — or, without an
// operating day, created more than FlightKeepDays ago — and unchanged for
// FlightQuiet. A flight never FDEL'd first gets its deletion events (a
// KAFKA:msg DELETE notice and a KAFKA:schd tombstone) in the same transaction.
// Master and shared flights leave together: a master whose active children
// are not all candidates, and a shared flight whose active master is not a
// candidate, wait — removing one alone would change a MAFL without a master
// version (§11.4). When the history write fails, nothing is deleted.
//
// It reads the candidates after FLID after and returns, as last, the last
// candidate FLID it read when it read a full page ("" when there is nothing
// further to read).
func (l *Lifecycle) historyBatch(ctx context.Context, after string) (archived, tombstoned int, last string, err error) {
	now := l.clock.Now()
	day := now.In(l.cfg.Flight.AirportLocation()).AddDate(0, 0, -l.cfg.FlightKeepDays).Format("20060102")
	tx, err := l.d.Begin(ctx)
	if err != nil {
		return 0, 0, "", err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback(context.WithoutCancel(ctx)))
		}
	}()
	ptx, err := relaypgx.PgxTx(tx)
	if err != nil {
		return 0, 0, "", err
	}
	if err = flightstore.LockPipeline(ctx, ptx); err != nil {
		return 0, 0, "", err
	}
	cut := flightstore.HistoryCutoff{Day: day, Undated: now.AddDate(0, 0, -l.cfg.FlightKeepDays), Quiet: now.Add(-l.cfg.FlightQuiet)}
	cands, err := flightstore.HistoryCandidatesAfter(ctx, ptx, cut, after, historyBatch)
	if len(cands) == historyBatch {
		last = cands[len(cands)-1].FLID
	}
	if err != nil || len(cands) == 0 {
		if err == nil {
			err = tx.Rollback(ctx)
		}
		return 0, 0, "", err
	}
	flids := make([]string, len(cands))
	isCand := make(map[string]bool, len(cands))
	for i, s := range cands {
		flids[i] = s.FLID
		isCand[s.FLID] = true
	}
	// Current families, in one round trip: the candidates, their masters and
	// all their children.
	family, err := flightstore.LoadWith(ctx, ptx, flids, flightstore.LoadOpts{Masters: true, Children: true})
	if err != nil {
		return 0, 0, "", err
	}
	// Families leave whole: drop every blocked candidate, then whatever that
	// blocks in turn (a child of a master that now stays), until nothing changes.
	for changed := true; changed; {
		changed = false
		for _, s := range cands {
			if isCand[s.FLID] && blocked(s, family, isCand) {
				isCand[s.FLID] = false
				changed = true
			}
		}
	}
	var (
		leave  []*flight.State
		docs   = make(map[string][]byte)
		events []*relay.OutboxEvent
	)
	for _, s := range cands {
		if !isCand[s.FLID] {
			continue
		}
		leave = append(leave, s)
		docs[s.FLID] = flight.Document(s, flight.Children(s, family), l.cfg.Flight.MessageLocation())
		if s.Status == flight.Deleted {
			continue // FDEL already sent its tombstone
		}
		v := s.Version + 1
		n := flight.Notice{FLID: s.FLID, Version: v, Action: "DELETE", Cause: "LIFECYCLE", Fields: []string{"STATE"}}
		events = append(events, &relay.OutboxEvent{ID: "lifecycle#" + s.FLID + "#" + strconv.FormatInt(v, 10),
			Target: TargetMsg, Topic: l.cfg.MsgTopic, Key: s.FLID,
			Headers: map[string]string{"msgx-action": "DELETE", "msgx-state-version": strconv.FormatInt(v, 10)},
			Payload: flight.NoticeDocument(n, flight.Msg{Kind: "LIFECYCLE", Now: now})})
		if _, err = relay.UpsertLatestTx(ctx, tx, &relay.LatestEvent{Target: TargetSchd, Topic: l.cfg.SchdTopic,
			Key: s.FLID, Version: v, Type: relaysink.Tombstone}); err != nil {
			return 0, 0, "", err
		}
		tombstoned++
	}
	if len(leave) == 0 {
		return 0, 0, last, tx.Rollback(ctx)
	}
	if _, err = relay.AppendEventsTx(ctx, tx, events...); err != nil {
		return 0, 0, "", err
	}
	done, err := flightstore.ArchiveAndDelete(ctx, ptx, leave, docs, now)
	if err != nil {
		return 0, 0, "", fmt.Errorf("msgx: flight history: %w", err)
	}
	if len(done) != len(leave) {
		// A version moved under the lock: impossible unless something writes
		// flights without PIPELINE_LOCK. Delete nothing (D1: when in doubt, 0).
		return 0, 0, "", fmt.Errorf("msgx: flight history: %d of %d candidates changed under PIPELINE_LOCK", len(leave)-len(done), len(leave))
	}
	if err = tx.Commit(ctx); err != nil {
		return 0, 0, "", err
	}
	l.log.InfoContext(ctx, "msgx: flights archived", "archived", len(done), "tombstoned", tombstoned, "before_day", day)
	return len(done), tombstoned, last, nil
}

// blocked reports whether s must wait for its family (see historyBatch):
// its master is ACTIVE and not leaving, or one of its children is not
// leaving. leaving holds the candidates still set to leave in this batch.
func blocked(s *flight.State, family map[string]*flight.State, leaving map[string]bool) bool {
	if s.MAID != "" && s.MAID != s.FLID {
		if m := family[s.MAID]; m != nil && m.Status == flight.Active && !leaving[m.FLID] {
			return true
		}
	}
	for _, c := range flight.Children(s, family) {
		if !leaving[c.FLID] {
			return true
		}
	}
	return false
}

// runEvery calls pass now and then every `every` on clock until ctx ends.
// Errors are logged and the job carries on (the next pass retries).
func runEvery(ctx context.Context, clock relaytype.Clock, every time.Duration, log *slog.Logger, what string, pass func(context.Context) error) {
	for {
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "msgx: "+what+" failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-clock.After(every):
		}
	}
}
