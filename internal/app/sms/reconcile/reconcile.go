package reconcile

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/sqlfile"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("reconcile/queries.sql", queriesSQL,
	"TableExists", "MessageStates", "Unfinished", "EngineWithoutRow", "RowWithoutEngine", "EngineMessages",
	"FirstAttempts", "StrayAttempts", "DuplicateIDs", "DuplicateClientIDs", "DuplicateEngineIdentities",
	"SubmitsWithGateway", "Submits", "RetryLinks", "Successors", "EngineStates", "OutboxStates", "WorkStates",
	"QueuedAttempts", "ParkedOpen", "AccountSums", "StrayEntries", "RefundsWithoutCharge", "Settlements",
	"DuplicateKeys", "IdleInTransaction", "LockWaits", "Connections")

// Defaults of Options.
const (
	// MaxConnectionsDefault is the connection budget of the database.
	MaxConnectionsDefault = 100
	// IdleInTransactionDefault is how long a session may sit idle inside a
	// transaction before it counts as a problem.
	IdleInTransactionDefault = time.Second
	// ExamplesDefault is how many example ids a failure names.
	ExamplesDefault = 3
)

// StreamsDefault are the Redis streams between the stages: the gateway's
// commands, its submit results and the suppliers' reports.
var StreamsDefault = []string{"sms:submit", "sms:result", "sms:report"}

// Options are Run's options. The zero value checks a drained chain without
// Redis and without supplier records.
type Options struct {
	// InFlight allows work under way (messages accepted or admitted, rows
	// pending in the engine, outbox or completion work, stream entries
	// pending): it is reported as "in flight" instead of failing. Use it to
	// look at a running chain; after a drain leave it off.
	InFlight bool
	// Strict makes reports parked unmatched (a status report whose submit
	// was never found) a failure; otherwise they are only counted.
	Strict bool
	// SupplierRecords are the supplier simulator's record files (one per
	// simulator process). None: the supplier-side rules are not checked.
	SupplierRecords []string
	// Redis holds Streams. nil: the streams are not checked.
	Redis redis.UniversalClient
	// Streams whose consumer groups must have nothing pending and no lag;
	// default StreamsDefault.
	Streams []string
	// MaxConnections is the connection budget of the database
	// (MaxConnectionsDefault).
	MaxConnections int
	// IdleInTransaction is IdleInTransactionDefault when 0.
	IdleInTransaction time.Duration
	// ApplicationName, when set, limits the health check to sessions whose
	// application_name is this name or starts with it and a "/" (the send
	// chain names each role's pool "<name>/<role>"; tests share a database
	// with other tests); empty: every session of the database.
	ApplicationName string
	// Examples is ExamplesDefault when 0.
	Examples int
}

// run is one reconciliation.
type run struct {
	ctx  context.Context
	db   *pgxpool.Pool
	opts Options
}

// Run makes the six checks against pool's database (the sms tables of
// migration 003 are required; the gateway's and the completion work's tables
// are checked when present) and, per opts, Redis and the supplier records.
// It returns an error only when something could not be read; broken rules
// are in the Report. ctx bounds every read.
func Run(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Report, error) {
	if pool == nil {
		return nil, errors.New("reconcile: pool is nil")
	}
	if opts.MaxConnections < 0 || opts.IdleInTransaction < 0 || opts.Examples < 0 {
		return nil, errors.New("reconcile: Options.MaxConnections, IdleInTransaction and Examples must not be negative")
	}
	opts.MaxConnections = cmp.Or(opts.MaxConnections, MaxConnectionsDefault)
	opts.IdleInTransaction = cmp.Or(opts.IdleInTransaction, IdleInTransactionDefault)
	opts.Examples = cmp.Or(opts.Examples, ExamplesDefault)
	if len(opts.Streams) == 0 {
		opts.Streams = StreamsDefault
	}
	r := &run{ctx: ctx, db: pool, opts: opts}
	for _, t := range []string{"sms_message", "sms_attempt", "sms_ledger", "relay_message", "relay_outbox"} {
		ok, err := r.tableExists(t)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("reconcile: table %s is missing: not a migrated send-chain database (migration line sms up to 003 and the engine's)", t)
		}
	}
	rep := &Report{}
	for _, step := range []struct {
		name string
		f    func(*Check) error
	}{
		{CheckLost, r.lost}, {CheckUnique, r.unique}, {CheckSubmits, r.submits},
		{CheckDrained, r.drained}, {CheckLedger, r.ledger}, {CheckHealth, r.health},
	} {
		c := &Check{Name: step.name}
		if err := step.f(c); err != nil {
			return nil, fmt.Errorf("reconcile: %s: %w", step.name, err)
		}
		c.finish()
		rep.Checks = append(rep.Checks, c)
	}
	return rep, nil
}

