package shipdemo

import (
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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// Node is the demo ship's node id; Logical its capture's logical name.
const (
	Node    = "ship-demo"
	Logical = "demo"
)

// Options configure Run.
type Options struct {
	// PostgresURL is the shore's PostgreSQL (a scratch schema: Run migrates
	// it). Required.
	PostgresURL string
	// MariaDB is the server Run creates the ship's and the shore's scratch
	// databases on (a go-sql-driver DSN; its database part is ignored).
	// Required.
	MariaDB string
	// Dir holds the PKI and the SQLite files. Required.
	Dir string
	// Rows is how many rows the workload inserts per table (default 500);
	// it then updates Updates rows (default Rows) and deletes Deletes
	// (default Rows/10), at random, from Writers goroutines (default 2).
	Rows, Updates, Deletes, Writers int
	// Seed makes the workload repeatable.
	Seed uint64
	// Progress receives a progress line every ProgressEvery (default 1 s)
	// and the reconciliation; nil: none.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Timeout bounds the wait for the chain to go quiet after the workload
	// (default 2 min).
	Timeout time.Duration
	// Logger receives the parts' logs (default: discarded).
	Logger *slog.Logger
	// Keep leaves the scratch MariaDB databases in place (their names are
	// in Result).
	Keep bool
}

func (o *Options) defaults() error {
	if o.PostgresURL == "" || o.MariaDB == "" || o.Dir == "" {
		return errors.New("shipdemo: PostgresURL, MariaDB and Dir are required")
	}
	if o.Rows <= 0 {
		o.Rows = 500
	}
	if o.Updates < 0 || o.Deletes < 0 {
		return errors.New("shipdemo: Updates and Deletes must not be negative")
	}
	if o.Updates == 0 {
		o.Updates = o.Rows
	}
	if o.Deletes == 0 {
		o.Deletes = o.Rows / 10
	}
	o.Deletes = min(o.Deletes, o.Rows)
	if o.Writers <= 0 {
		o.Writers = 2
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Check is one reconciliation check.
type Check struct {
	Name    string
	OK      bool
	Details []string
}

// Result is what Run measured and checked.
type Result struct {
	Writes   int // row changes the workload made
	Events   int // events the client produced
	Stats    client.Stats
	Counts   client.Counts
	Checks   []Check
	Elapsed  time.Duration
	ShipDB   string
	ShoreDB  string
	ShipRows int
	// Batches counts the upload batches the shore decoded by the form of
	// their event list (shore.FormRows, shore.FormColumns).
	Batches map[string]int
}

// batchForms reads relay_shipsync_shore_batches_total from h.
func batchForms(h *shore.Handler) (map[string]int, error) {
	reg := prometheus.NewRegistry()
	for _, c := range h.Collectors() {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, mf := range mfs {
		if mf.GetName() != "relay_shipsync_shore_batches_total" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				out[l.GetValue()] += int(m.GetCounter().GetValue())
			}
		}
	}
	return out, nil
}

// OK reports whether every check passed.
func (r *Result) OK() bool { return ChecksOK(r.Checks) }

// Write prints the checks.
func (r *Result) Write(w io.Writer) { WriteChecks(w, r.Checks) }

// ChecksOK reports whether there are checks and every one passed.
func ChecksOK(checks []Check) bool {
	for _, c := range checks {
		if !c.OK {
			return false
		}
	}
	return len(checks) > 0
}

// WriteChecks prints checks, a line each with its details below.
func WriteChecks(w io.Writer, checks []Check) {
	for _, c := range checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s %s\n", mark, c.Name)
		for _, d := range c.Details {
			fmt.Fprintf(w, "       %s\n", d)
		}
	}
}

// table is one synced table of the demo.
type table struct {
	name     string
	ddl      string // columns before the platform's
	columns  []string
	priority normalize.Priority
	timeCol  string
	row      func(r *rand.Rand, id int64) []any // values of columns[1:]
}

var tables = []table{
	{name: "crew", ddl: "id BIGINT PRIMARY KEY, name VARCHAR(80) NOT NULL, rank_code VARCHAR(16) NOT NULL, " +
		"wage DECIMAL(12,2) NOT NULL, updated_at DATETIME(6) NOT NULL",
		columns: []string{"id", "name", "rank_code", "wage", "updated_at"}, priority: normalize.PriorityHigh,
		timeCol: "updated_at",
		row: func(r *rand.Rand, id int64) []any {
			ranks := []string{"master", "chief-off", "2nd-off", "bosun", "AB", "cook"}
			return []any{fmt.Sprintf("sailor %d-%d", id, r.IntN(1000)), ranks[r.IntN(len(ranks))],
				fmt.Sprintf("%d.%02d", 1500+r.IntN(9000), r.IntN(100)), nil}
		}},
	{name: "fuel_log", ddl: "id BIGINT PRIMARY KEY, tank VARCHAR(8) NOT NULL, litres DECIMAL(12,3) NOT NULL, " +
		"note TEXT NULL, logged_at DATETIME(6) NOT NULL",
		columns: []string{"id", "tank", "litres", "note", "logged_at"}, priority: normalize.PriorityNormal,
		timeCol: "logged_at",
		row: func(r *rand.Rand, id int64) []any {
			var note any
			if r.IntN(3) == 0 {
				note = fmt.Sprintf("sounding %d, trim %d", r.IntN(400), r.IntN(9)-4)
			}
			return []any{fmt.Sprintf("T%d", 1+r.IntN(8)), fmt.Sprintf("-%d.%03d", r.IntN(90000), r.IntN(1000))[1:], note, nil}
		}},
}

// run is one demo's parts.
type run struct {
	o        Options
	log      *slog.Logger
	clock    relayclock.System
	ship     *sql.DB
	shoreDB  *sql.DB
	pg       *relaypgx.Driver
	st       *client.Store
	cl       *client.Client
	shipName string
	shoreNm  string
	brokers  []string
	handler  *shore.Handler
}

// Run runs the demo and returns its result; an error means the demo could
// not run (a server unreachable), not that a check failed.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	began := time.Now()
	r := &run{o: o, log: o.Logger}
	var cleanup []func()
	defer func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}()
	tag := fmt.Sprintf("%x", rand.Uint32())
	shipDSN, dropShip, err := mysqldsn.CreateScratch(ctx, o.MariaDB, "relay_shipdemo_ship_"+tag)
	if err != nil {
		return nil, fmt.Errorf("shipdemo: ship database: %w", err)
	}
	shoreDSN, dropShore, err := mysqldsn.CreateScratch(ctx, o.MariaDB, "relay_shipdemo_shore_"+tag)
	if err != nil {
		dropShip()
		return nil, fmt.Errorf("shipdemo: shore database: %w", err)
	}
	r.shipName, r.shoreNm = "relay_shipdemo_ship_"+tag, "relay_shipdemo_shore_"+tag
	if !o.Keep {
		cleanup = append(cleanup, dropShip, dropShore)
	}
	if r.ship, err = sql.Open("mysql", shipDSN); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = r.ship.Close() })
	if r.shoreDB, err = sql.Open("mysql", shoreDSN); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = r.shoreDB.Close() })
	if err := CreateTables(ctx, r.ship, r.shoreDB); err != nil {
		return nil, err
	}
	names := TableNames()
	if _, err := capture.Install(ctx, r.ship, capture.InstallConfig{NodeID: Node, Tables: names}); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "ship database %s and shore database %s: tables %s, capture triggers installed\n",
		r.shipName, r.shoreNm, strings.Join(names, ", "))

	// The CDC queue: an in-process Kafka-API cluster with one topic per
	// table, 4 partitions each.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, Topics(r.shipName)...))
	if err != nil {
		return nil, fmt.Errorf("shipdemo: kafka: %w", err)
	}
	cleanup = append(cleanup, cluster.Close)
	r.brokers = cluster.ListenAddrs()

	sh, err := StartShore(ctx, ShoreOptions{PostgresURL: o.PostgresURL, TargetDSN: shoreDSN,
		PKIDir: filepath.Join(o.Dir, "pki"), Node: Node, Rules: ShoreRules(), Logger: r.log})
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, sh.Close)
	r.pg = sh.PG
	r.handler = sh.Handler
	url := sh.URL
	fmt.Fprintf(o.Progress, "shore listening on %s (mutual TLS), applying to %s\n", url, r.shoreNm)

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	fail := make(chan error, 2)
	stopAll := func() { cancel(); wg.Wait() }
	if err := r.startCapture(runCtx, &wg, fail); err != nil {
		stopAll()
		return nil, err
	}
	if err := r.startClient(runCtx, &wg, fail, url); err != nil {
		stopAll()
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = r.st.Close() }, stopAll)

	res := &Result{ShipDB: r.shipName, ShoreDB: r.shoreNm}
	wl := NewWorkload(WorkloadOptions{Rows: o.Rows, Updates: o.Updates, Deletes: o.Deletes, Writers: o.Writers,
		Seed: o.Seed}, r.ship)
	progress := func(final bool) {
		s := r.cl.Stats()
		line := fmt.Sprintf("writes %d | client read %d, produced %d, uploaded %d in %d batches, terminal %d | %d B on the wire",
			wl.Writes(), s.Read, s.Produced, s.Uploaded, s.Batches, s.Terminal, s.WireBytes)
		if final {
			line += " (quiet)"
		}
		fmt.Fprintln(o.Progress, line)
	}
	werr := make(chan error, 1)
	go func() { werr <- wl.Run(runCtx) }()
	tick := time.NewTicker(o.ProgressEvery)
	defer tick.Stop()
	var writeErr error
	written := false
	deadline := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-fail:
			return nil, err
		case writeErr = <-werr:
			if writeErr != nil {
				return nil, fmt.Errorf("shipdemo: workload: %w", writeErr)
			}
			written = true
			deadline = time.Now().Add(o.Timeout)
			continue
		case <-tick.C:
		}
		progress(false)
		if !written {
			continue
		}
		s := r.cl.Stats()
		if s.Produced >= int64(wl.Writes()) && r.cl.Waiting() == 0 {
			progress(true)
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(o.Progress, "not quiet after %s: %s\n", o.Timeout, r.cl.Progress())
			break
		}
	}
	res.Writes = wl.Writes()
	res.Stats = r.cl.Stats()
	res.Events = int(res.Stats.Produced)
	if res.Batches, err = batchForms(r.handler); err != nil {
		return nil, err
	}
	if res.Counts, err = r.st.Counts(ctx); err != nil {
		return nil, err
	}
	if err := r.reconcile(ctx, res); err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(began)
	return res, nil
}

