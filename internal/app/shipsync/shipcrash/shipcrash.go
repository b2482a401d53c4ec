package shipcrash

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/kafkaread"
	"github.com/relayhq/relay/internal/supervise"
	"github.com/relayhq/relay/internal/weaklink"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// Points are the fault points the client passes: after storing a poll's
// events, after a batch's answer, after a page of receipts, and before the
// consumer group commit.
var Points = []string{faultpoint.ShipsyncClientAfterRead, faultpoint.ShipsyncClientAfterUpload,
	faultpoint.ShipsyncClientAfterReceipts, faultpoint.ShipsyncClientBeforeOffsetCommit}

// CapturePoints are the fault points the capture's lives are armed with:
// its FIFO handler's commit and mid-batch, and its dispatcher after Kafka
// confirmed a batch but before SENT is written — the crash that makes the
// capture send records again.
var CapturePoints = []string{faultpoint.DispatchAfterConfirm, faultpoint.FIFOAfterCommit, faultpoint.FIFOMidBatch}

// Defaults of the plan (the CLI's; Options takes 0 as none).
const (
	KillsDefault        = 16
	ShoreKillsDefault   = 3
	CutsDefault         = 3
	CaptureKillsDefault = 4
	// FaultProbabilityDefault is Options.FaultProbability's default.
	FaultProbabilityDefault = 0.3
)

// group is the client's consumer group (the client's default for the
// demo's node).
const group = "shipsync-client-" + shipdemo.Node

// Options configure a run.
type Options struct {
	// Binary is the relay executable the client and the shore run as.
	// Required.
	Binary string
	// PostgresURL names a fresh schema for the shore. Required.
	PostgresURL string
	// MariaDB is the server DSN (user:pw@tcp(host:port)/); the run creates
	// and drops the ship's and the shore's databases there. Required.
	MariaDB string
	// Dir holds the PKI, the rules file and the SQLite files. Required.
	Dir string
	// Changes is about how many row changes the workload makes (default
	// 3,000): a quarter inserted into each of the two tables, 40 % updates
	// and 10 % deletes of random rows, from Writers connections (default
	// 1: concurrent writers deadlock now and then, and each rolled-back
	// transaction burns changelog ids that the capture waits out one by
	// one — its own behaviour, not what this harness is about).
	Changes, Writers int
	// Kills is how many times the client is killed with SIGKILL (0: never;
	// the CLI's default KillsDefault); every other life is armed with one
	// of the fault points, each in turn, at FaultProbability (default
	// FaultProbabilityDefault). ShoreKills and Cuts (each 0.5–2 s) are the
	// shore's restarts and the link's outages (0: none; the CLI's defaults
	// ShoreKillsDefault, CutsDefault), mixed into the same plan, one step
	// every 300–900 ms.
	Kills, ShoreKills, Cuts int
	// CaptureKills is how many times the capture process (`relay shipsync
	// capture run`) is killed with SIGKILL (0: never; the CLI's default
	// CaptureKillsDefault); every other life is armed with one of
	// CapturePoints in turn. A capture killed after Kafka took records but
	// before it marked them sent sends them again: the shore answers those
	// repeats APPLIED without writing.
	CaptureKills     int
	FaultProbability float64
	// Seed fixes the workload and the plan.
	Seed uint64
	// Out receives progress lines (nil: discarded).
	Out io.Writer
	// Timeout bounds the wait for quiet after the chaos (default 2 min).
	Timeout time.Duration
	// Keep leaves the MariaDB databases in place (their names are printed).
	Keep bool

	// tamper, in tests, changes the stores before the reconciliation, to
	// show that it finds what is wrong.
	tamper func(ctx context.Context, ship, shore *sql.DB, pg *relaypgx.Driver) error
}

func (o Options) withDefaults() Options {
	o.Changes, o.Writers = cmp.Or(o.Changes, 3000), cmp.Or(o.Writers, 1)
	o.FaultProbability = cmp.Or(o.FaultProbability, FaultProbabilityDefault)
	o.Timeout = cmp.Or(o.Timeout, 2*time.Minute)
	o.Out = cmp.Or(o.Out, io.Writer(io.Discard))
	return o
}