func (r *run) tableExists(name string) (bool, error) {
	var ok bool
	err := r.db.QueryRow(r.ctx, stmts["TableExists"], name).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("reconcile: look for table %s: %w", name, err)
	}
	return ok, nil
}

// countIDs runs a query returning (count, example ids).
func (r *run) countIDs(query string, args ...any) (int64, []string, error) {
	var n int64
	var ex []int64
	if err := r.db.QueryRow(r.ctx, stmts[query], append([]any{r.opts.Examples}, args...)...).Scan(&n, &ex); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", query, err)
	}
	return n, ids(ex), nil
}

// countKeys runs a query returning (count, example keys).
func (r *run) countKeys(query string) (int64, []string, error) {
	var n int64
	var ex []string
	if err := r.db.QueryRow(r.ctx, stmts[query], r.opts.Examples).Scan(&n, &ex); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", query, err)
	}
	return n, ex, nil
}

// lost: every accepted message reached a final state ('refused' or
// 'completed'); the engine's sms-admit messages and the sms_message rows
// match one to one; every admitted or completed message has exactly one
// attempt 1 per recipient and no attempt elsewhere.
func (r *run) lost(c *Check) error {
	rows, err := r.db.Query(r.ctx, stmts["MessageStates"])
	if err != nil {
		return err
	}
	states := map[string]int64{}
	var total int64
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			rows.Close()
			return err
		}
		states[s], total = n, total+n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	parts := make([]string, 0, len(states))
	for _, s := range slices.Sorted(maps.Keys(states)) {
		parts = append(parts, fmt.Sprintf("%s %d", s, states[s]))
	}
	c.figure("messages: %d (%s)", total, strings.Join(parts, ", "))
	n, ex, err := r.countIDs("Unfinished")
	if err != nil {
		return err
	}
	if n > 0 {
		c.unfinished(r.opts.InFlight, ex, "%d messages not refused or completed (accepted %d, admitted %d)",
			n, states["accepted"], states["admitted"])
	}

	var engine int64
	if err := r.db.QueryRow(r.ctx, stmts["EngineMessages"]).Scan(&engine); err != nil {
		return err
	}
	noRow, exNoRow, err := r.countIDs("EngineWithoutRow")
	if err != nil {
		return err
	}
	noEngine, exNoEngine, err := r.countIDs("RowWithoutEngine")
	if err != nil {
		return err
	}
	c.figure("engine queue sms-admit: %d messages; %d without an sms_message row, %d rows without an engine message",
		engine, noRow, noEngine)
	if noRow > 0 {
		c.fail(exNoRow, "%d engine messages of sms-admit have no sms_message row", noRow)
	}
	if noEngine > 0 {
		c.fail(exNoEngine, "%d sms_message rows have no engine message in sms-admit", noEngine)
	}

	var recipients, bad int64
	var ex1 []int64
	if err := r.db.QueryRow(r.ctx, stmts["FirstAttempts"], r.opts.Examples).Scan(&recipients, &bad, &ex1); err != nil {
		return fmt.Errorf("FirstAttempts: %w", err)
	}
	c.figure("recipients of admitted/completed messages: %d, %d without exactly one attempt 1", recipients, bad)
	if bad > 0 {
		c.fail(ids(ex1), "%d recipients have no attempt 1 or more than one", bad)
	}
	stray, exStray, err := r.countIDs("StrayAttempts")
	if err != nil {
		return err
	}
	if stray > 0 {
		c.fail(exStray, "%d attempts belong to a message never admitted or to a recipient it does not have", stray)
	}
	return nil
}

