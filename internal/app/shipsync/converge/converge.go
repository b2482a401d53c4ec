// Package converge runs shipsync both ways on this machine and checks that
// the two databases converge: a ship database and a shore database, each
// with the trigger capture, edited at once (the same rows on both sides,
// some with business times no policy can trust) while the link between
// the ship client and the shore flaps; the shore applies the ship's
// changes, forwards its own as commands, and arbitrates the conflicts; an
// operator decides what the policies leave to one. After quiescence both
// databases must hold the same rows, no change may have looped back, every
// conflict must be accounted for and every event and command must have
// exactly one terminal result.
//
// With Options.Chaos the same run is a crash harness (seed 004 §23.3): the
// shore (data API, applier, shore CDC consumer, arbiter) and the ship
// client (uplink and remote applier) run as processes of the relay binary
// and are killed with SIGKILL while both sides edit — at random moments and
// at the fault points of the downlink and the arbitration — and restarted;
// the last lives run clean, and the same quiescence and checks follow. Both
// read only what the parts persisted (the databases, PostgreSQL, the
// client's and the captures' SQLite files, the consumer groups), never a
// running part's memory.
package converge

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/internal/supervise"
	"github.com/relayhq/relay/internal/weaklink"
)

// ShoreNode is the shore's node id (the origin of its local writes).
const ShoreNode = "shore"

// shoreBase is where the shore's own inserts start, apart from the ship's.
const shoreBase = 1_000_000

// clientGroup is the ship client's consumer group (the client's default
// for the demo's node).
const clientGroup = "shipsync-client-" + shipdemo.Node

// shoreCDCGroup is the shore CDC consumer's group (its default).
const shoreCDCGroup = "shipsync-shore-cdc"

// Options configure Run.
type Options struct {
	// PostgresURL is the shore's PostgreSQL (a scratch schema: Run migrates
	// it); MariaDB the server of the two scratch databases; Dir holds the
	// PKI and the SQLite files. Required.
	PostgresURL, MariaDB, Dir string
	// Rows is how many rows each side inserts per table first (default
	// 40); Edits how many changes each side then makes at once (default
	// 120), most on a hot set of rows both sides edit. With Chaos the
	// sides go on editing until the kills are over.
	Rows, Edits int
	// BadTimes is the share of the ship's crew edits whose business time
	// is a day ahead — beyond the skew LAST_WRITER_WINS trusts (default
	// 0.05).
	BadTimes float64
	// Flaps cuts the link on and off while both sides edit.
	Flaps bool
	// Seed makes the edits (and the kill plan) repeatable.
	Seed uint64
	// Chaos, when set, runs the shore and the ship client as relay
	// processes and kills them while both sides edit.
	Chaos *Chaos
	// Keep leaves the MariaDB databases in place (their names are
	// printed).
	Keep bool
	// Progress receives progress lines and the reconciliation (nil: none).
	Progress io.Writer
	// Timeout bounds each wait for quiescence (default 2 min).
	Timeout time.Duration
	Logger  *slog.Logger
	// Pause, when set, runs once the edits have gone quiet and before the
	// operator decides what the policies left to one, with every part
	// still running: a caller can look at the shore then (serve the
	// console, decide a case by hand). Its error ends Run.
	Pause func(ctx context.Context, s Shore) error
	// Midway, when set, runs once during the edits, as soon as the ship has
	// reported a backlog in a heartbeat (not at all if it never does before
	// the edits end), while the edits go on: a caller can look at a shore
	// with work in flight. Its error ends Run.
	Midway func(ctx context.Context, s Shore) error

	// afterReconcile, when set (tests), runs after the reconciliation with
	// the run's parts still open.
	afterReconcile func(ctx context.Context, r *run)
}

// Shore is what Options.Pause gets: the running shore's PostgreSQL, its
// business database and its node id.
type Shore struct {
	Pool      *pgxpool.Pool
	TargetDSN string
	Node      string
}