func (o Options) validate() error {
	switch {
	case o.Binary == "" || o.PostgresURL == "" || o.MariaDB == "" || o.Dir == "":
		return errors.New("shipcrash: Binary, PostgresURL, MariaDB and Dir are required")
	case o.Changes < 10 || o.Writers < 1:
		return errors.New("shipcrash: changes ≥ 10 and writers ≥ 1")
	case o.Kills < 0 || o.ShoreKills < 0 || o.Cuts < 0 || o.CaptureKills < 0 || o.FaultProbability < 0 || o.FaultProbability > 1:
		return errors.New("shipcrash: kills, shore kills, capture kills, cuts ≥ 0 and fault probability in [0,1]")
	}
	return nil
}

// Result is what a run did and found.
type Result struct {
	// Writes are the row changes the workload committed; Events the events
	// in the client's state.
	Writes, Events         int
	Client, Shore, Capture supervise.RoleStats
	// Cuts are the link's outages; Link the proxy's counters.
	Cuts    int
	Link    weaklink.Stats
	Checks  []shipdemo.Check
	Elapsed time.Duration
	// Problems are what went wrong besides the checks (a process that
	// exited on its own, a stop that was not clean, no quiet in time).
	Problems []string
}

// OK reports a clean run: every check passed and no problem.
func (r *Result) OK() bool {
	return len(r.Problems) == 0 && shipdemo.ChecksOK(r.Checks)
}

// Write prints the summary and the checks.
func (r *Result) Write(w io.Writer) {
	faults, pts := r.Client.FaultDeaths()
	fmt.Fprintf(w, "changes:   %d written, %d events\n", r.Writes, r.Events)
	fmt.Fprintf(w, "client:    %d SIGKILLs at random, %d deaths at fault points (%s); %d lives, %d armed\n",
		r.Client.Kills, faults, strings.Join(pts, ", "), r.Client.Lives, r.Client.ArmedLives)
	fmt.Fprintf(w, "shore:     %d SIGKILLs and restarts; %d lives\n", r.Shore.Kills, r.Shore.Lives)
	capFaults, capPts := r.Capture.FaultDeaths()
	fmt.Fprintf(w, "capture:   %d SIGKILLs at random, %d deaths at fault points (%s); %d lives\n",
		r.Capture.Kills, capFaults, strings.Join(capPts, ", "), r.Capture.Lives)
	fmt.Fprintf(w, "link:      %d cuts (%d connections cut, %d refused while down)\n", r.Cuts, r.Link.Cuts,
		r.Link.Refused)
	shipdemo.WriteChecks(w, r.Checks)
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM:   %s\n", p)
	}
	failed := 0
	for _, c := range r.Checks {
		if !c.OK {
			failed++
		}
	}
	if r.OK() {
		fmt.Fprintf(w, "reconcile: ok (%d checks) in %s\n", len(r.Checks), r.Elapsed.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "reconcile: %d checks failed, %d problems\n", failed, len(r.Problems))
	}
}