// startCapture runs the trigger capture into the topics.
func (r *run) startCapture(ctx context.Context, wg *sync.WaitGroup, fail chan<- error) error {
	c, err := StartCapture(ctx, CaptureOptions{DB: r.ship, StateFile: filepath.Join(r.o.Dir, "capture.db"),
		Brokers: r.brokers, Logger: r.log})
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := c.Run(ctx); err != nil {
			fail <- err
		}
	}()
	return nil
}

// startClient runs the ship client.
func (r *run) startClient(ctx context.Context, wg *sync.WaitGroup, fail chan<- error, url string) error {
	rs, err := normalize.NewRuleSet(ShipRules(r.shipName)...)
	if err != nil {
		return err
	}
	st, err := client.OpenStore(ctx, filepath.Join(r.o.Dir, "client.db"), "shipsync-client-"+Node, r.clock)
	if err != nil {
		return err
	}
	r.st = st
	tc, err := pki.Dir{Path: filepath.Join(r.o.Dir, "pki")}.ClientTLS("node-" + Node)
	if err != nil {
		return err
	}
	tr, err := client.NewTransport(url, tc, 30*time.Second)
	if err != nil {
		return err
	}
	c, err := client.Build(client.Parts{NodeID: Node, ConnectorID: "capture-" + Logical, Rules: rs, Store: st,
		Transport: tr, Clock: r.clock, Logger: r.log},
		client.Config{Brokers: r.brokers, TopicPrefix: TopicPrefix,
			ReceiptEvery: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	r.cl = c
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer tr.Close()
		if err := c.Run(ctx); err != nil && ctx.Err() == nil {
			fail <- fmt.Errorf("shipdemo: client: %w", err)
		}
	}()
	return nil
}