func (o *Options) defaults() error {
	if o.PostgresURL == "" || o.MariaDB == "" || o.Dir == "" {
		return errors.New("converge: PostgresURL, MariaDB and Dir are required")
	}
	o.Rows, o.Edits = cmp.Or(o.Rows, 40), cmp.Or(o.Edits, 120)
	if o.BadTimes == 0 {
		o.BadTimes = 0.05
	}
	o.Timeout = cmp.Or(o.Timeout, 2*time.Minute)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Chaos != nil {
		return o.Chaos.defaults()
	}
	return nil
}

// Result is what Run did and found.
type Result struct {
	Checks []shipdemo.Check
	// ShipWrites and ShoreWrites are the rows each side's own writes
	// changed.
	ShipWrites, ShoreWrites int
	// Uplink is the ship's events the shore received; Receipts their
	// results; Forwarded the shore's changes sent as commands; Commands
	// the commands by kind and answer; Cases the conflict cases by state;
	// Manual the cases the operator decided; Pending those still waiting
	// for one (their evidence no longer matches the shore's row: the
	// operator is refused until newer evidence comes).
	Uplink, Forwarded int
	Receipts          map[string]int
	Commands          map[string]int
	Cases             map[string]int
	Manual, Pending   int
	// Outages is how many times the link was cut.
	Outages int
	// Shore and Client are what happened to the processes (Chaos only).
	Shore, Client supervise.RoleStats
	// Problems are what went wrong besides the checks (Chaos: a process
	// that exited on its own, a stop that was not clean).
	Problems []string
	Elapsed  time.Duration
}

// OK reports whether every check passed and nothing else went wrong.
func (r *Result) OK() bool { return len(r.Problems) == 0 && shipdemo.ChecksOK(r.Checks) }

// Fired returns how many lives died at each fault point of the shore and
// the client (zero for a point armed but never reached).
func (r *Result) Fired() map[string]int {
	out := map[string]int{}
	for _, p := range slices.Concat(ShorePoints, ClientPoints) {
		out[p] = r.Shore.Faults[p] + r.Client.Faults[p]
	}
	return out
}

// Write prints the summary, the checks and the problems.
func (r *Result) Write(w io.Writer) {
	fmt.Fprintf(w, "writes:    ship %d rows, shore %d rows; link cut %d times\n", r.ShipWrites, r.ShoreWrites, r.Outages)
	fmt.Fprintf(w, "uplink:    %d events (%s)\n", r.Uplink, mapText(r.Receipts))
	fmt.Fprintf(w, "downlink:  %d shore changes forwarded; commands: %s\n", r.Forwarded, mapText(r.Commands))
	fmt.Fprintf(w, "cases:     %s; %d decided by the operator, %d left to one\n", mapText(r.Cases), r.Manual, r.Pending)
	if r.Shore.Lives > 0 {
		for _, x := range []struct {
			name string
			s    supervise.RoleStats
		}{{"shore", r.Shore}, {"client", r.Client}} {
			n, pts := x.s.FaultDeaths()
			fmt.Fprintf(w, "%-10s %d SIGKILLs at random, %d deaths at fault points (%s); %d lives, %d armed\n", x.name+":",
				x.s.Kills, n, strings.Join(pts, ", "), x.s.Lives, x.s.ArmedLives)
		}
		fired := r.Fired()
		for _, p := range slices.Concat(ShorePoints, ClientPoints) {
			fmt.Fprintf(w, "  fault point %-38s fired %d\n", p, fired[p])
		}
	}
	shipdemo.WriteChecks(w, r.Checks)
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM:   %s\n", p)
	}
	if r.OK() {
		fmt.Fprintf(w, "reconcile: ok (%d checks) in %s\n", len(r.Checks), r.Elapsed.Round(time.Millisecond))
		return
	}
	failed := 0
	for _, c := range r.Checks {
		if !c.OK {
			failed++
		}
	}
	fmt.Fprintf(w, "reconcile: %d checks failed, %d problems\n", failed, len(r.Problems))
}

