package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/shipbench"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// SessionLocks is how many connections a shore process with an applier
// holds outside its pool: each of the applier's two engines (its queue and
// the urgent queue) keeps its instance lock, a PostgreSQL session advisory
// lock, on a connection taken out of the pool for as long as it runs, and
// the pool may open another in its place.
const SessionLocks = 2

// Defaults of Options.
const (
	NodesDefault     = 1000
	EventsDefault    = 30
	BatchDefault     = 10
	JitterDefault    = 30 * time.Second
	PoolDefault      = 16
	HeartbeatDefault = 10 * time.Second
	PollDefault      = time.Second
	TimeoutDefault   = 30 * time.Minute
)

// Options configure Run.
type Options struct {
	// PostgresURL (a scratch schema of the shore), MariaDB (a server DSN:
	// Run creates the shore's scratch business database), Dir (the PKI and
	// the shore's log) and Relay (the relay binary the shore runs as) are
	// required.
	PostgresURL, MariaDB, Dir, Relay string
	// Nodes reconnecting (default 1,000), each with a backlog of Events
	// INSERTs (default 30) uploaded Batch events at a time (default 10).
	Nodes, Events, Batch int
	// Jitter: each node reconnects after a uniform random wait in
	// [0, Jitter) from the end of the outage (default 30 s; negative: all at
	// once).
	Jitter time.Duration
	// Pool is the shore's PostgreSQL pool maximum (pool_max_conns, default
	// 16). The shore process's connection budget is Pool plus
	// SessionLocks: the run fails when more connections of the shore are
	// seen.
	Pool int
	// Limits are the shore's request limits (zero fields: its defaults).
	Limits shore.Limits
	// Heartbeat is each node's heartbeat interval (default 10 s), Poll the
	// wait between receipt pulls that found nothing new (default 1 s, with
	// up to as much again of jitter).
	Heartbeat, Poll time.Duration
	// Timeout bounds the run from the end of the outage (default 30 min).
	Timeout time.Duration
	// Seed makes the jitters repeatable.
	Seed uint64
	// Clock times the run and its waits (default the system clock).
	Clock relaytype.Clock
	// Progress receives a progress line every 5 s (default: none).
	Progress io.Writer
}