// unique: the message id and (app, client_msg_id) are unique. The schema's
// constraints promise it; the count shows it.
func (r *run) unique(c *Check) error {
	dupIDs, exIDs, err := r.countIDs("DuplicateIDs")
	if err != nil {
		return err
	}
	dupClient, exClient, err := r.countIDs("DuplicateClientIDs")
	if err != nil {
		return err
	}
	var dupIdentity int64
	if err := r.db.QueryRow(r.ctx, stmts["DuplicateEngineIdentities"]).Scan(&dupIdentity); err != nil {
		return err
	}
	c.figure("message ids used twice: %d; client_msg_id used twice in one app: %d; engine identities used twice: %d",
		dupIDs, dupClient, dupIdentity)
	if dupIDs > 0 {
		c.fail(exIDs, "%d message ids appear more than once", dupIDs)
	}
	if dupClient > 0 {
		c.fail(exClient, "%d (app, client_msg_id) pairs appear more than once", dupClient)
	}
	if dupIdentity > 0 {
		c.fail(nil, "%d engine identities of sms-admit appear more than once", dupIdentity)
	}
	return nil
}

// submit is one sms_submit row with its gateway state ("" without one).
type submit struct {
	message int64
	state   string
}

// submits: the supplier accepted every submitId at most once (in all record
// files together), every submit the gateway settled ACCEPTED is in the
// records exactly once and nothing the chain never wrote is; every retry is
// linked to the failed attempt it retries, and an attempt has at most one
// successor.
func (r *run) submits(c *Check) error {
	gw, err := r.tableExists("gateway_submit")
	if err != nil {
		return err
	}
	query := "Submits"
	if gw {
		query = "SubmitsWithGateway"
	}
	rows, err := r.db.Query(r.ctx, stmts[query])
	if err != nil {
		return err
	}
	subs := map[int64]submit{}
	byState := map[string]int{}
	for rows.Next() {
		var id int64
		var s submit
		if err := rows.Scan(&id, &s.message, &s.state); err != nil {
			rows.Close()
			return err
		}
		subs[id] = s
		byState[s.state]++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if gw {
		c.figure("submits: %d (gateway: accepted %d, rejected %d, unknown %d, not sent %d, claimed %d, no row %d)",
			len(subs), byState["ACCEPTED"], byState["REJECTED"], byState["UNKNOWN"], byState["NOT_SENT"],
			byState["CLAIMED"], byState[""])
	} else {
		c.figure("submits: %d; not applicable: no gateway_submit table in this database, gateway states not compared", len(subs))
	}

	if len(r.opts.SupplierRecords) == 0 {
		c.figure("not checked: supplier-side counts (no supplier record file given)")
	} else if err := r.records(c, subs, gw); err != nil {
		return err
	}

	var retries, bad int64
	var ex []int64
	if err := r.db.QueryRow(r.ctx, stmts["RetryLinks"], r.opts.Examples).Scan(&retries, &bad, &ex); err != nil {
		return fmt.Errorf("RetryLinks: %w", err)
	}
	succ, exSucc, err := r.countIDs("Successors")
	if err != nil {
		return err
	}
	c.figure("retries: %d; badly linked: %d; attempts with more than one successor: %d", retries, bad, succ)
	if bad > 0 {
		c.fail(ids(ex), "%d attempts are not linked to a failed attempt of the same message and recipient numbered one less (attempt ids)", bad)
	}
	if succ > 0 {
		c.fail(exSucc, "%d attempts have more than one retry (attempt ids)", succ)
	}
	return nil
}

// records reads the supplier record files and compares them with subs.
func (r *run) records(c *Check, subs map[int64]submit, gw bool) error {
	byKey := map[string]int{}
	var entries, untagged, torn int
	var dupInFile []string
	for _, path := range r.opts.SupplierRecords {
		rec, err := supplier.ReadRecord(path)
		if err != nil {
			return err
		}
		if rec.TornTail {
			torn++
		}
		counts := rec.Counts()
		entries += counts.Submits
		untagged += counts.ByKey[""]
		for _, d := range counts.Duplicates() {
			dupInFile = append(dupInFile, d.Key)
		}
		for k, n := range counts.ByKey {
			if k != "" {
				byKey[k] += n
			}
		}
	}
	var twice, unknownKey []string
	var nTwice, nUnknown int
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		if byKey[k] > 1 {
			nTwice++
			if len(twice) < r.opts.Examples {
				twice = append(twice, k)
			}
		}
		id, err := strconv.ParseInt(k, 10, 64)
		if _, ok := subs[id]; err != nil || !ok {
			nUnknown++
			if len(unknownKey) < r.opts.Examples {
				unknownKey = append(unknownKey, k)
			}
		}
	}
	c.figure("supplier records: %d files, %d accepted submits, %d distinct submitIds, %d accepted more than once (%d within one file), %d untagged, %d files with a torn last line",
		len(r.opts.SupplierRecords), entries, len(byKey), nTwice, len(dupInFile), untagged, torn)
	if nTwice > 0 {
		c.fail(twice, "%d submitIds were accepted by a supplier more than once (submitIds)", nTwice)
	}
	if untagged > 0 {
		c.fail(nil, "%d supplier submits carry no submitId: they cannot be matched to the chain", untagged)
	}
	if nUnknown > 0 {
		c.fail(unknownKey, "%d submitIds accepted by a supplier have no sms_submit row (submitIds)", nUnknown)
	}
	if !gw {
		return nil
	}
	var missing, rejected []string
	var nMissing, nRejected int
	for _, id := range slices.Sorted(maps.Keys(subs)) {
		s := subs[id]
		k := byKey[strconv.FormatInt(id, 10)]
		switch {
		case s.state == "ACCEPTED" && k == 0:
			nMissing++
			if len(missing) < r.opts.Examples {
				missing = append(missing, strconv.FormatInt(id, 10))
			}
		case s.state == "REJECTED" && k > 0:
			nRejected++
			if len(rejected) < r.opts.Examples {
				rejected = append(rejected, strconv.FormatInt(id, 10))
			}
		}
	}
	if nMissing > 0 {
		c.fail(missing, "%d submits settled ACCEPTED by the gateway are in no supplier record (submitIds)", nMissing)
	}
	if nRejected > 0 {
		c.fail(rejected, "%d submits settled REJECTED by the gateway were accepted by a supplier (submitIds)", nRejected)
	}
	return nil
}