// Run runs the harness. ctx bounds it; its end kills the processes.
func Run(ctx context.Context, o Options) (*Result, error) {
	began := time.Now()
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5b1b))
	tag := fmt.Sprintf("%012x", rand.Uint64()>>16) // not from Seed: reruns must not meet
	out := supervise.Printer(o.Out)
	var cleanup []func()
	defer func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}()

	// The two databases, the capture installed on the ship's.
	shipName, shoreName := "relay_shipcrash_ship_"+tag, "relay_shipcrash_shore_"+tag
	shipDSN, dropShip, err := mysqldsn.CreateScratch(ctx, o.MariaDB, shipName)
	if err != nil {
		return nil, fmt.Errorf("shipcrash: ship database: %w", err)
	}
	shoreDSN, dropShore, err := mysqldsn.CreateScratch(ctx, o.MariaDB, shoreName)
	if err != nil {
		dropShip()
		return nil, fmt.Errorf("shipcrash: shore database: %w", err)
	}
	if o.Keep {
		out("shipcrash: ship database %s and shore database %s kept", shipName, shoreName)
	} else {
		cleanup = append(cleanup, dropShip, dropShore)
	}
	ship, err := sql.Open("mysql", shipDSN)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = ship.Close() })
	shoreDB, err := sql.Open("mysql", shoreDSN)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = shoreDB.Close() })
	if err := shipdemo.CreateTables(ctx, ship, shoreDB); err != nil {
		return nil, err
	}
	if _, err := capture.Install(ctx, ship, capture.InstallConfig{NodeID: shipdemo.Node,
		Tables: shipdemo.TableNames()}); err != nil {
		return nil, err
	}

	// The Kafka-API cluster, on a fixed port the client processes reach.
	kport, err := supervise.FreePort()
	if err != nil {
		return nil, err
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(kport),
		kfake.SeedTopics(4, shipdemo.Topics(shipName)...))
	if err != nil {
		return nil, fmt.Errorf("shipcrash: kafka: %w", err)
	}
	cleanup = append(cleanup, cluster.Close)
	brokers := cluster.ListenAddrs()

	// The shore: PKI, registry and rules here; the data API and the applier
	// in a process of their own, reached through the link.
	pkiDir := filepath.Join(o.Dir, "pki")
	pg, err := shipdemo.SetupShore(ctx, shipdemo.ShoreOptions{PostgresURL: o.PostgresURL, PKIDir: pkiDir,
		Node: shipdemo.Node, Rules: shipdemo.ShoreRules()})
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = pg.Close() })
	shoreAddr, err := supervise.FreeAddr()
	if err != nil {
		return nil, err
	}
	shore := supervise.NewRole("shore", o.Binary, []string{"shipsync", "shore", "--postgres", o.PostgresURL,
		"--target", shoreDSN, "--addr", shoreAddr,
		"--tls-cert", filepath.Join(pkiDir, pki.ServerCertFile), "--tls-key", filepath.Join(pkiDir, pki.ServerKeyFile),
		"--client-ca", filepath.Join(pkiDir, pki.CACertFile), "--instance-id", "shipcrash-shore",
		"--node-rate", "1000", "--node-concurrency", "12", "--log-level", "warn"}, nil, nil, rng.Uint64(), out)
	if err := shore.Start(); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, shore.Abort)
	// The client's first heartbeat goes at its start: the shore serves by
	// then.
	for !supervise.Serving(shoreAddr) {
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}
	link, err := weaklink.New(weaklink.Config{Target: shoreAddr, Seed: int64(rng.Uint64() >> 1)})
	if err != nil {
		return nil, err
	}
	linkAddr, err := link.Start(ctx)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = link.Stop(sctx)
	})

	// The capture: its watermark seeded here before the workload writes
	// (see shipdemo.StartCapture), then run as a process of its own, a
	// victim too.
	captureState := filepath.Join(o.Dir, "capture.db")
	seeded, err := shipdemo.StartCapture(ctx, shipdemo.CaptureOptions{DB: ship, StateFile: captureState, Brokers: brokers})
	if err != nil {
		return nil, err
	}
	seeded.Close()
	capt := supervise.NewRole("capture", o.Binary, []string{"shipsync", "capture", "run", "--db", shipDSN,
		"--state", captureState, "--logical", shipdemo.Logical, "--brokers", strings.Join(brokers, ","),
		"--max-commit-delay", shipdemo.CaptureMaxCommitDelay.String(),
		"--poll-interval", shipdemo.CapturePollInterval.String(), "--log-level", "warn"},
		nil, CapturePoints, rng.Uint64(), out)
	if err := capt.Start(); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, capt.Abort)
	runCtx, cancel := context.WithCancel(ctx)
	cleanup = append(cleanup, cancel)

	// The client, the victim.
	rules, err := shipdemo.RulesFile(shipName)
	if err != nil {
		return nil, err
	}
	rulesPath := filepath.Join(o.Dir, "rules.json")
	if err := os.WriteFile(rulesPath, rules, 0o600); err != nil {
		return nil, err
	}
	statePath := filepath.Join(o.Dir, "client.db")
	cert, key := pki.NodeFiles("node-" + shipdemo.Node)
	cl := supervise.NewRole("client", o.Binary, []string{"shipsync", "client", "--brokers", strings.Join(brokers, ","),
		"--logical", shipdemo.Logical, "--rules", rulesPath, "--state", statePath, "--url", "https://" + linkAddr,
		"--ca", filepath.Join(pkiDir, pki.CACertFile), "--cert", filepath.Join(pkiDir, cert),
		"--key", filepath.Join(pkiDir, key), "--group-instance-id", "shipcrash", "--receipt-every", "200ms",
		"--progress-every", "0", "--log-level", "warn"}, nil, Points, rng.Uint64(), out)
	if err := cl.Start(); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, cl.Abort)

	wl := shipdemo.NewWorkload(shipdemo.WorkloadOptions{Rows: o.Changes / 4, Updates: o.Changes * 2 / 5,
		Deletes: o.Changes / 10, Writers: o.Writers, Seed: o.Seed}, ship)
	werr := make(chan error, 1)
	go func() { werr <- wl.Run(runCtx) }()
	out("shipcrash: ~%d changes; kafka on %s; shore on %s behind the link %s; plan: %d client kills, %d shore kills, "+
		"%d capture kills, %d cuts", o.Changes, strings.Join(brokers, ","), shoreAddr, linkAddr, o.Kills, o.ShoreKills,
		o.CaptureKills, o.Cuts)

	// The plan: the steps shuffled by the seed, one every 300–900 ms.
	var plan []string
	for range o.Kills {
		plan = append(plan, "client")
	}
	for range o.ShoreKills {
		plan = append(plan, "shore")
	}
	for range o.Cuts {
		plan = append(plan, "cut")
	}
	for range o.CaptureKills {
		plan = append(plan, "capture")
	}
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	res := &Result{}
	kills, capKills := 0, 0
	wait := func(d time.Duration) error { return sleepCtx(ctx, d) }
	// kill ends r's life; every other kill (counted by n) arms the next
	// life with one of points in turn. armed reports it: the caller gives
	// the life time to reach its point.
	kill := func(r *supervise.Role, points []string, n *int) (what string, armed bool, err error) {
		arm := ""
		if *n%2 == 0 {
			arm = fmt.Sprintf("%s=%g", points[*n/2%len(points)], o.FaultProbability)
		}
		*n++
		what, err = r.Kill(arm)
		return what, arm != "", err
	}
	for i, step := range plan {
		if err := wait(time.Duration(300+rng.IntN(600)) * time.Millisecond); err != nil {
			return nil, err
		}
		switch step {
		case "client":
			what, armed, err := kill(cl, Points, &kills)
			if err != nil {
				return nil, err
			}
			out("  step %2d: client killed %s; %d changes written", i+1, what, wl.Writes())
			if armed {
				// Give the armed life time to reach its point.
				supervise.WaitFault(ctx, cl, 2*time.Second)
			}
		case "capture":
			what, armed, err := kill(capt, CapturePoints, &capKills)
			if err != nil {
				return nil, err
			}
			out("  step %2d: capture killed %s", i+1, what)
			if armed {
				supervise.WaitFault(ctx, capt, 2*time.Second)
			}
		case "shore":
			what, err := shore.Kill("")
			if err != nil {
				return nil, err
			}
			out("  step %2d: shore killed %s", i+1, what)
		case "cut":
			d := time.Duration(500+rng.IntN(1500)) * time.Millisecond
			link.SetDown(true)
			res.Cuts++
			err := wait(d)
			link.SetDown(false)
			if err != nil {
				return nil, err
			}
			out("  step %2d: link down for %s", i+1, d)
		}
	}
	if cl.Armed() {
		if _, err := cl.Kill(""); err != nil {
			return nil, err
		}
	}
	if capt.Armed() { // its last life runs unarmed to the end
		if _, err := capt.Kill(""); err != nil {
			return nil, err
		}
	}
	select {
	case err := <-werr:
		if err != nil {
			return nil, fmt.Errorf("shipcrash: workload: %w", err)
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res.Writes = wl.Writes()
	out("shipcrash: chaos over, %d changes written; waiting for quiet", res.Writes)

	// Quiet: every change an event, every event terminal, every checkpoint
	// at its end and committed.
	state, err := sql.Open("sqlite", "file:"+statePath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = state.Close() })
	capState, err := sql.Open("sqlite", "file:"+captureState+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = capState.Close() })
	deadline := time.Now().Add(o.Timeout)
	said := time.Now()
	for {
		q, why, err := CaptureDone(ctx, ship, capState)
		if err == nil && q {
			q, why, err = quiet(ctx, state, brokers, shipName, res.Writes)
		}
		if err != nil {
			return nil, err
		}
		// The last lives must have set up their signal handling before
		// they are asked to stop cleanly.
		if q && cl.Uptime() > time.Second && capt.Uptime() > time.Second && supervise.Serving(shoreAddr) {
			break
		}
		if time.Now().After(deadline) {
			res.Problems = append(res.Problems, fmt.Sprintf("not quiet within %s: %s; the client's last output:\n%s",
				o.Timeout, why, cl.Tail(2000)))
			break
		}
		if time.Since(said) >= 2*time.Second {
			said = time.Now()
			out("  waiting %s: %s", time.Since(began).Round(time.Second), why)
		}
		if err := wait(200 * time.Millisecond); err != nil {
			return nil, err
		}
	}
	for _, r := range []*supervise.Role{cl, shore, capt} {
		if err := r.Stop(30 * time.Second); err != nil {
			res.Problems = append(res.Problems, err.Error())
		}
	}
	res.Client, res.Shore, res.Capture = cl.Stats(), shore.Stats(), capt.Stats()
	for _, e := range slices.Concat(res.Client.OwnExits, res.Shore.OwnExits, res.Capture.OwnExits) {
		res.Problems = append(res.Problems, "a process exited on its own: "+e)
	}
	res.Link = link.Stats()

	if o.tamper != nil {
		if err := o.tamper(ctx, ship, shoreDB, pg); err != nil {
			return nil, err
		}
	}
	st, err := client.OpenStore(ctx, statePath, group, relayclock.System{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rec, err := shipdemo.Reconcile(ctx, shipdemo.Stores{Ship: ship, Shore: shoreDB, PG: pg, State: st, StateDB: state,
		Brokers: brokers, ShipDB: shipName, Group: group}, res.Writes)
	if err != nil {
		return nil, err
	}
	res.Checks, res.Events = rec.Checks, rec.Events
	res.Elapsed = time.Since(began)
	return res, nil
}

// CaptureDone reports whether a trigger capture has sent every change of
// the database db it captures, read from capState (the capture's SQLite
// state file), or else what it still has to do: done is its watermark at
// the changelog's last id with nothing left in its queue or its outbox (a
// capture killed after Kafka took records and before it marked them sent
// sends them again: the topic then holds more records than there were
// changes, so the client's event count alone cannot tell).
func CaptureDone(ctx context.Context, db, capState *sql.DB) (bool, string, error) {
	var last, watermark, queued, unsent int64
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM _sync_changelog").Scan(&last); err != nil {
		return false, "", fmt.Errorf("shipcrash: changelog: %w", err)
	}
	err := capState.QueryRowContext(ctx, "SELECT (SELECT COALESCE(MAX(watermark), 0) FROM relay_cursor), "+
		"(SELECT count(*) FROM relay_message WHERE state IN ('PENDING', 'FAILED')), "+
		"(SELECT count(*) FROM relay_outbox WHERE state = 'PENDING')").Scan(&watermark, &queued, &unsent)
	if err != nil {
		return false, "", fmt.Errorf("shipcrash: capture state: %w", err)
	}
	if watermark < last || queued > 0 || unsent > 0 {
		return false, fmt.Sprintf("capture: watermark %d of changelog id %d, %d queued, %d unsent", watermark, last,
			queued, unsent), nil
	}
	return true, "", nil
}