func (o *Options) defaults() error {
	if o.PostgresURL == "" || o.MariaDB == "" || o.Dir == "" || o.Relay == "" {
		return errors.New("fleet: PostgresURL, MariaDB, Dir and Relay are required")
	}
	if o.Nodes < 0 || o.Events < 0 || o.Batch < 0 || o.Pool < 0 || o.Heartbeat < 0 || o.Poll < 0 {
		return errors.New("fleet: Nodes, Events, Batch, Pool, Heartbeat and Poll must not be negative")
	}
	if o.Nodes > 100_000 || o.Events > 100_000 {
		return errors.New("fleet: at most 100,000 nodes of at most 100,000 events each")
	}
	o.Nodes = shipbench.Positive(o.Nodes, NodesDefault)
	o.Events = shipbench.Positive(o.Events, EventsDefault)
	o.Batch = shipbench.Positive(o.Batch, BatchDefault)
	o.Pool = shipbench.Positive(o.Pool, PoolDefault)
	if o.Jitter == 0 {
		o.Jitter = JitterDefault
	}
	o.Jitter = max(o.Jitter, 0)
	o.Heartbeat = shipbench.Positive(o.Heartbeat, HeartbeatDefault)
	o.Poll = shipbench.Positive(o.Poll, PollDefault)
	o.Timeout = shipbench.Positive(o.Timeout, TimeoutDefault)
	if o.Clock == nil {
		o.Clock = relayclock.System{}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// Result is what one run measured.
type Result struct {
	Nodes, EventsPerNode, Events int
	Jitter                       time.Duration
	Limits                       shore.Limits
	// Wall is from the end of the outage until the last node caught up
	// (held a terminal result for every event of its backlog); CatchUp are
	// the nodes' own catch-up times, from their reconnect, sorted.
	Wall    time.Duration
	CatchUp []time.Duration
	// Requests the nodes sent (retries included), by answer: OK, Limited
	// (429), Failed (any other retryable failure: network, 5xx).
	Requests, OK, Limited, Failed int64
	// ShoreLimited is the shore's own count of 429 answers.
	ShoreLimited int64
	// RetryAfterMin and RetryAfterMax are the Retry-After values seen;
	// Honoured counts the retries after a 429 sent no earlier than its
	// Retry-After said, Early those sent before (a client bug); Waited is
	// the mean wait before such a retry.
	RetryAfterMin, RetryAfterMax time.Duration
	Honoured, Early              int64
	Waited                       time.Duration
	// InFlightPeak is the most requests the shore had in flight at once
	// (its own high-water mark), InFlightLimit its global limit;
	// ClientInFlightPeak the most requests the nodes had open at once.
	InFlightPeak, InFlightLimit, ClientInFlightPeak int64
	// ConnectedPeak and QueuePeak are the highest values sampled (every
	// 250 ms) of the shore's connected nodes (a request in the last two
	// heartbeat intervals) and reconnect queue depth (429s whose
	// Retry-After has not passed).
	ConnectedPeak, QueuePeak int64
	// ShoreRSS is the shore process's peak resident memory (VmHWM) at the
	// end of the run.
	ShoreRSS int64
	// PGPeak is the most connections of the shore process seen in
	// pg_stat_activity (sampled every 50 ms), PGLockedPeak the most of them
	// seen idle outside a transaction with an advisory lock (session
	// locks); Pool is the pool's maximum and Budget the process's (Pool +
	// SessionLocks).
	PGPeak, PGLockedPeak, Pool, Budget int64
	// Reconciliation: inbox rows of the fleet's nodes, events missing from
	// it, rows not of the backlogs; terminal results the nodes hold by
	// result, events without one, results received twice or for events the
	// node did not send; rows of the shore's business table.
	InboxRows, Missing, Unexpected int64
	Results                        map[string]int64
	NotTerminal, DupReceipts       int64
	UnknownReceipts, TargetRows    int64
}

// Problems lists every check that failed (none: the run holds).
func (r *Result) Problems() []string {
	var p []string
	if r.InboxRows != int64(r.Events) || r.Missing != 0 || r.Unexpected != 0 {
		p = append(p, fmt.Sprintf("inbox: %d rows for %d events (%d missing, %d not of the backlogs)",
			r.InboxRows, r.Events, r.Missing, r.Unexpected))
	}
	if r.NotTerminal != 0 || r.DupReceipts != 0 || r.UnknownReceipts != 0 {
		p = append(p, fmt.Sprintf("receipts: %d events without a terminal result at their node, %d received twice, %d unknown",
			r.NotTerminal, r.DupReceipts, r.UnknownReceipts))
	}
	if r.Early != 0 {
		p = append(p, fmt.Sprintf("%d retries sent before their Retry-After", r.Early))
	}
	if r.PGPeak > r.Budget {
		p = append(p, fmt.Sprintf("PostgreSQL: %d connections of the shore, over its budget of %d (pool %d + %d session locks)",
			r.PGPeak, r.Budget, r.Pool, SessionLocks))
	}
	if r.InFlightPeak > r.InFlightLimit {
		p = append(p, fmt.Sprintf("%d requests in flight at the shore, over its limit of %d", r.InFlightPeak, r.InFlightLimit))
	}
	return p
}

// Quantile returns the q-quantile (0–1) of the nodes' catch-up times.
func (r *Result) Quantile(q float64) time.Duration {
	if len(r.CatchUp) == 0 {
		return 0
	}
	return r.CatchUp[min(len(r.CatchUp)-1, int(q*float64(len(r.CatchUp))))]
}

// Write prints the figures and the reconciliation.
func (r *Result) Write(w io.Writer) {
	fmt.Fprintf(w, "fleet:        %d nodes × %d events = %d events, reconnecting with 0–%s jitter\n",
		r.Nodes, r.EventsPerNode, r.Events, r.Jitter)
	fmt.Fprintf(w, "shore limits: %s; PostgreSQL pool %d, process budget %d\n", r.Limits, r.Pool, r.Budget)
	fmt.Fprintf(w, "caught up:    every node after %s from the end of the outage; per node from its reconnect "+
		"p50 %s, p90 %s, p99 %s, max %s\n", r.Wall.Round(time.Millisecond), r.Quantile(0.5).Round(time.Millisecond),
		r.Quantile(0.9).Round(time.Millisecond), r.Quantile(0.99).Round(time.Millisecond), r.Quantile(1).Round(time.Millisecond))
	fmt.Fprintf(w, "requests:     %d sent (%d ok, %d answered 429, %d other retryable failures); the shore counted %d 429s\n",
		r.Requests, r.OK, r.Limited, r.Failed, r.ShoreLimited)
	if r.Limited > 0 {
		fmt.Fprintf(w, "Retry-After:  %s–%s; %d retries after a 429 waited at least that long (mean wait %s), %d did not\n",
			r.RetryAfterMin, r.RetryAfterMax, r.Honoured, r.Waited.Round(time.Millisecond), r.Early)
	}
	fmt.Fprintf(w, "in flight:    at most %d requests at the shore (global limit %d); the nodes had at most %d open\n",
		r.InFlightPeak, r.InFlightLimit, r.ClientInFlightPeak)
	fmt.Fprintf(w, "shore gauges: at most %d nodes connected, %d requests told to come back and not yet due (sampled); "+
		"shore peak RSS %.0f MiB\n", r.ConnectedPeak, r.QueuePeak, float64(r.ShoreRSS)/(1<<20))
	fmt.Fprintf(w, "PostgreSQL:   at most %d connections of the shore seen (budget %d: pool %d + %d session locks); "+
		"at most %d seen idle holding a session lock\n", r.PGPeak, r.Budget, r.Pool, SessionLocks, r.PGLockedPeak)
	keys := make([]string, 0, len(r.Results))
	for k := range r.Results {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var res []string
	for _, k := range keys {
		res = append(res, fmt.Sprintf("%d %s", r.Results[k], k))
	}
	fmt.Fprintf(w, "reconciled:   inbox %d rows (%d missing, %d unexpected); at the nodes %s, %d not terminal, "+
		"%d duplicate and %d unknown receipts; shore table %d rows\n", r.InboxRows, r.Missing, r.Unexpected,
		strings.Join(res, ", "), r.NotTerminal, r.DupReceipts, r.UnknownReceipts, r.TargetRows)
	if p := r.Problems(); len(p) > 0 {
		fmt.Fprintf(w, "FAILED:       %s\n", strings.Join(p, "; "))
	} else {
		fmt.Fprintf(w, "result:       nothing lost, nothing duplicated, connections within budget\n")
	}
}

// run is one simulation in progress.
type run struct {
	o     Options
	url   string
	began time.Time
	// shoreLog is the shore's log file.
	shoreLog string
	// counters of every node
	requests, ok, limited, failed atomic.Int64
	honoured, early, waitedNS     atomic.Int64
	open, openPeak                atomic.Int64
	started, caughtUp             atomic.Int64
	mu                            sync.Mutex
	raMin, raMax                  time.Duration
}

// Run sets the shore up, starts it as a child process, lets the fleet
// reconnect and reconciles. A run that measured is returned with its
// Problems even when they are not empty; an error means it could not
// finish.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	o.Limits = o.Limits.WithDefaults()
	tag := fmt.Sprintf("%x", rand.Uint32())
	targetDSN, drop, err := mysqldsn.CreateScratch(ctx, o.MariaDB, "relay_fleet_"+tag)
	if err != nil {
		return nil, fmt.Errorf("fleet: shore database: %w", err)
	}
	defer drop()
	if err := createTables(ctx, targetDSN); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "registering %d nodes\n", o.Nodes)
	p := pki.Dir{Path: filepath.Join(o.Dir, "pki"), Clock: o.Clock}
	if err := register(ctx, o, p); err != nil {
		return nil, err
	}
	app := "relay-fleet-shore-" + tag
	shoreURL, err := dsn.WithParam(o.PostgresURL, "application_name", app)
	if err == nil {
		shoreURL, err = dsn.WithParam(shoreURL, "pool_max_conns", strconv.Itoa(o.Pool))
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: PostgresURL: %w", err)
	}
	sh, err := startShore(ctx, o, p, shoreURL, targetDSN)
	if err != nil {
		return nil, err
	}
	defer sh.stop()
	monitor, err := pgx.Connect(ctx, o.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("fleet: monitor connection: %w", dsn.Scrub(err, o.PostgresURL))
	}
	defer monitor.Close(context.Background())

	r := &run{o: o, url: sh.url, shoreLog: sh.logf.Name()}
	nodes := make([]*node, o.Nodes)
	for i := range nodes {
		if nodes[i], err = newNode(r, p, i); err != nil {
			return nil, err
		}
		defer nodes[i].tr.Close()
	}
	fmt.Fprintf(o.Progress, "shore at %s (pid %d); the outage ends: %d nodes reconnect within %s\n", sh.url,
		sh.cmd.Process.Pid, o.Nodes, o.Jitter)

	rctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var (
		pg pgPeaks
		g  gauges
	)
	sampled := make(chan error, 2)
	sctx, stopSampling := context.WithCancel(rctx)
	defer stopSampling()
	go func() { sampled <- samplePG(sctx, monitor, app, &pg) }()
	go func() { sampled <- sh.sampleShore(sctx, &g) }()
	r.began = o.Clock.Now()
	seeds := rand.New(rand.NewPCG(o.Seed, 29))
	var wg sync.WaitGroup
	errs := make(chan error, o.Nodes)
	for _, n := range nodes {
		n.rnd = rand.New(rand.NewPCG(seeds.Uint64(), seeds.Uint64()))
		if o.Jitter > 0 {
			n.jitter = time.Duration(n.rnd.Int64N(int64(o.Jitter)))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A node's own failure ends the run; the others then end with
			// the run's context, which says nothing more.
			if err := n.run(rctx); err != nil && rctx.Err() == nil {
				errs <- fmt.Errorf("node %s: %w", n.id, err)
				cancel()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if err := r.progress(rctx, done, &pg.total, &g, sh.exited); err != nil {
		cancel()
		<-done
		close(errs)
		return nil, errors.Join(append([]error{err}, slices.Collect(chanSeq(errs))...)...)
	}
	wall := o.Clock.Now().Sub(r.began)
	stopSampling()
	if err := errors.Join(<-sampled, <-sampled); err != nil {
		return nil, err
	}
	close(errs)
	if err := errors.Join(slices.Collect(chanSeq(errs))...); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	res := &Result{Nodes: o.Nodes, EventsPerNode: o.Events, Events: o.Nodes * o.Events, Jitter: o.Jitter, Limits: o.Limits,
		Wall: wall, Requests: r.requests.Load(), OK: r.ok.Load(), Limited: r.limited.Load(), Failed: r.failed.Load(),
		RetryAfterMin: r.raMin, RetryAfterMax: r.raMax, Honoured: r.honoured.Load(), Early: r.early.Load(),
		InFlightLimit: int64(o.Limits.GlobalConcurrency), ClientInFlightPeak: r.openPeak.Load(),
		PGPeak: pg.total.Load(), PGLockedPeak: pg.locked.Load(), Pool: int64(o.Pool),
		ConnectedPeak: g.connected.Load(), QueuePeak: g.queue.Load(),
		Budget: int64(o.Pool + SessionLocks), Results: map[string]int64{}}
	if n := res.Honoured + res.Early; n > 0 {
		res.Waited = time.Duration(r.waitedNS.Load() / n)
	}
	if err := sh.final(ctx, res); err != nil {
		return nil, err
	}
	res.ShoreRSS = shipbench.PeakRSS(sh.cmd.Process.Pid)
	for _, n := range nodes {
		res.CatchUp = append(res.CatchUp, n.caught.Sub(n.start))
		res.DupReceipts += n.dup
		res.UnknownReceipts += n.unknown
		for _, id := range n.ids {
			if rs, ok := n.results[id]; ok {
				res.Results[rs]++
			} else {
				res.NotTerminal++
			}
		}
	}
	slices.Sort(res.CatchUp)
	return res, reconcile(ctx, monitor, targetDSN, nodes, res)
}

func chanSeq[T any](c <-chan T) func(func(T) bool) {
	return func(yield func(T) bool) {
		for v := range c {
			if !yield(v) {
				return
			}
		}
	}
}

// createTables creates the shore's business table.
func createTables(ctx context.Context, targetDSN string) error {
	target, err := apply.OpenTarget(targetDSN)
	if err != nil {
		return err
	}
	defer target.Close()
	for _, q := range shipbench.ShoreTables {
		if _, err := target.DB().ExecContext(ctx, q); err != nil {
			return fmt.Errorf("fleet: shore table: %w", err)
		}
	}
	return nil
}

// NodeID names node i of the fleet.
func NodeID(i int) string { return fmt.Sprintf("ship-%05d", i) }

// register migrates the shore, makes the PKI and registers every node
// with its own certificate, allowed the rule of its backlog.
func register(ctx context.Context, o Options, p pki.Dir) error {
	d, err := shipdemo.SetupShore(ctx, shipdemo.ShoreOptions{PostgresURL: o.PostgresURL, PKIDir: p.Path, Node: NodeID(0),
		Rules: shipbench.ShoreRules[:1]})
	if err != nil {
		return err
	}
	defer d.Close()
	reg := shore.NewRegistry(d.Pool(), o.Clock)
	who := shore.Audit{Actor: "relay bench shipsync-fleet", Reason: "fleet simulation set-up"}
	for i := 1; i < o.Nodes; i++ {
		cert, err := p.IssueNode(NodeID(i), "")
		if err != nil {
			return err
		}
		if _, err := reg.Add(ctx, cert, who); err != nil {
			return err
		}
		if err := reg.AllowRule(ctx, NodeID(i), ruleID, 1, who); err != nil {
			return err
		}
	}
	return nil
}

// shoreProc is the shore child process.
type shoreProc struct {
	cmd        *exec.Cmd
	url        string
	metricsURL string
	exited     chan error
	cancel     context.CancelFunc
	logf       *os.File
}

// startShore starts `relay shipsync shore` with the fleet's limits and
// pool, and waits until it listens.
func startShore(ctx context.Context, o Options, p pki.Dir, pgURL, targetDSN string) (*shoreProc, error) {
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(o.Dir, "shore.log"))
	if err != nil {
		return nil, err
	}
	l := o.Limits
	cctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(cctx, o.Relay, "shipsync", "shore", "--postgres", pgURL, "--target", targetDSN,
		"--tls-cert", filepath.Join(p.Path, pki.ServerCertFile), "--tls-key", filepath.Join(p.Path, pki.ServerKeyFile),
		"--client-ca", filepath.Join(p.Path, pki.CACertFile), "--addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:"+metricsPort, "--log-level", "warn",
		"--global-concurrency", strconv.Itoa(l.GlobalConcurrency), "--global-rate", strconv.FormatFloat(l.GlobalRate, 'f', -1, 64),
		"--global-burst", strconv.Itoa(l.GlobalBurst), "--node-concurrency", strconv.Itoa(l.NodeConcurrency),
		"--node-rate", strconv.FormatFloat(l.NodeRate, 'f', -1, 64), "--node-burst", strconv.Itoa(l.NodeBurst))
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		_ = logf.Close()
		return nil, err
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		_ = logf.Close()
		return nil, fmt.Errorf("fleet: start the shore: %w", err)
	}
	s := &shoreProc{cmd: cmd, metricsURL: "http://127.0.0.1:" + metricsPort + "/metrics", exited: make(chan error, 1),
		cancel: cancel, logf: logf}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if u, ok := strings.CutPrefix(line, "shipsync shore: listening on "); ok {
				listening <- strings.Fields(u)[0]
			}
		}
		s.exited <- cmd.Wait()
	}()
	select {
	case s.url = <-listening:
		return s, nil
	case err := <-s.exited:
		s.exited <- err
		s.stop()
		return nil, fmt.Errorf("fleet: the shore exited at start (%v); %s ends: %s", err, logf.Name(), tail(logf.Name()))
	case <-time.After(time.Minute):
		s.stop()
		return nil, fmt.Errorf("fleet: the shore did not listen within a minute; %s ends: %s", logf.Name(), tail(logf.Name()))
	}
}