// drained: nothing left in the engine's sms queues, the outbox, the
// completion work or the streams; decided attempts only; parked reports
// counted.
func (r *run) drained(c *Check) error {
	in := r.opts.InFlight

	rows, err := r.db.Query(r.ctx, stmts["EngineStates"])
	if err != nil {
		return err
	}
	type qs struct{ total, open, dead int64 }
	queues := map[string]*qs{}
	for rows.Next() {
		var q, s string
		var n int64
		if err := rows.Scan(&q, &s, &n); err != nil {
			rows.Close()
			return err
		}
		if queues[q] == nil {
			queues[q] = &qs{}
		}
		queues[q].total += n
		switch s {
		case "PENDING", "FAILED":
			queues[q].open += n
		case "DEAD":
			queues[q].dead += n
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(queues) == 0 {
		c.figure("engine queues sms-*: no messages")
	}
	for _, q := range slices.Sorted(maps.Keys(queues)) {
		s := queues[q]
		c.figure("engine queue %s: %d messages, %d not terminal, %d dead", q, s.total, s.open, s.dead)
		if s.open > 0 {
			c.unfinished(in, nil, "%d engine messages of %s not terminal (pending or failed)", s.open, q)
		}
		if s.dead > 0 {
			c.fail(nil, "%d engine messages of %s are dead", s.dead, q)
		}
	}

	rows, err = r.db.Query(r.ctx, stmts["OutboxStates"])
	if err != nil {
		return err
	}
	type ts struct{ total, pending, dead int64 }
	targets := map[string]*ts{}
	for rows.Next() {
		var t, s string
		var n int64
		if err := rows.Scan(&t, &s, &n); err != nil {
			rows.Close()
			return err
		}
		if targets[t] == nil {
			targets[t] = &ts{}
		}
		targets[t].total += n
		switch s {
		case "PENDING":
			targets[t].pending += n
		case "DEAD":
			targets[t].dead += n
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(targets) == 0 {
		c.figure("outbox targets sms-*: no events")
	}
	for _, t := range slices.Sorted(maps.Keys(targets)) {
		s := targets[t]
		c.figure("outbox %s: %d events, %d pending, %d dead", t, s.total, s.pending, s.dead)
		if s.pending > 0 {
			c.unfinished(in, nil, "%d outbox events of %s not sent", s.pending, t)
		}
		if s.dead > 0 {
			c.fail(nil, "%d outbox events of %s are dead (never sent)", s.dead, t)
		}
	}

	if err := r.work(c); err != nil {
		return err
	}

	queued, exQueued, err := r.countIDs("QueuedAttempts")
	if err != nil {
		return err
	}
	c.figure("attempts not decided: %d", queued)
	if queued > 0 {
		c.unfinished(in, exQueued, "%d attempts still queued (attempt ids)", queued)
	}

	var parked, open int64
	if err := r.db.QueryRow(r.ctx, stmts["ParkedOpen"]).Scan(&parked, &open); err != nil {
		return err
	}
	c.figure("parked reports: %d, %d never matched", parked, open)
	if open > 0 && r.opts.Strict {
		c.fail(nil, "%d status reports parked and never matched to a submit (strict)", open)
	}

	if r.opts.Redis == nil {
		c.figure("not checked: Redis streams (no Redis client given)")
		return nil
	}
	for _, s := range r.opts.Streams {
		if err := r.stream(c, s); err != nil {
			return err
		}
	}
	return nil
}

// work checks the completion's work records, when their table exists.
func (r *run) work(c *Check) error {
	ok, err := r.tableExists("relay_work")
	if err != nil {
		return err
	}
	if !ok {
		c.figure("not applicable: completion work (no relay_work table in this database)")
		return nil
	}
	rows, err := r.db.Query(r.ctx, stmts["WorkStates"], r.opts.Examples)
	if err != nil {
		return err
	}
	type ws struct {
		n, unprocessed int64
		keys           []string
	}
	states := map[string]ws{}
	var total int64
	for rows.Next() {
		var s string
		var w ws
		if err := rows.Scan(&s, &w.n, &w.unprocessed, &w.keys); err != nil {
			rows.Close()
			return err
		}
		states[s], total = w, total+w.n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	c.figure("completion work sms-completion: %d records (idle %d, pending %d, processing %d, retry_wait %d, needs_review %d), %d idle with unprocessed facts",
		total, states["idle"].n, states["pending"].n, states["processing"].n, states["retry_wait"].n,
		states["needs_review"].n, states["idle"].unprocessed)
	if open := states["pending"].n + states["processing"].n + states["retry_wait"].n; open > 0 {
		var ex []string
		for _, s := range []string{"pending", "processing", "retry_wait"} {
			ex = append(ex, states[s].keys...)
		}
		c.unfinished(r.opts.InFlight, ex[:min(len(ex), r.opts.Examples)], "%d completion work records not idle", open)
	}
	if n := states["needs_review"].n; n > 0 {
		c.fail(states["needs_review"].keys, "%d completion work records need review", n)
	}
	return nil
}

// stream checks every consumer group of one stream: nothing pending, no
// lag (entries not yet delivered to the group).
func (r *run) stream(c *Check, stream string) error {
	groups, err := r.opts.Redis.XInfoGroups(r.ctx, stream).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			c.figure("stream %s: absent", stream)
			return nil
		}
		return fmt.Errorf("XINFO GROUPS %s: %w", stream, err)
	}
	if len(groups) == 0 {
		c.figure("stream %s: no consumer group", stream)
	}
	for _, g := range groups {
		lag := g.Lag
		if lag < 0 { // unknown to Redis (entries deleted): count what follows the last delivered id
			msgs, err := r.opts.Redis.XRangeN(r.ctx, stream, "("+g.LastDeliveredID, "+", 1<<20).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return fmt.Errorf("XRANGE %s: %w", stream, err)
			}
			lag = int64(len(msgs))
		}
		c.figure("stream %s group %s: %d pending, lag %d", stream, g.Name, g.Pending, lag)
		if g.Pending > 0 {
			c.unfinished(r.opts.InFlight, nil, "stream %s group %s: %d entries delivered and not acknowledged", stream, g.Name, g.Pending)
		}
		if lag > 0 {
			c.unfinished(r.opts.InFlight, nil, "stream %s group %s: %d entries not yet read", stream, g.Name, lag)
		}
	}
	return nil
}

// account is one account's row and ledger sums.
type account struct {
	id, balance, frozen, topup, freeze, charge, release, refund, open int64
}

// ledger: per account, the freezes are settled or still open, and the
// account row is the sum of its entries; refunds are linked to charges;
// per completed message, each recipient is settled once at its price and
// the freeze equals what was settled; no key twice.
func (r *run) ledger(c *Check) error {
	rows, err := r.db.Query(r.ctx, stmts["AccountSums"])
	if err != nil {
		return err
	}
	var accounts []account
	for rows.Next() {
		var a account
		if err := rows.Scan(&a.id, &a.balance, &a.frozen, &a.topup, &a.freeze, &a.charge, &a.release, &a.refund, &a.open); err != nil {
			rows.Close()
			return err
		}
		accounts = append(accounts, a)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var t account
	var badFreeze, badFrozen, badBalance []string
	for _, a := range accounts {
		t.topup, t.freeze, t.charge, t.release, t.refund, t.open = t.topup+a.topup, t.freeze+a.freeze,
			t.charge+a.charge, t.release+a.release, t.refund+a.refund, t.open+a.open
		id := strconv.FormatInt(a.id, 10)
		if a.freeze != a.charge+a.release+a.open {
			badFreeze = append(badFreeze, fmt.Sprintf("account %s: freezes %d ≠ charges %d + releases %d + open %d",
				id, a.freeze, a.charge, a.release, a.open))
		}
		if a.frozen != a.freeze-a.release-a.charge {
			badFrozen = append(badFrozen, fmt.Sprintf("account %s: frozen %d ≠ %d", id, a.frozen, a.freeze-a.release-a.charge))
		}
		if a.balance != a.topup+a.refund-a.charge {
			badBalance = append(badBalance, fmt.Sprintf("account %s: balance %d ≠ %d", id, a.balance, a.topup+a.refund-a.charge))
		}
	}
	c.figure("accounts: %d; li: topups %d, freezes %d, charges %d, releases %d, refunds %d, frozen for messages in flight %d",
		len(accounts), t.topup, t.freeze, t.charge, t.release, t.refund, t.open)
	if len(badFreeze) > 0 {
		c.fail(badFreeze[:min(len(badFreeze), r.opts.Examples)], "%d accounts: freezes ≠ charges + releases + frozen for messages in flight", len(badFreeze))
	}
	if len(badFrozen) > 0 {
		c.fail(badFrozen[:min(len(badFrozen), r.opts.Examples)], "%d accounts: frozen_li ≠ freezes − releases − charges", len(badFrozen))
	}
	if len(badBalance) > 0 {
		c.fail(badBalance[:min(len(badBalance), r.opts.Examples)], "%d accounts: balance_li ≠ topups + refunds − charges", len(badBalance))
	}

	stray, exStray, err := r.countIDs("StrayEntries")
	if err != nil {
		return err
	}
	if stray > 0 {
		c.fail(exStray, "%d freeze or settlement entries name no existing message and recipient (ledger ids)", stray)
	}
	unlinked, exUnlinked, err := r.countKeys("RefundsWithoutCharge")
	if err != nil {
		return err
	}
	if unlinked > 0 {
		c.fail(exUnlinked, "%d refunds have no charge of the same account and amount", unlinked)
	}
	var completed, bad int64
	var ex []int64
	if err := r.db.QueryRow(r.ctx, stmts["Settlements"], r.opts.Examples).Scan(&completed, &bad, &ex); err != nil {
		return fmt.Errorf("reconcile: settlements: %w", err)
	}
	dupKeys, exDup, err := r.countKeys("DuplicateKeys")
	if err != nil {
		return err
	}
	c.figure("completed messages: %d, %d settled wrongly; refunds without their charge: %d; entries naming no message: %d; keys used twice: %d",
		completed, bad, unlinked, stray, dupKeys)
	if bad > 0 {
		c.fail(ids(ex), "%d completed messages: a recipient not settled exactly once at segments × unit price as its outcome says, or the freeze ≠ what was settled (message ids)", bad)
	}
	if dupKeys > 0 {
		c.fail(exDup, "%d ledger keys appear more than once", dupKeys)
	}
	return nil
}

// health: no session idle in a transaction for long, none waiting on a
// lock, connections within the budget.
func (r *run) health(c *Check) error {
	app := r.opts.ApplicationName
	idle, exIdle, err := r.countIDs("IdleInTransaction", app, r.opts.IdleInTransaction.Seconds())
	if err != nil {
		return err
	}
	waits, exWaits, err := r.countIDs("LockWaits", app)
	if err != nil {
		return err
	}
	var conns int64
	if err := r.db.QueryRow(r.ctx, stmts["Connections"], app).Scan(&conns); err != nil {
		return err
	}
	scope := "the database"
	if app != "" {
		scope = "application_name " + app
	}
	c.figure("sessions of %s: %d connections (budget %d), %d idle in transaction over %s, %d waiting on a lock",
		scope, conns, r.opts.MaxConnections, idle, r.opts.IdleInTransaction, waits)
	if idle > 0 {
		c.fail(exIdle, "%d sessions idle in a transaction for more than %s (pids)", idle, r.opts.IdleInTransaction)
	}
	if waits > 0 {
		c.fail(exWaits, "%d sessions waiting on a lock (pids)", waits)
	}
	if conns > int64(r.opts.MaxConnections) {
		c.fail(nil, "%d connections, over the budget of %d", conns, r.opts.MaxConnections)
	}
	return nil
}
