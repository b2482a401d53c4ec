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
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/remote"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/shorecdc"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/internal/weaklink"
	"github.com/relayhq/relay/relayclock"
)

// ShoreNode is the shore's node id (the origin of its local writes).
const ShoreNode = "shore"

// shoreBase is where the shore's own inserts start, apart from the ship's.
const shoreBase = 1_000_000

// Options configure Run.
type Options struct {
	// PostgresURL is the shore's PostgreSQL (a scratch schema: Run migrates
	// it); MariaDB the server of the two scratch databases; Dir holds the
	// PKI and the SQLite files. Required.
	PostgresURL, MariaDB, Dir string
	// Rows is how many rows each side inserts per table first (default
	// 40); Edits how many changes each side then makes at once (default
	// 120), most on a hot set of rows both sides edit.
	Rows, Edits int
	// BadTimes is the share of the ship's crew edits whose business time
	// is a day ahead — beyond the skew LAST_WRITER_WINS trusts (default
	// 0.05).
	BadTimes float64
	// Flaps cuts the link on and off while both sides edit.
	Flaps bool
	// Seed makes the edits repeatable.
	Seed uint64
	// Progress receives progress lines and the reconciliation (nil: none).
	Progress io.Writer
	// Timeout bounds each wait for quiescence (default 2 min).
	Timeout time.Duration
	Logger  *slog.Logger
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
	// Manual the cases the operator decided.
	Uplink, Forwarded int
	Receipts          map[string]int
	Commands          map[string]int
	Cases             map[string]int
	Manual            int
	// Outages is how many times the link was cut.
	Outages int
	Elapsed time.Duration
}

// OK reports whether every check passed.
func (r *Result) OK() bool { return shipdemo.ChecksOK(r.Checks) }

// run is one Run's parts.
type run struct {
	o                 Options
	ship, shoreDB     *sql.DB
	shipDSN, shoreDSN string
	shipName          string
	shoreName         string
	sh                *shipdemo.Shore
	proxy             *weaklink.Proxy
	cl                *client.Client
	st                *client.Store
	cdcc              *shorecdc.Consumer
	arb               *arbiter.Arbiter
	shipN, shoreN     atomic.Int64
	shipIDs           []int64 // rows inserted, per side, for the edits
	shoreIDs          []int64
}