// run is one Run's parts and the handles its checks read.
type run struct {
	o                   Options
	out                 func(string, ...any)
	ship, shoreDB       *sql.DB
	shipDSN, shoreDSN   string
	shipName, shoreName string
	brokers             []string
	// pool is the shore's PostgreSQL; op the operator's arbiter (it
	// decides by hand; it never runs).
	pool *pgxpool.Pool
	op   *arbiter.Arbiter
	// state is the client's SQLite state file; shipCap and shoreCap the
	// captures' (read only here).
	state, shipCap, shoreCap *sql.DB
	proxy                    *weaklink.Proxy
	// fail carries an in-process part's failure.
	fail          chan error
	chaos         *processes
	shipN, shoreN atomic.Int64
	shipIDs       []int64 // rows inserted, per side, for the edits
	shoreIDs      []int64
}

// Run runs the two-way convergence scenario; an error means it could not
// run (a server unreachable), not that a check failed.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	began := time.Now()
	r := &run{o: o, out: supervise.Printer(o.Progress), fail: make(chan error, 8)}
	var cleanup []func()
	defer func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}()
	runCtx, err := r.setUp(ctx, &cleanup)
	if err != nil {
		return nil, err
	}
	r.out("ship database %s, shore database %s: tables %s, capture on both; crew: LAST_WRITER_WINS (updated_at), "+
		"fuel_log: SHORE_WINS", r.shipName, r.shoreName, strings.Join(shipdemo.TableNames(), ", "))

	res := &Result{}
	// Phase 1: each side inserts its own rows; both sides get them all.
	if err := r.inserts(ctx); err != nil {
		return nil, err
	}
	if err := r.quiesce(ctx, "inserts"); err != nil {
		return nil, err
	}
	// Phase 2: both sides edit at once, mostly the same hot rows, while
	// the link flaps (and, with Chaos, the processes are killed).
	var outages atomic.Int64
	flapCtx, stopFlaps := context.WithCancel(runCtx)
	var flaps sync.WaitGroup
	if o.Flaps {
		flaps.Add(1)
		go func() {
			defer flaps.Done()
			r.flap(flapCtx, &outages)
		}()
	}
	chaosDone := make(chan struct{})
	var chaosErr error
	if o.Chaos != nil {
		go func() {
			defer close(chaosDone)
			chaosErr = r.killPlan(runCtx)
		}()
	} else {
		close(chaosDone)
	}
	midDone := make(chan error, 1)
	midCtx, stopMid := context.WithCancel(runCtx)
	go func() { midDone <- r.midway(midCtx) }()
	editErr := r.edits(ctx, chaosDone)
	stopMid()
	if err := <-midDone; err != nil && editErr == nil {
		editErr = err
	}
	<-chaosDone
	stopFlaps()
	flaps.Wait()
	r.proxy.SetDown(false)
	if err := errors.Join(editErr, chaosErr); err != nil {
		return nil, err
	}
	res.Outages = int(outages.Load())
	r.out("edits done: ship %d rows changed, shore %d; link cut %d times", r.shipN.Load(), r.shoreN.Load(), res.Outages)
	// Phase 3: quiet, then an operator decides what the policies could not,
	// until nothing is left to decide.
	for round := 1; ; round++ {
		if err := r.quiesce(ctx, "edits"); err != nil {
			return nil, err
		}
		if round == 1 && o.Pause != nil {
			if err := o.Pause(ctx, Shore{Pool: r.pool, TargetDSN: r.shoreDSN, Node: ShoreNode}); err != nil {
				return nil, err
			}
			if err := r.quiesce(ctx, "pause"); err != nil {
				return nil, err
			}
		}
		pending, err := arbiter.List(ctx, r.pool, arbiter.StatePending, 1)
		if err != nil {
			return nil, err
		}
		if len(pending) == 0 {
			break
		}
		n, err := r.operator(ctx)
		if err != nil {
			return nil, err
		}
		res.Manual += n
		r.out("operator decided %d case(s), keeping the shore's version", n)
		if n == 0 || round == 5 {
			r.out("cases left waiting for an operator: the shore's row is no longer the one in their evidence")
			break
		}
	}
	if r.chaos != nil {
		r.stopProcesses(res)
	}
	res.ShipWrites, res.ShoreWrites = int(r.shipN.Load()), int(r.shoreN.Load())
	if err := r.reconcile(ctx, res); err != nil {
		return nil, err
	}
	if o.afterReconcile != nil {
		o.afterReconcile(ctx, r)
	}
	res.Elapsed = time.Since(began)
	return res, nil
}