// tail returns the last KiB of the file at path, on one line (the shore's
// own log: no row values), for an error that must be read without it.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	if len(data) > 1024 {
		data = data[len(data)-1024:]
	}
	return strings.Join(strings.Fields(string(data)), " ")
}

// stop ends the shore (SIGTERM) and waits for it.
func (s *shoreProc) stop() {
	s.cancel()
	err := <-s.exited
	s.exited <- err
	_ = s.logf.Close()
}

// Series of the shore's metrics the bench reads.
const (
	seriesInFlightPeak = "relay_shipsync_shore_requests_in_flight_peak"
	seriesConnected    = "relay_shipsync_shore_connected_nodes"
	seriesQueue        = "relay_shipsync_shore_reconnect_queue_depth"
)

// scrape reads the shore's metrics: its series (name and labels) and
// their values.
func (s *shoreProc) scrape(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fleet: shore metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("fleet: shore metrics: %w", err)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if series, value, ok := sample(line); ok {
			m[series] = value
		}
	}
	for _, name := range []string{seriesInFlightPeak, seriesConnected, seriesQueue} {
		if _, ok := m[name]; !ok {
			return nil, fmt.Errorf("fleet: the shore's metrics have no %s", name)
		}
	}
	return m, nil
}

// final reads the shore's in-flight peak and its count of 429s.
func (s *shoreProc) final(ctx context.Context, res *Result) error {
	m, err := s.scrape(ctx)
	if err != nil {
		return err
	}
	res.InFlightPeak = int64(m[seriesInFlightPeak])
	for series, v := range m {
		if strings.HasPrefix(series, "relay_shipsync_shore_requests_total{") &&
			strings.Contains(series, `outcome="ERROR_CODE_RATE_LIMITED"`) {
			res.ShoreLimited += int64(v)
		}
	}
	return nil
}

