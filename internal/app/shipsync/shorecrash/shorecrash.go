// Package shorecrash is the shipsync shore's crash harness: a real shore
// process (relay shipsync shore, with the applier) is killed with SIGKILL at
// random moments and at its fault points while a ship-side test client
// uploads a workload over mutual TLS and pulls receipts; then every event is
// reconciled from PostgreSQL, the shore database and the receipts the ship
// received.
package shorecrash

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/supervise"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

// Points are the fault points the shore passes: ingress after its commit
// and each step of the apply workflow.
var Points = []string{faultpoint.ShipsyncIngressAfterCommit, faultpoint.ShipsyncApplyAfterLock,
	faultpoint.ShipsyncApplyAfterTarget, faultpoint.ShipsyncApplyAfterRecorded, faultpoint.ShipsyncApplyBeforeCommit}

// Options configure a run.
type Options struct {
	// Binary is the relay executable the shore runs as. Required.
	Binary string
	// PostgresURL names a fresh schema (the run refuses one with events).
	// Required.
	PostgresURL string
	// MariaDB is the server DSN (user:pw@tcp(host:port)/); the run creates
	// and drops its own database there. Required.
	MariaDB string
	// Dir holds the PKI. Required.
	Dir string
	// Records, Steps, Streams, Batch shape the workload (default 300 records
	// of 6 events over 2 streams, batches of 40).
	Records, Steps, Streams, Batch int
	// Kills is how many times the shore is killed (default 12); every other
	// life is armed with the fault points at FaultProbability (default 0.2).
	Kills            int
	FaultProbability float64
	// Seed fixes the workload and the plan.
	Seed uint64
	// Out receives progress lines (nil: discarded).
	Out io.Writer
	// Timeout bounds the settling after the chaos (default 2 min).
	Timeout time.Duration
	// Keep leaves the shore database in place (its name is printed), for a
	// look after a failed run.
	Keep bool

	// noKills, in tests, runs without any kill (Kills 0 means the default).
	noKills bool
	// tamper, in tests, changes the stores before the reconciliation, to
	// show that it finds what is wrong.
	tamper func(ctx context.Context, d *relaypgx.Driver, target *sql.DB) error
}

func (o Options) withDefaults() Options {
	if o.Records == 0 {
		o.Records = 300
	}
	if o.Steps == 0 {
		o.Steps = 6
	}
	if o.Streams == 0 {
		o.Streams = 2
	}
	if o.Batch == 0 {
		o.Batch = 40
	}
	if o.Kills == 0 && !o.noKills {
		o.Kills = 12
	}
	if o.FaultProbability == 0 {
		o.FaultProbability = 0.2
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.Binary == "" || o.PostgresURL == "" || o.MariaDB == "" || o.Dir == "":
		return errors.New("shorecrash: Binary, PostgresURL, MariaDB and Dir are required")
	case o.Records < 1 || o.Steps < 1 || o.Streams < 1 || o.Batch < 1 || o.Batch > wire.MaxEventsDefault:
		return fmt.Errorf("shorecrash: records, steps, streams ≥ 1 and batch 1–%d", wire.MaxEventsDefault)
	case o.Kills < 0 || o.FaultProbability < 0 || o.FaultProbability > 1:
		return errors.New("shorecrash: kills ≥ 0 and fault probability in [0,1]")
	}
	return nil
}

// Result is what a run did and found.
type Result struct {
	Events, Applied, Conflicts, Rejected int
	Shore                                supervise.RoleStats
	Resends                              int
	Elapsed                              time.Duration
	Checks                               int
	Problems                             []string
	// Learnt counts the apply jobs by how their outcome was learnt (write,
	// job, ledger, target, head): the recoveries the kills forced.
	Learnt map[string]int
}

// OK reports a clean reconciliation.
func (r *Result) OK() bool { return len(r.Problems) == 0 }

// Write prints the result.
func (r *Result) Write(w io.Writer) {
	faults, pts := r.Shore.FaultDeaths()
	fmt.Fprintf(w, "events:    %d (%d applied, %d conflicts, %d rejected expected)\n", r.Events, r.Applied, r.Conflicts, r.Rejected)
	fmt.Fprintf(w, "kills:     %d SIGKILLs, %d deaths at fault points (%s); %d lives\n", r.Shore.Kills, faults,
		strings.Join(pts, ", "), r.Shore.Lives)
	fmt.Fprintf(w, "uploads:   %d batch resends\n", r.Resends)
	fmt.Fprintf(w, "outcomes:  learnt from the write %d, the head %d; recovered from TARGET_COMMITTED %d, the ledger %d, "+
		"the target row %d\n", r.Learnt["write"], r.Learnt["head"], r.Learnt["job"], r.Learnt["ledger"], r.Learnt["target"])
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM:   %s\n", p)
	}
	if r.OK() {
		fmt.Fprintf(w, "reconcile: ok (%d checks) in %s\n", r.Checks, r.Elapsed.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "reconcile: %d problems\n", len(r.Problems))
	}
}