// quiet reports whether the client has caught up: as many events as
// changes, none open, every partition's terminal checkpoint at the topic's
// end and committed to the group; else what it waits for.
func quiet(ctx context.Context, state *sql.DB, brokers []string, shipName string, writes int) (bool, string, error) {
	var events, open int
	err := state.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE state <> 'TERMINAL') FROM event_state "+
		"WHERE direction = 'up'").Scan(&events, &open)
	if err != nil && !strings.Contains(err.Error(), "no such table") {
		return false, "", fmt.Errorf("shipcrash: client state: %w", err)
	}
	if events < writes || open > 0 {
		records := int64(0)
		for _, topic := range shipdemo.Topics(shipName) {
			ends, err := kafkaread.Ends(ctx, brokers, topic)
			if err != nil {
				return false, "", err
			}
			for _, e := range ends {
				records += e
			}
		}
		return false, fmt.Sprintf("%d of %d events, %d open; %d records in the topics", events, writes, open, records), nil
	}
	committed, err := kafkaread.Committed(ctx, brokers, group)
	if err != nil {
		return false, "", err
	}
	for _, topic := range shipdemo.Topics(shipName) {
		ends, err := kafkaread.Ends(ctx, brokers, topic)
		if err != nil {
			return false, "", err
		}
		for p, end := range ends {
			if end == 0 {
				continue
			}
			var next int64
			err := state.QueryRowContext(ctx, "SELECT terminal_next FROM partition_watermark WHERE direction = 'up' "+
				"AND grp = ? AND topic = ? AND part = ?", group, topic, p).Scan(&next)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return false, "", fmt.Errorf("shipcrash: client state: %w", err)
			}
			if next != end {
				return false, fmt.Sprintf("%s/%d: terminal checkpoint %d of %d", topic, p, next, end), nil
			}
			if c := committed[topic][p]; c != end {
				return false, fmt.Sprintf("%s/%d: committed %d of %d", topic, p, c, end), nil
			}
		}
	}
	return true, "", nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("shipcrash: %w", ctx.Err())
	case <-time.After(d):
		return nil
	}
}