// setUp makes the databases, the queue, the captures and the parts (in
// process, or as processes with Chaos) and opens the state the checks
// read; the parts run under the returned context until cleanup.
func (r *run) setUp(ctx context.Context, cleanup *[]func()) (context.Context, error) {
	if err := r.databases(ctx, cleanup); err != nil {
		return nil, err
	}
	kopts := []kfake.Opt{kfake.NumBrokers(1),
		kfake.SeedTopics(2, append(shipdemo.TopicsOf(shipdemo.Logical, r.shipName), shipdemo.TopicsOf("shore", r.shoreName)...)...)}
	if r.o.Chaos != nil {
		// The processes reach the cluster at a fixed port.
		port, err := supervise.FreePort()
		if err != nil {
			return nil, err
		}
		kopts = append(kopts, kfake.Ports(port))
	}
	cluster, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("converge: kafka: %w", err)
	}
	*cleanup = append(*cleanup, cluster.Close)
	r.brokers = cluster.ListenAddrs()

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	*cleanup = append(*cleanup, func() { cancel(); wg.Wait() })
	start := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(runCtx); err != nil && runCtx.Err() == nil {
				r.fail <- fmt.Errorf("converge: %s: %w", name, err)
			}
		}()
	}
	if err := r.captures(ctx, start, cleanup); err != nil {
		return nil, err
	}
	if r.o.Chaos != nil {
		err = r.startProcesses(ctx, cleanup)
	} else {
		err = r.startInProcess(ctx, start, cleanup)
	}
	if err != nil {
		return nil, err
	}
	if err := r.openState(ctx, cleanup); err != nil {
		return nil, err
	}
	return runCtx, nil
}

// databases makes the two scratch databases with the tables and the
// capture installed on both.
func (r *run) databases(ctx context.Context, cleanup *[]func()) error {
	tag := fmt.Sprintf("%x", rand.Uint32())
	var err error
	var dropShip, dropShore func()
	r.shipName, r.shoreName = "relay_converge_ship_"+tag, "relay_converge_shore_"+tag
	if r.shipDSN, dropShip, err = mysqldsn.CreateScratch(ctx, r.o.MariaDB, r.shipName); err != nil {
		return fmt.Errorf("converge: ship database: %w", err)
	}
	if r.shoreDSN, dropShore, err = mysqldsn.CreateScratch(ctx, r.o.MariaDB, r.shoreName); err != nil {
		dropShip()
		return fmt.Errorf("converge: shore database: %w", err)
	}
	if r.o.Keep {
		r.out("converge: ship database %s and shore database %s kept", r.shipName, r.shoreName)
	} else {
		*cleanup = append(*cleanup, dropShip, dropShore)
	}
	if r.ship, err = sql.Open("mysql", r.shipDSN); err != nil {
		return err
	}
	*cleanup = append(*cleanup, func() { _ = r.ship.Close() })
	if r.shoreDB, err = sql.Open("mysql", r.shoreDSN); err != nil {
		return err
	}
	*cleanup = append(*cleanup, func() { _ = r.shoreDB.Close() })
	if err := shipdemo.CreateTables(ctx, r.ship, r.shoreDB); err != nil {
		return err
	}
	names := shipdemo.TableNames()
	if _, err := capture.Install(ctx, r.ship, capture.InstallConfig{NodeID: shipdemo.Node, Tables: names}); err != nil {
		return err
	}
	_, err = capture.Install(ctx, r.shoreDB, capture.InstallConfig{NodeID: ShoreNode, Tables: names})
	return err
}