// Run runs the two-way convergence scenario; an error means it could not
// run (a server unreachable), not that a check failed.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	began := time.Now()
	r := &run{o: o}
	var cleanup []func()
	defer func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}()
	tag := fmt.Sprintf("%x", rand.Uint32())
	var err error
	var dropShip, dropShore func()
	r.shipName, r.shoreName = "relay_converge_ship_"+tag, "relay_converge_shore_"+tag
	if r.shipDSN, dropShip, err = mysqldsn.CreateScratch(ctx, o.MariaDB, r.shipName); err != nil {
		return nil, fmt.Errorf("converge: ship database: %w", err)
	}
	cleanup = append(cleanup, dropShip)
	if r.shoreDSN, dropShore, err = mysqldsn.CreateScratch(ctx, o.MariaDB, r.shoreName); err != nil {
		return nil, fmt.Errorf("converge: shore database: %w", err)
	}
	cleanup = append(cleanup, dropShore)
	if r.ship, err = sql.Open("mysql", r.shipDSN); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = r.ship.Close() })
	if r.shoreDB, err = sql.Open("mysql", r.shoreDSN); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = r.shoreDB.Close() })
	if err := shipdemo.CreateTables(ctx, r.ship, r.shoreDB); err != nil {
		return nil, err
	}
	names := shipdemo.TableNames()
	if _, err := capture.Install(ctx, r.ship, capture.InstallConfig{NodeID: shipdemo.Node, Tables: names}); err != nil {
		return nil, err
	}
	if _, err := capture.Install(ctx, r.shoreDB, capture.InstallConfig{NodeID: ShoreNode, Tables: names}); err != nil {
		return nil, err
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(2, append(shipdemo.TopicsOf(shipdemo.Logical, r.shipName), shipdemo.TopicsOf("shore", r.shoreName)...)...))
	if err != nil {
		return nil, fmt.Errorf("converge: kafka: %w", err)
	}
	cleanup = append(cleanup, cluster.Close)
	brokers := cluster.ListenAddrs()

	rules := shipdemo.ShoreRules()
	for i := range rules {
		rules[i].Conflict = shore.ConflictPolicy{Policy: shore.PolicyShoreWins}
		if rules[i].ID == "crew" {
			rules[i].Conflict = shore.ConflictPolicy{Policy: shore.PolicyLastWriterWins, TimeColumn: "updated_at"}
		}
	}
	r.sh, err = shipdemo.StartShore(ctx, shipdemo.ShoreOptions{PostgresURL: o.PostgresURL, TargetDSN: r.shoreDSN,
		PKIDir: filepath.Join(o.Dir, "pki"), Node: shipdemo.Node, Rules: rules, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, r.sh.Close)
	fmt.Fprintf(o.Progress, "ship database %s, shore database %s: tables %s, capture on both; crew: LAST_WRITER_WINS "+
		"(updated_at), fuel_log: SHORE_WINS\n", r.shipName, r.shoreName, strings.Join(names, ", "))

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	fail := make(chan error, 8)
	cleanup = append(cleanup, func() { cancel(); wg.Wait() })
	start := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(runCtx); err != nil && runCtx.Err() == nil {
				fail <- fmt.Errorf("converge: %s: %w", name, err)
			}
		}()
	}
	if err := r.startShoreSide(ctx, brokers, start); err != nil {
		return nil, err
	}
	if err := r.startShipSide(ctx, brokers, start, &cleanup); err != nil {
		return nil, err
	}

	res := &Result{}
	// Phase 1: each side inserts its own rows; both sides get them all.
	if err := r.inserts(ctx); err != nil {
		return nil, err
	}
	if err := r.quiesce(ctx, fail, "inserts"); err != nil {
		return nil, err
	}
	// Phase 2: both sides edit at once, mostly the same hot rows, while
	// the link flaps.
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
	editErr := r.edits(ctx)
	stopFlaps()
	flaps.Wait()
	r.proxy.SetDown(false)
	if editErr != nil {
		return nil, editErr
	}
	res.Outages = int(outages.Load())
	fmt.Fprintf(o.Progress, "edits done: ship %d rows changed, shore %d; link cut %d times\n", r.shipN.Load(),
		r.shoreN.Load(), res.Outages)
	// Phase 3: quiet, then an operator decides what the policies could not,
	// until nothing is left to decide.
	for round := 1; ; round++ {
		if err := r.quiesce(ctx, fail, "edits"); err != nil {
			return nil, err
		}
		pending, err := arbiter.List(ctx, r.sh.PG.Pool(), arbiter.StatePending, 1)
		if err != nil {
			return nil, err
		}
		if len(pending) == 0 {
			break
		}
		if round > 5 {
			fmt.Fprintln(o.Progress, "cases still wait for an operator after five rounds")
			break
		}
		n, err := r.operator(ctx)
		if err != nil {
			return nil, err
		}
		res.Manual += n
		fmt.Fprintf(o.Progress, "operator decided %d case(s), keeping the shore's version\n", n)
	}
	res.ShipWrites, res.ShoreWrites = int(r.shipN.Load()), int(r.shoreN.Load())
	if err := r.reconcile(ctx, res); err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(began)
	return res, nil
}