// Run runs the harness. ctx bounds it; its end kills the shore.
func Run(ctx context.Context, o Options) (*Result, error) {
	began := time.Now()
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5b0e))
	tag := fmt.Sprintf("%012x", rand.Uint64()>>16) // not from Seed: reruns must not meet
	out := supervise.Printer(o.Out)

	d, err := relaypgx.Open(ctx, o.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("shorecrash: postgres %s: %w", dsn.Redact(o.PostgresURL), dsn.Scrub(err, o.PostgresURL))
	}
	defer d.Close()
	clock := relayclock.System{}
	if _, err := relaymigrate.Up(ctx, d, clock, shore.MigrationLines(d)...); err != nil {
		return nil, err
	}
	var used int
	if err := d.Pool().QueryRow(ctx, "SELECT count(*) FROM sync_inbox_event").Scan(&used); err != nil {
		return nil, fmt.Errorf("shorecrash: %w", err)
	}
	if used > 0 {
		return nil, fmt.Errorf("shorecrash: the schema already holds %d events: a run needs a fresh schema", used)
	}
	target, mdb, dropTarget, err := targetDB(ctx, o.MariaDB, tag)
	if err != nil {
		return nil, err
	}
	if o.Keep {
		out("shorecrash: shore database %s kept", target)
	} else {
		defer dropTarget()
	}
	defer mdb.Close()

	tc, err := setupPKI(ctx, d, o.Dir)
	if err != nil {
		return nil, err
	}
	addr, err := supervise.FreeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"shipsync", "shore", "--postgres", o.PostgresURL, "--target", target, "--addr", addr,
		"--tls-cert", filepath.Join(o.Dir, pki.ServerCertFile), "--tls-key", filepath.Join(o.Dir, pki.ServerKeyFile),
		"--client-ca", filepath.Join(o.Dir, pki.CACertFile), "--instance-id", "crash-shore",
		"--node-rate", "1000", "--node-concurrency", "12", "--log-level", "warn"}
	role := supervise.NewRole("shore", o.Binary, args, nil, Points, rng.Uint64(), out)
	if err := role.Start(); err != nil {
		return nil, err
	}
	defer role.Abort()

	codec, err := wire.NewCodec(wire.Config{})
	if err != nil {
		return nil, err
	}
	w := newWorkload(o.Records, o.Steps, o.Streams, tag, rng, time.Now())
	s := newShip("https://"+addr, tc, codec)
	res := &Result{Events: w.total}
	for _, p := range w.expected() {
		switch p.expect {
		case expectApplied:
			res.Applied++
		case expectConflict:
			res.Conflicts++
		case expectRejected:
			res.Rejected++
		}
	}
	out("shorecrash: %d events of %d records over %d streams; shore on %s; %d kills planned", w.total, o.Records,
		o.Streams, addr, o.Kills)

	runCtx, cancel := context.WithTimeout(ctx, o.Timeout+time.Duration(o.Kills)*2*time.Second)
	defer cancel()
	var up sync.WaitGroup
	for part, evs := range w.streams {
		up.Add(1)
		go func() {
			defer up.Done()
			s.upload(runCtx, tag, part, evs, o.Batch)
		}()
	}
	// The kill plan: a kill every 300–900 ms, every other life armed.
	for k := range o.Kills {
		select {
		case <-runCtx.Done():
			return nil, fmt.Errorf("shorecrash: %w", runCtx.Err())
		case <-time.After(time.Duration(300+rng.IntN(600)) * time.Millisecond):
		}
		arm := ""
		if k%2 == 0 {
			arm = role.ArmSpec(o.FaultProbability)
		}
		s.pull(runCtx)
		got := s.received()
		what, err := role.Kill(arm)
		if err != nil {
			return nil, err
		}
		out("  kill %2d: shore %s; %d/%d receipts before", k+1, what, got, w.total)
	}
	if role.Armed() {
		if _, err := role.Kill(""); err != nil {
			return nil, err
		}
	}
	up.Wait()
	for s.received() < w.total {
		if runCtx.Err() != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("only %d of %d receipts within the timeout", s.received(), w.total))
			break
		}
		s.pull(runCtx)
		select {
		case <-runCtx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The last life must be serving (its signal handling set up) before it
	// is asked to stop cleanly.
	for !s.ready(runCtx) && runCtx.Err() == nil {
		select {
		case <-runCtx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := role.Stop(30 * time.Second); err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	res.Shore = role.Stats()
	for _, e := range res.Shore.OwnExits {
		res.Problems = append(res.Problems, "the shore exited on its own: "+e)
	}
	resends, dupes, problems := s.stats()
	res.Resends = resends
	res.Problems = append(res.Problems, problems...)
	if dupes > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("the receipts feed served %d receipts twice", dupes))
	}
	if o.tamper != nil {
		if err := o.tamper(ctx, d, mdb); err != nil {
			return nil, err
		}
	}
	checks, problems, err := reconcile(ctx, d, mdb, w, s)
	if err != nil {
		return nil, err
	}
	res.Checks = checks
	res.Problems = append(res.Problems, problems...)
	res.Learnt = map[string]int{}
	rows, err := d.Pool().Query(ctx, "SELECT learnt_by, count(*) FROM sync_apply_job GROUP BY learnt_by")
	if err != nil {
		return nil, err
	}
	var by string
	var c int
	if _, err := pgx.ForEachRow(rows, []any{&by, &c}, func() error { res.Learnt[by] = c; return nil }); err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(began)
	return res, nil
}