// gauges are the highest values of the shore's gauges sampled, and the
// latest.
type gauges struct{ connected, queue, lastConnected, lastQueue atomic.Int64 }

// sampleShore reads the shore's gauges every 250 ms until ctx ends.
func (s *shoreProc) sampleShore(ctx context.Context, g *gauges) error {
	return every(ctx, 250*time.Millisecond, func() error {
		m, err := s.scrape(ctx)
		if err != nil {
			return err
		}
		c, q := int64(m[seriesConnected]), int64(m[seriesQueue])
		g.lastConnected.Store(c)
		g.lastQueue.Store(q)
		raise(&g.connected, c)
		raise(&g.queue, q)
		return nil
	})
}

// every runs f, then again every d, until ctx ends (nil) or f fails
// while ctx lasts (its error).
func every(ctx context.Context, d time.Duration, f func() error) error {
	for {
		if err := f(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
}

// sample splits a line of the Prometheus text format into the series
// (name and labels) and the value; comments and blank lines are not.
func sample(line string) (series string, value float64, ok bool) {
	if line == "" || line[0] == '#' {
		return "", 0, false
	}
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(line[i+1:], 64)
	return line[:i], v, err == nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// pgPeaks are the highest connection counts sampled.
type pgPeaks struct{ total, locked atomic.Int64 }

func raise(peak *atomic.Int64, n int64) {
	for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
	}
}

// samplePG samples the connections of application app every 50 ms until
// ctx ends: all of them, and those holding a session advisory lock (an
// advisory lock on a connection idle outside any transaction).
func samplePG(ctx context.Context, conn *pgx.Conn, app string, peaks *pgPeaks) error {
	return every(ctx, 50*time.Millisecond, func() error {
		var total, locked int64
		err := conn.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE EXISTS (SELECT 1 FROM pg_locks l "+
			"WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted) AND a.state = 'idle') FROM pg_stat_activity a "+
			"WHERE a.application_name = $1", app).Scan(&total, &locked)
		if err != nil {
			return fmt.Errorf("fleet: sample pg_stat_activity: %w", err)
		}
		raise(&peaks.total, total)
		raise(&peaks.locked, locked)
		return nil
	})
}

// progress prints a line every 5 s until done, the shore exits or ctx
// ends.
func (r *run) progress(ctx context.Context, done <-chan struct{}, pgPeak *atomic.Int64, g *gauges, exited chan error) error {
	for {
		select {
		case <-done:
			return ctx.Err()
		case err := <-exited:
			exited <- err
			return fmt.Errorf("fleet: the shore exited during the run (%v); its log ends: %s", err, tail(r.shoreLog))
		case <-ctx.Done():
			return fmt.Errorf("fleet: stopped after %s with %d of %d nodes caught up (timeout %s): %w",
				r.o.Clock.Now().Sub(r.began).Round(time.Second), r.caughtUp.Load(), r.o.Nodes, r.o.Timeout, ctx.Err())
		case <-r.o.Clock.After(5 * time.Second):
		}
		fmt.Fprintf(r.o.Progress, "%s: %d nodes reconnected, %d caught up; %d requests, %d answered 429; "+
			"%d open; the shore sees %d nodes connected, %d told to come back; PostgreSQL peak %d (pool %d)\n",
			r.o.Clock.Now().Sub(r.began).Round(time.Second), r.started.Load(), r.caughtUp.Load(), r.requests.Load(),
			r.limited.Load(), r.open.Load(), g.lastConnected.Load(), g.lastQueue.Load(), pgPeak.Load(), r.o.Pool)
	}
}

// reconcile checks the inbox and the business table against the nodes'
// backlogs.
func reconcile(ctx context.Context, conn *pgx.Conn, targetDSN string, nodes []*node, res *Result) error {
	want := make(map[[2]string]bool, res.Events)
	for _, n := range nodes {
		for _, id := range n.ids {
			want[[2]string{n.id, id}] = true
		}
	}
	rows, err := conn.Query(ctx, "SELECT origin_node_id, event_id::text FROM sync_inbox_event")
	if err != nil {
		return fmt.Errorf("fleet: read the inbox: %w", err)
	}
	seen := make(map[[2]string]bool, res.Events)
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			rows.Close()
			return fmt.Errorf("fleet: read the inbox: %w", err)
		}
		res.InboxRows++
		if !want[k] || seen[k] {
			res.Unexpected++
		}
		seen[k] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("fleet: read the inbox: %w", err)
	}
	for k := range want {
		if !seen[k] {
			res.Missing++
		}
	}
	target, err := apply.OpenTarget(targetDSN)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := target.DB().QueryRowContext(ctx, "SELECT count(*) FROM tank").Scan(&res.TargetRows); err != nil {
		return fmt.Errorf("fleet: count the shore table: %w", err)
	}
	return nil
}
