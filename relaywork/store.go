package relaywork

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// Line is the name of the package's migration line.
const Line = "relay_work"

//go:embed migration
var migrationFS embed.FS

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("relaywork/queries.sql", queriesSQL,
	"Ensure", "Bump", "Claim", "Renew", "Lock", "Done", "FailLock", "Fail", "Review", "Rearm",
	"Release", "Get", "Stats", "LockMany", "DoneMany")

// MigrationLine returns the line "relay_work" (the embedded files
// migration/relay_work/NNN_name.up.sql, PostgreSQL only). Apply it with
// relaymigrate.Up on a relaypgx driver; check it with relaymigrate.Check.
func MigrationLine() relaymigrate.Line {
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil {
		panic(fmt.Sprintf("relaywork: embedded migrations: %v", err)) // cannot happen: the path is a constant
	}
	return relaymigrate.Line{Name: Line, FS: sub}
}

// Defaults and limits of Config and keys.
const (
	// LeaseDefault is Config.Lease when zero.
	LeaseDefault = 60 * time.Second
	// MaxAttemptsDefault is Config.MaxAttempts when zero.
	MaxAttemptsDefault = 12
	// BackoffCap bounds DefaultBackoff.
	BackoffCap = 5 * time.Minute
	// MaxKey is the most characters of a key (and of a queue or owner name).
	MaxKey = 200
	// MaxErrorText is the most characters of last_error.
	MaxErrorText = 300
)

// State is a work row's state.
type State string

// The states of a work row; docs/work.md has the transitions.
const (
	// StatePending: claimable now (new facts, or handed back).
	StatePending State = "pending"
	// StateProcessing: held by LeaseOwner until LeaseUntil.
	StateProcessing State = "processing"
	// StateRetryWait: failed; claimable again at NextAttemptAt.
	StateRetryWait State = "retry_wait"
	// StateIdle: everything seen is processed; claimable at NextAttemptAt
	// when set (a wake-up), else only after the next Bump.
	StateIdle State = "idle"
	// StateNeedsReview: waits for a person (Rearm); a Bump does not re-arm it.
	StateNeedsReview State = "needs_review"
)

// States lists every state, in a stable order.
var States = []State{StatePending, StateProcessing, StateRetryWait, StateIdle, StateNeedsReview}

// ErrFenced is returned (wrapped with the queue and key) when a claim is no
// longer the row's current holder: its fence changed (another worker claimed
// the row after the lease expired), its owner differs, the row left
// processing, or (Lock) the lease has expired. The holder must not commit.
var ErrFenced = errors.New("relaywork: fenced: the claim is no longer current")

// ErrLeaseLost is the cause of a handler context Run cancelled because the
// claim's lease could not be renewed (context.Cause returns an error
// wrapping it).
var ErrLeaseLost = errors.New("relaywork: lease lost")

// Config configures a Store. Zero values take the documented defaults.
type Config struct {
	// Queue names the set of work rows this store serves; several stores
	// with different queues share one table. Required, at most MaxKey characters.
	Queue string
	// Lease is how long a claim holds a row without renewal. Default
	// LeaseDefault. Run renews every Lease/3.
	Lease time.Duration
	// MaxAttempts is how many consecutive failures a row may have: the
	// failure that reaches it moves the row to needs_review. Default
	// MaxAttemptsDefault.
	MaxAttempts int
	// Backoff returns the wait after the attempt-th consecutive failure
	// (attempt ≥ 1). Default DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// Clock stamps every statement and drives Run's waits. Nil: the
	// database's clock_timestamp() stamps the rows and Run waits on the
	// system clock.
	Clock relaytype.Clock
}

// DefaultBackoff is 1s·2^(attempt-1), capped at BackoffCap.
func DefaultBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 10 { // 2^9 s already exceeds the cap
		return BackoffCap
	}
	return min(time.Second<<(attempt-1), BackoffCap)
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Queue == "":
		return c, errors.New("relaywork: Config.Queue is required")
	case utf8.RuneCountInString(c.Queue) > MaxKey:
		return c, fmt.Errorf("relaywork: Config.Queue has more than %d characters", MaxKey)
	case c.Lease < 0:
		return c, fmt.Errorf("relaywork: Config.Lease %s is negative", c.Lease)
	case c.Lease > 0 && c.Lease < time.Millisecond:
		return c, fmt.Errorf("relaywork: Config.Lease %s is below 1ms", c.Lease)
	case c.MaxAttempts < 0:
		return c, fmt.Errorf("relaywork: Config.MaxAttempts %d is negative", c.MaxAttempts)
	}
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, MaxAttemptsDefault)
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	return c, nil
}