// captures runs both databases' trigger captures in this process (they
// are not what the run kills).
func (r *run) captures(ctx context.Context, start func(string, func(context.Context) error), cleanup *[]func()) error {
	for _, c := range []struct {
		name, file, logical string
		db                  *sql.DB
		state               **sql.DB
	}{
		{"ship capture", "ship-capture.db", shipdemo.Logical, r.ship, &r.shipCap},
		{"shore capture", "shore-capture.db", "shore", r.shoreDB, &r.shoreCap},
	} {
		path := filepath.Join(r.o.Dir, c.file)
		cp, err := shipdemo.StartCapture(ctx, shipdemo.CaptureOptions{DB: c.db, StateFile: path, Brokers: r.brokers,
			Logical: c.logical, Logger: r.o.Logger})
		if err != nil {
			return err
		}
		start(c.name, cp.Run)
		st, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
		if err != nil {
			return err
		}
		*cleanup = append(*cleanup, func() { _ = st.Close() })
		*c.state = st
	}
	return nil
}

// shoreRules are the rules the shore registers: crew decided by the later
// updated_at, fuel_log by the shore's version.
func shoreRules() []shipdemo.ShoreRule {
	rules := shipdemo.ShoreRules()
	for i := range rules {
		rules[i].Conflict = shore.ConflictPolicy{Policy: shore.PolicyShoreWins}
		if rules[i].ID == "crew" {
			rules[i].Conflict = shore.ConflictPolicy{Policy: shore.PolicyLastWriterWins, TimeColumn: "updated_at"}
		}
	}
	return rules
}

// shipRules are the node's rules: both directions on both tables.
func shipRules(shipName string) []normalize.Rule {
	rules := shipdemo.ShipRules(shipName)
	for i := range rules {
		rules[i].Direction = normalize.DirectionBoth
	}
	return rules
}

// startLink puts the flapping link in front of the shore's data API at
// target (host:port) and returns its address.
func (r *run) startLink(ctx context.Context, target string, cleanup *[]func()) (string, error) {
	var err error
	if r.proxy, err = weaklink.New(weaklink.Config{Target: target, Seed: int64(r.o.Seed)}); err != nil {
		return "", err
	}
	addr, err := r.proxy.Start(ctx)
	if err != nil {
		return "", err
	}
	*cleanup = append(*cleanup, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.proxy.Stop(sctx)
	})
	return addr, nil
}

// openState opens the client's state file to read and the operator's
// arbiter.
func (r *run) openState(ctx context.Context, cleanup *[]func()) error {
	var err error
	if r.state, err = sql.Open("sqlite", "file:"+filepath.Join(r.o.Dir, "client.db")+"?_pragma=busy_timeout(5000)"); err != nil {
		return err
	}
	*cleanup = append(*cleanup, func() { _ = r.state.Close() })
	t, err := apply.OpenTarget(r.shoreDSN)
	if err != nil {
		return err
	}
	*cleanup = append(*cleanup, func() { _ = t.Close() })
	r.op, err = arbiter.New(arbiter.Config{Pool: r.pool, Target: t, ShoreNode: ShoreNode, Instance: "converge-operator",
		Clock: clock, Logger: r.o.Logger})
	return err
}

// flap cuts the link for 0.3–1 s every 0.3–1 s until ctx ends.
func (r *run) flap(ctx context.Context, n *atomic.Int64) {
	rng := rand.New(rand.NewPCG(r.o.Seed, 7))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(300+rng.IntN(700)) * time.Millisecond):
		}
		r.proxy.SetDown(true)
		n.Add(1)
		select {
		case <-ctx.Done():
			r.proxy.SetDown(false)
			return
		case <-time.After(time.Duration(300+rng.IntN(700)) * time.Millisecond):
		}
		r.proxy.SetDown(false)
	}
}

// midway runs Options.Midway once the ship has reported a backlog, unless
// ctx ends first (the edits are over).
func (r *run) midway(ctx context.Context) error {
	if r.o.Midway == nil {
		return nil
	}
	for {
		var events int64
		err := r.pool.QueryRow(ctx, "SELECT coalesce(sum(events), 0)::bigint FROM sync_node_backlog").Scan(&events)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if events > 0 {
			// The caller's context: the look may outlast the edits.
			return r.o.Midway(context.WithoutCancel(ctx), Shore{Pool: r.pool, TargetDSN: r.shoreDSN, Node: ShoreNode})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