// startShoreSide runs the shore database's capture, the shore CDC consumer
// and the arbiter.
func (r *run) startShoreSide(ctx context.Context, brokers []string, start func(string, func(context.Context) error)) error {
	c, err := shipdemo.StartCapture(ctx, shipdemo.CaptureOptions{DB: r.shoreDB, StateFile: filepath.Join(r.o.Dir,
		"shore-capture.db"), Brokers: brokers, Logical: "shore", Logger: r.o.Logger})
	if err != nil {
		return err
	}
	start("shore capture", c.Run)
	rs, err := normalize.NewRuleSet(shipdemo.ShoreSideRules(r.shoreName, normalize.DirectionBoth)...)
	if err != nil {
		return err
	}
	clock := relayclock.System{}
	dl := shore.NewDownlink(r.sh.PG.Pool(), clock)
	n, err := shorecdc.NewNormalizer(ShoreNode, "capture-shore", 0, rs, dl)
	if err != nil {
		return err
	}
	dec, err := cdc.New(cdc.Config{})
	if err != nil {
		return err
	}
	if r.cdcc, err = shorecdc.New(shorecdc.Config{Brokers: brokers, TopicPrefix: capture.TopicPrefixDefault + ".shore.",
		Downlink: dl, Decoder: dec, Normalizer: n, Clock: clock, Logger: r.o.Logger}); err != nil {
		return err
	}
	start("shore cdc consumer", r.cdcc.Run)
	t, err := apply.OpenTarget(r.shoreDSN)
	if err != nil {
		return err
	}
	if r.arb, err = arbiter.New(arbiter.Config{Pool: r.sh.PG.Pool(), Target: t, ShoreNode: ShoreNode,
		Instance: "converge-arbiter", Clock: clock, Logger: r.o.Logger}); err != nil {
		return err
	}
	start("arbiter", func(ctx context.Context) error {
		defer t.Close()
		return r.arb.Run(ctx, 100*time.Millisecond)
	})
	return nil
}

// startShipSide runs the ship database's capture, a flapping link to the
// shore and the ship client with its remote applier.
func (r *run) startShipSide(ctx context.Context, brokers []string, start func(string, func(context.Context) error),
	cleanup *[]func()) error {
	c, err := shipdemo.StartCapture(ctx, shipdemo.CaptureOptions{DB: r.ship, StateFile: filepath.Join(r.o.Dir,
		"ship-capture.db"), Brokers: brokers, Logger: r.o.Logger})
	if err != nil {
		return err
	}
	start("ship capture", c.Run)
	u, err := url.Parse(r.sh.URL)
	if err != nil {
		return err
	}
	if r.proxy, err = weaklink.New(weaklink.Config{Target: u.Host}); err != nil {
		return err
	}
	addr, err := r.proxy.Start(ctx)
	if err != nil {
		return err
	}
	*cleanup = append(*cleanup, func() { _ = r.proxy.Stop(context.Background()) })
	shipRules := shipdemo.ShipRules(r.shipName)
	for i := range shipRules {
		shipRules[i].Direction = normalize.DirectionBoth
	}
	rs, err := normalize.NewRuleSet(shipRules...)
	if err != nil {
		return err
	}
	clock := relayclock.System{}
	if r.st, err = client.OpenStore(ctx, filepath.Join(r.o.Dir, "client.db"), "shipsync-client-"+shipdemo.Node, clock); err != nil {
		return err
	}
	*cleanup = append(*cleanup, func() { _ = r.st.Close() })
	tc, err := pki.Dir{Path: filepath.Join(r.o.Dir, "pki")}.ClientTLS("node-" + shipdemo.Node)
	if err != nil {
		return err
	}
	tr, err := client.NewTransport("https://"+addr, tc, 10*time.Second)
	if err != nil {
		return err
	}
	t, err := apply.OpenTarget(r.shipDSN)
	if err != nil {
		return err
	}
	*cleanup = append(*cleanup, func() { _ = t.Close() })
	if err := t.EnsureLedger(ctx); err != nil {
		return err
	}
	ra, err := remote.New(remote.Config{Target: t, Rules: rs, Clock: clock, ShoreNodeID: ShoreNode, Logger: r.o.Logger})
	if err != nil {
		return err
	}
	r.cl, err = client.Build(client.Parts{NodeID: shipdemo.Node, ConnectorID: "capture-" + shipdemo.Logical, Rules: rs,
		Store: r.st, Transport: tr, Clock: clock, Logger: r.o.Logger},
		client.Config{Brokers: brokers, TopicPrefix: shipdemo.TopicPrefix, ReceiptEvery: 200 * time.Millisecond,
			Remote: ra, CommandPollEvery: 200 * time.Millisecond,
			Backoff: client.Backoff{Base: 50 * time.Millisecond, Cap: time.Second}})
	if err != nil {
		return err
	}
	start("ship client", func(ctx context.Context) error {
		defer tr.Close()
		return r.cl.Run(ctx)
	})
	return nil
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