// Store reads and writes the work rows of one queue. Safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config

	claims, takeovers, fenced, failures atomic.Uint64
}

// New returns a Store for cfg.Queue on pool, whose schema must have the
// relay_work line applied (MigrationLine). It returns an error naming the bad
// Config field.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("relaywork: New: pool is nil")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{pool: pool, cfg: cfg}, nil
}

// Queue returns the store's queue.
func (s *Store) Queue() string { return s.cfg.Queue }

// Claim is one row held by a worker: the proof of holding it is the Fence.
type Claim struct {
	// Queue and Key name the row.
	Queue, Key string
	// Fence is the row's fencing token after this claim: Lock, Done, Fail
	// and Review succeed only while the row still carries it.
	Fence int64
	// Revision is the row's revision when claimed: the facts up to it are
	// the ones this run must account for.
	Revision int64
	// Owner is the claimer's name.
	Owner string
	// TakenOver is true when the row was processing under an expired lease
	// (its previous holder died or stalled).
	TakenOver bool
	// Attempts is the number of consecutive failures before this claim.
	Attempts int
}

// now returns the time parameter of every statement: nil (SQL NULL, the
// database's clock_timestamp()) without a Clock.
func (s *Store) now() *time.Time {
	if s.cfg.Clock == nil {
		return nil
	}
	t := s.cfg.Clock.Now()
	return &t
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// sortedKeys checks keys and returns them sorted and without duplicates.
func sortedKeys(keys []string) ([]string, error) {
	out := slices.Clone(keys)
	for _, k := range out {
		if err := checkKey(k); err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func checkKey(k string) error {
	if k == "" {
		return errors.New("relaywork: empty key")
	}
	if utf8.RuneCountInString(k) > MaxKey {
		return fmt.Errorf("relaywork: key of %d characters exceeds %d", utf8.RuneCountInString(k), MaxKey)
	}
	return nil
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Ensure creates an idle row (revision 0) for every key that has none, in
// the caller's transaction tx, with the wake-up time wakeAt (zero: none, the
// row sleeps until its first Bump). Existing rows are left untouched. Keys
// are written in sorted order (the lock order); duplicates are ignored.
func (s *Store) Ensure(ctx context.Context, tx pgx.Tx, keys []string, wakeAt time.Time) error {
	sorted, err := sortedKeys(keys)
	if err != nil || len(sorted) == 0 {
		return err
	}
	if _, err := tx.Exec(ctx, stmts["Ensure"], s.now(), s.cfg.Queue, sorted, optTime(wakeAt)); err != nil {
		return fmt.Errorf("relaywork: ensure %d keys in %q: %w", len(sorted), s.cfg.Queue, err)
	}
	return nil
}

// Bump records that a new fact arrived for each key, in the caller's
// transaction tx (the one that stores the facts): a missing row is created
// pending at revision 1; an existing one gets revision+1 and, when idle,
// becomes pending. A row retry_wait, processing or needs_review keeps its
// state: a worker processing it sees the newer revision on Done and leaves
// it pending. Keys are written in sorted order (the lock order), in one
// statement; duplicates count once.
func (s *Store) Bump(ctx context.Context, tx pgx.Tx, keys []string) error {
	sorted, err := sortedKeys(keys)
	if err != nil || len(sorted) == 0 {
		return err
	}
	if _, err := tx.Exec(ctx, stmts["Bump"], s.now(), s.cfg.Queue, sorted); err != nil {
		return fmt.Errorf("relaywork: bump %d keys in %q: %w", len(sorted), s.cfg.Queue, err)
	}
	return nil
}

// Claim takes up to n claimable rows for owner in its own short
// transaction, oldest first: pending (by the time they became pending),
// retry_wait and idle rows whose next_attempt_at has come, and processing
// rows whose lease expired (a takeover). Rows another claimer is taking are
// skipped (FOR UPDATE SKIP LOCKED), so concurrent claimers never get the
// same row. Each claimed row becomes processing for owner until now+Lease,
// with fence+1. owner must be unique per process (Release hands back every
// row of an owner).
func (s *Store) Claim(ctx context.Context, owner string, n int) ([]Claim, error) {
	if owner == "" || utf8.RuneCountInString(owner) > MaxKey {
		return nil, fmt.Errorf("relaywork: claim: owner must have 1 to %d characters", MaxKey)
	}
	if n <= 0 {
		return nil, fmt.Errorf("relaywork: claim: n = %d, want > 0", n)
	}
	rows, err := s.pool.Query(ctx, stmts["Claim"], s.now(), s.cfg.Queue, n, owner, micros(s.cfg.Lease))
	if err != nil {
		return nil, fmt.Errorf("relaywork: claim in %q: %w", s.cfg.Queue, err)
	}
	type claimed struct {
		c     Claim
		since time.Time
	}
	var got []claimed
	for rows.Next() {
		c := Claim{Queue: s.cfg.Queue, Owner: owner}
		var attempts int32
		var since time.Time
		if err := rows.Scan(&c.Key, &c.Fence, &c.Revision, &attempts, &c.TakenOver, &since); err != nil {
			rows.Close()
			return nil, fmt.Errorf("relaywork: claim in %q: scan: %w", s.cfg.Queue, err)
		}
		c.Attempts = int(attempts)
		got = append(got, claimed{c, since})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("relaywork: claim in %q: %w", s.cfg.Queue, err)
	}
	// RETURNING has no order: give the claims back oldest first.
	slices.SortFunc(got, func(a, b claimed) int {
		return cmp.Or(a.since.Compare(b.since), strings.Compare(a.c.Key, b.c.Key))
	})
	out := make([]Claim, len(got))
	for i, g := range got {
		out[i] = g.c
		if g.c.TakenOver {
			s.takeovers.Add(1)
		}
	}
	s.claims.Add(uint64(len(out)))
	return out, nil
}

// Renew extends, to now+Lease, the lease of every claim whose row still
// carries its fence and owner with a live lease, and returns the claims
// that were not extended (lost: expired, taken over, or finished). One
// statement; rows are updated in sorted key order.
func (s *Store) Renew(ctx context.Context, claims []Claim) (lost []Claim, err error) {
	if len(claims) == 0 {
		return nil, nil
	}
	sorted := slices.Clone(claims)
	slices.SortFunc(sorted, func(a, b Claim) int { return strings.Compare(a.Key, b.Key) })
	keys := make([]string, len(sorted))
	fences := make([]int64, len(sorted))
	owners := make([]string, len(sorted))
	for i, c := range sorted {
		if c.Queue != s.cfg.Queue {
			return nil, fmt.Errorf("relaywork: renew: claim of queue %q given to the store of %q", c.Queue, s.cfg.Queue)
		}
		keys[i], fences[i], owners[i] = c.Key, c.Fence, c.Owner
	}
	rows, err := s.pool.Query(ctx, stmts["Renew"], s.now(), s.cfg.Queue, keys, fences, owners, micros(s.cfg.Lease))
	if err != nil {
		return nil, fmt.Errorf("relaywork: renew %d leases in %q: %w", len(claims), s.cfg.Queue, err)
	}
	type held struct {
		key   string
		fence int64
	}
	kept := map[held]bool{}
	for rows.Next() {
		var h held
		if err := rows.Scan(&h.key, &h.fence); err != nil {
			rows.Close()
			return nil, fmt.Errorf("relaywork: renew in %q: scan: %w", s.cfg.Queue, err)
		}
		kept[h] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("relaywork: renew in %q: %w", s.cfg.Queue, err)
	}
	for _, c := range claims {
		if !kept[held{c.Key, c.Fence}] {
			lost = append(lost, c)
		}
	}
	return lost, nil
}

// Lock must be the first statement of every transaction that commits side
// effects for claim c: it locks c's row (so no one can take it over until tx
// ends) and checks that it still carries c's fence and owner, is processing
// and its lease has not expired. Otherwise it returns an error wrapping
// ErrFenced, and the caller must roll back: this is how a stale holder is
// refused.
func (s *Store) Lock(ctx context.Context, tx pgx.Tx, c Claim) error {
	var fence int64
	var owner, state string
	var live bool
	err := tx.QueryRow(ctx, stmts["Lock"], s.now(), c.Queue, c.Key).Scan(&fence, &owner, &state, &live)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return s.fencedErr(c, "row gone")
	case err != nil:
		return fmt.Errorf("relaywork: lock %s: %w", c.Key, err)
	case fence != c.Fence:
		return s.fencedErr(c, fmt.Sprintf("fence %d, claim has %d", fence, c.Fence))
	case owner != c.Owner || State(state) != StateProcessing:
		return s.fencedErr(c, "state "+state)
	case !live:
		return s.fencedErr(c, "lease expired")
	}
	return nil
}

// LockMany is Lock for several claims of this store's queue in one
// statement, rows locked in key order: it returns the claims still held and
// those fenced (each counted as Lock counts them). A transaction that
// continues with the held ones must leave the fenced ones alone.
func (s *Store) LockMany(ctx context.Context, tx pgx.Tx, claims []Claim) (held, fenced []Claim, err error) {
	if len(claims) == 0 {
		return nil, nil, nil
	}
	byKey := make(map[string]Claim, len(claims))
	keys := make([]string, 0, len(claims))
	for _, c := range claims {
		if c.Queue != s.cfg.Queue {
			return nil, nil, fmt.Errorf("relaywork: lock: claim of queue %s on a store of %s", c.Queue, s.cfg.Queue)
		}
		if _, dup := byKey[c.Key]; !dup {
			keys = append(keys, c.Key)
		}
		byKey[c.Key] = c
	}
	slices.Sort(keys)
	rows, err := tx.Query(ctx, stmts["LockMany"], s.now(), s.cfg.Queue, keys)
	if err != nil {
		return nil, nil, fmt.Errorf("relaywork: lock %d keys: %w", len(keys), err)
	}
	ok := make(map[string]bool, len(keys))
	for rows.Next() {
		var key, owner, state string
		var fence int64
		var live bool
		if err := rows.Scan(&key, &fence, &owner, &state, &live); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("relaywork: lock %d keys: %w", len(keys), err)
		}
		c := byKey[key]
		ok[key] = fence == c.Fence && owner == c.Owner && State(state) == StateProcessing && live
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("relaywork: lock %d keys: %w", len(keys), err)
	}
	for _, k := range keys {
		if ok[k] {
			held = append(held, byKey[k])
		} else {
			s.fenced.Add(1)
			fenced = append(fenced, byKey[k])
		}
	}
	return held, fenced, nil
}

// DoneMany is Done for several claims, each with its wake-up time (wake[i]
// for claims[i]; zero: none), in one statement. It returns an error wrapping
// ErrFenced when a claim no longer carries its fence and owner (call it after
// LockMany, with the held claims only).
func (s *Store) DoneMany(ctx context.Context, tx pgx.Tx, claims []Claim, wake []time.Time) error {
	if len(claims) == 0 {
		return nil
	}
	if len(wake) != len(claims) {
		return fmt.Errorf("relaywork: done: %d wake-up times for %d claims", len(wake), len(claims))
	}
	keys, owners := make([]string, len(claims)), make([]string, len(claims))
	fences, revs := make([]int64, len(claims)), make([]int64, len(claims))
	wakes := make([]*time.Time, len(claims))
	for i, c := range claims {
		keys[i], fences[i], owners[i], revs[i], wakes[i] = c.Key, c.Fence, c.Owner, c.Revision, optTime(wake[i])
	}
	rows, err := tx.Query(ctx, stmts["DoneMany"], s.now(), s.cfg.Queue, keys, fences, owners, revs, wakes)
	if err != nil {
		return fmt.Errorf("relaywork: done %d claims: %w", len(claims), err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("relaywork: done %d claims: %w", len(claims), err)
	}
	if len(done) != len(claims) {
		s.fenced.Add(uint64(len(claims) - len(done)))
		return fmt.Errorf("%w: %d of %d claims of %s no longer held", ErrFenced, len(claims)-len(done), len(claims), s.cfg.Queue)
	}
	return nil
}

func (s *Store) fencedErr(c Claim, why string) error {
	s.fenced.Add(1)
	return fmt.Errorf("%w: %s/%s (%s)", ErrFenced, c.Queue, c.Key, why)
}

// Done finishes claim c in the caller's transaction tx, after Lock: the row
// records processed_revision = c.Revision and becomes pending when its
// revision moved past c.Revision while c ran (new facts: it is claimed
// again), else idle with the wake-up time wakeAt (zero: none). The lease is
// cleared, attempts reset and last_error cleared. It returns an error
// wrapping ErrFenced when the row no longer carries c's fence and owner.
func (s *Store) Done(ctx context.Context, tx pgx.Tx, c Claim, wakeAt time.Time) error {
	var state string
	err := tx.QueryRow(ctx, stmts["Done"], s.now(), c.Queue, c.Key, c.Fence, c.Owner, c.Revision, optTime(wakeAt)).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.fencedErr(c, "done")
	}
	if err != nil {
		return fmt.Errorf("relaywork: done %s: %w", c.Key, err)
	}
	return nil
}

// Fail records a failed attempt of claim c in its own transaction: attempts+1
// and retry_wait until now+Backoff(attempts), or needs_review when attempts
// reaches MaxAttempts; last_error is the cause's text, sanitised (control
// characters replaced) and bounded to MaxErrorText characters. The lease is
// cleared. It returns an error wrapping ErrFenced when the row no longer
// carries c's fence and owner (someone else holds it: nothing is recorded).
func (s *Store) Fail(ctx context.Context, c Claim, cause error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("relaywork: fail %s: begin: %w", c.Key, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var fence int64
	var owner, state string
	var attempts int32
	err = tx.QueryRow(ctx, stmts["FailLock"], c.Queue, c.Key).Scan(&fence, &owner, &state, &attempts)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return s.fencedErr(c, "row gone")
	case err != nil:
		return fmt.Errorf("relaywork: fail %s: %w", c.Key, err)
	case fence != c.Fence || owner != c.Owner || State(state) != StateProcessing:
		return s.fencedErr(c, "fail")
	}
	n := int(attempts) + 1
	next, backoff := StateRetryWait, new(int64)
	*backoff = micros(s.cfg.Backoff(n))
	if n >= s.cfg.MaxAttempts {
		next, backoff = StateNeedsReview, nil
	}
	text := "unknown error"
	if cause != nil {
		text = cause.Error()
	}
	if _, err := tx.Exec(ctx, stmts["Fail"], s.now(), c.Queue, c.Key, c.Fence, string(next), n, backoff, cleanText(text)); err != nil {
		return fmt.Errorf("relaywork: fail %s: %w", c.Key, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("relaywork: fail %s: commit: %w", c.Key, err)
	}
	s.failures.Add(1)
	return nil
}

// Review moves claim c's row to needs_review in the caller's transaction tx
// (after Lock): the domain decided a person must look at the case. reason
// is stored as last_error (sanitised, bounded; never put a payload in it).
// A Bump does not re-arm the row; Rearm does. It returns an error wrapping
// ErrFenced when the row no longer carries c's fence and owner.
func (s *Store) Review(ctx context.Context, tx pgx.Tx, c Claim, reason string) error {
	tag, err := tx.Exec(ctx, stmts["Review"], s.now(), c.Queue, c.Key, c.Fence, c.Owner, cleanText(reason))
	if err != nil {
		return fmt.Errorf("relaywork: review %s: %w", c.Key, err)
	}
	if tag.RowsAffected() == 0 {
		return s.fencedErr(c, "review")
	}
	return nil
}

// Rearm is the operator's action on a row in needs_review: it becomes
// pending with attempts 0 (last_error is kept until the next Done). It
// returns an error wrapping relaytype.ErrNotFound when the key has no row in
// needs_review.
func (s *Store) Rearm(ctx context.Context, key string) error {
	tag, err := s.pool.Exec(ctx, stmts["Rearm"], s.now(), s.cfg.Queue, key)
	if err != nil {
		return fmt.Errorf("relaywork: rearm %s: %w", key, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("relaywork: rearm %s/%s: no row in needs_review: %w", s.cfg.Queue, key, relaytype.ErrNotFound)
	}
	return nil
}

// Release hands every row owner holds back (pending, lease cleared), so that
// another instance claims them at once instead of waiting for the leases to
// expire; for a graceful shutdown, after the owner's handlers returned. It
// returns how many rows it released.
func (s *Store) Release(ctx context.Context, owner string) (int, error) {
	tag, err := s.pool.Exec(ctx, stmts["Release"], s.now(), s.cfg.Queue, owner)
	if err != nil {
		return 0, fmt.Errorf("relaywork: release rows of %q in %q: %w", owner, s.cfg.Queue, err)
	}
	return int(tag.RowsAffected()), nil
}

// Row is a work row as stored (zero times stand for NULL).
type Row struct {
	Queue, Key        string
	Revision          int64
	ProcessedRevision int64
	State             State
	LeaseOwner        string
	LeaseUntil        time.Time
	Fence             int64
	Attempts          int
	NextAttemptAt     time.Time
	LastError         string
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// Get returns the row of key, or an error wrapping relaytype.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (Row, error) {
	r := Row{Queue: s.cfg.Queue}
	var state string
	var attempts int32
	var leaseUntil, next *time.Time
	err := s.pool.QueryRow(ctx, stmts["Get"], s.cfg.Queue, key).Scan(&r.Key, &r.Revision, &r.ProcessedRevision,
		&state, &r.LeaseOwner, &leaseUntil, &r.Fence, &attempts, &next, &r.LastError, &r.CreatedAt, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("relaywork: %s/%s: %w", s.cfg.Queue, key, relaytype.ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("relaywork: get %s: %w", key, err)
	}
	r.State, r.Attempts = State(state), int(attempts)
	if leaseUntil != nil {
		r.LeaseUntil = leaseUntil.UTC()
	}
	if next != nil {
		r.NextAttemptAt = next.UTC()
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

// Stats is a snapshot of one queue.
type Stats struct {
	// Counts has the number of rows per state (every state present, zeros included).
	Counts map[State]int
	// OldestPendingSince is the earliest time a pending row became pending
	// (its updated_at); zero when none is pending.
	OldestPendingSince time.Time
	// OldestRetryDue is the earliest next_attempt_at of the rows in
	// retry_wait (in the past when a retry is overdue); zero when none.
	OldestRetryDue time.Time
}

// NeedsReview is Counts[StateNeedsReview].
func (st Stats) NeedsReview() int { return st.Counts[StateNeedsReview] }

// Stats counts the queue's rows per state and reports the oldest pending
// and retry_wait times (see Stats). One aggregate over the queue's rows.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Counts: make(map[State]int, len(States))}
	for _, state := range States {
		st.Counts[state] = 0
	}
	rows, err := s.pool.Query(ctx, stmts["Stats"], s.cfg.Queue)
	if err != nil {
		return st, fmt.Errorf("relaywork: stats of %q: %w", s.cfg.Queue, err)
	}
	for rows.Next() {
		var state string
		var n int64
		var minUpdated, minNext *time.Time
		if err := rows.Scan(&state, &n, &minUpdated, &minNext); err != nil {
			rows.Close()
			return st, fmt.Errorf("relaywork: stats of %q: scan: %w", s.cfg.Queue, err)
		}
		st.Counts[State(state)] = int(n)
		switch State(state) {
		case StatePending:
			if minUpdated != nil {
				st.OldestPendingSince = minUpdated.UTC()
			}
		case StateRetryWait:
			if minNext != nil {
				st.OldestRetryDue = minNext.UTC()
			}
		}
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("relaywork: stats of %q: %w", s.cfg.Queue, err)
	}
	return st, nil
}

// cleanText replaces control characters (newlines included) with spaces and
// bounds the text to MaxErrorText characters, so last_error is one short
// line. Callers must still keep payloads out of error text.
func cleanText(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
	// BoundText counts bytes: MaxErrorText bytes are at most MaxErrorText characters.
	return relaytype.BoundText(s, MaxErrorText)
}