// targetDB creates the run's shore database: the item table with the _sync
// columns, and write_log filled by triggers with every row write (the
// independent record of what happened on the target).
func targetDB(ctx context.Context, server, tag string) (target string, db *sql.DB, drop func(), err error) {
	target, drop, err = mysqldsn.CreateScratch(ctx, server, "relay_shorecrash_"+tag)
	if err != nil {
		return "", nil, nil, fmt.Errorf("shorecrash: mariadb: %w", err)
	}
	db, err = sql.Open("mysql", target)
	if err != nil {
		drop()
		return "", nil, nil, err
	}
	for _, q := range []string{
		"CREATE TABLE item (id BIGINT PRIMARY KEY, note VARCHAR(" + fmt.Sprint(noteMaxLen) + "), " + apply.SyncColumns + ")",
		"CREATE TABLE write_log (seq BIGINT AUTO_INCREMENT PRIMARY KEY, op CHAR(1) NOT NULL, " +
			"event_id CHAR(36) NULL, revision CHAR(36) NOT NULL)",
		"CREATE TRIGGER item_ai AFTER INSERT ON item FOR EACH ROW " +
			"INSERT INTO write_log (op, event_id, revision) VALUES ('i', NEW._sync_event_id, NEW._sync_revision)",
		"CREATE TRIGGER item_au AFTER UPDATE ON item FOR EACH ROW " +
			"INSERT INTO write_log (op, event_id, revision) VALUES ('u', NEW._sync_event_id, NEW._sync_revision)",
		"CREATE TRIGGER item_ad AFTER DELETE ON item FOR EACH ROW " +
			"INSERT INTO write_log (op, event_id, revision) VALUES ('d', NULL, OLD._sync_revision)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			_ = db.Close()
			drop()
			return "", nil, nil, fmt.Errorf("shorecrash: target schema: %w", err)
		}
	}
	return target, db, drop, nil
}

// setupPKI makes the PKI, registers the node with its rule and returns the
// node's TLS client config.
func setupPKI(ctx context.Context, d *relaypgx.Driver, dir string) (*tls.Config, error) {
	clock := relayclock.System{}
	p := pki.Dir{Path: dir, Clock: clock}
	if _, err := p.InitCA(); err != nil {
		return nil, err
	}
	if _, err := p.IssueServer([]string{"127.0.0.1", "localhost"}); err != nil {
		return nil, err
	}
	cert, err := p.IssueNode(node, "")
	if err != nil {
		return nil, err
	}
	reg := shore.NewRegistry(d.Pool(), clock)
	who := shore.Audit{Actor: "shorecrash", Reason: "crash harness"}
	if _, err := reg.Add(ctx, cert, who); err != nil {
		return nil, err
	}
	if err := reg.AllowRule(ctx, node, ruleID, 1, who); err != nil {
		return nil, err
	}
	if err := reg.RegisterRule(ctx, shore.Rule{ID: ruleID, Version: 1, SourceTable: table, TargetTable: table,
		KeyColumns: []string{"id"}, Columns: []string{"id", "note"}, InsertOverTombstone: true}, who); err != nil {
		return nil, err
	}
	return p.ClientTLS("node-" + node)
}
