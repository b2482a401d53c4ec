package shipbench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/internal/weaklink"
	"github.com/relayhq/relay/relayclock"
)

// Names of the benchmark's node, capture and tables.
const (
	node    = "ship-bench"
	logical = "bench"
	shipDB  = "ship"
)

// Options configure Run.
type Options struct {
	// PostgresURL (a scratch schema), MariaDB (a server DSN: Run creates
	// the shore's scratch database) and Dir (PKI, state files, the
	// client's log) are required; Relay is the relay binary the client
	// runs as.
	PostgresURL, MariaDB, Dir, Relay string
	// CPUProfile, when set, is where the client writes a CPU profile of
	// its run.
	CPUProfile string
	// Events is the BULK backlog: one insert of each of Rows narrow rows,
	// then updates of random ones. Defaults 1,000,000 and 50,000.
	Events, Rows int
	// Critical CRITICAL events are written once a fifth of the backlog is
	// terminal (default 20).
	Critical int
	// The link: Rate bytes/s each way (default 128 KiB/s), Latency one way
	// (default 300 ms: a 600 ms round trip), CutProbability of a
	// connection being cut mid-request (default 0.02), Outage the length
	// of one outage once 40 % of the backlog is terminal (default 15 s; 0
	// below zero: none).
	Rate           int
	Latency        time.Duration
	CutProbability float64
	Outage         time.Duration
	// Partitions of the BULK topic (default 4); Uploads in flight (default
	// 6, any number of them of one partition).
	Partitions, Uploads int
	// FullAnswers runs the client with --full-answers (the answers' full
	// form, to compare the bytes coming down).
	FullAnswers bool
	// ApplyAfterUpload keeps the shore's applier stopped until the shore
	// has received every event, as if it ran on other machines: the upload
	// phase then measures the client and the link without the applier (and
	// its databases) competing for the same cores. The CRITICAL events and
	// the outage are triggered by events received instead of receipts, and
	// the CRITICAL latency includes the wait for the applier.
	ApplyAfterUpload bool
	// Timeout bounds the drain (default 1 h).
	Timeout time.Duration
	// Seed makes the backlog and the cuts repeatable.
	Seed uint64
	// Progress receives progress lines (default: none).
	Progress io.Writer
}

func (o *Options) defaults() error {
	if o.PostgresURL == "" || o.MariaDB == "" || o.Dir == "" || o.Relay == "" {
		return errors.New("shipbench: PostgresURL, MariaDB, Dir and Relay are required")
	}
	o.Events = Positive(o.Events, 1_000_000)
	o.Rows = min(Positive(o.Rows, 50_000), o.Events)
	if o.Critical < 0 {
		o.Critical = 0
	} else if o.Critical == 0 {
		o.Critical = 20
	}
	o.Rate = Positive(o.Rate, 128<<10)
	if o.Latency <= 0 {
		o.Latency = 300 * time.Millisecond
	}
	if o.CutProbability == 0 {
		o.CutProbability = 0.02
	}
	if o.Outage == 0 {
		o.Outage = 15 * time.Second
	}
	o.Partitions = Positive(o.Partitions, 4)
	o.Uploads = Positive(o.Uploads, 6)
	if o.Timeout <= 0 {
		o.Timeout = time.Hour
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// Positive is v, or def when v is not positive: an option's default.
func Positive[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Result is what one run measured.
type Result struct {
	Events, Critical int
	// Build is how long writing the backlog into the topic took; Received
	// from the client's start until the shore had received every event
	// (the client's answer: RECEIVED); Drain until the last receipt.
	Build, Received, Drain time.Duration
	// Upload is the upload phase: from the first byte up the link until
	// the shore had received every event (seen on a one-second poll, so
	// up to a second long), Outage the time the link was down within it;
	// UploadBytes went up the link in that phase. DrainOutage is the
	// time the link was down within Drain.
	Upload, Outage, DrainOutage time.Duration
	UploadBytes                 int64
	// BytesUp and BytesDown crossed the proxy (TLS, HTTP, retries and
	// all, receipt pulls after the upload phase included); RawBytes is the
	// events' Protobuf size before compression.
	BytesUp, BytesDown, RawBytes int64
	// ShipDone is when the ship held a terminal result for every event
	// (receipts are pulled on the ship's pace, after the shore's last);
	// ShipBytesUp and ShipBytesDown had crossed the proxy then.
	ShipDone                   time.Duration
	ShipBytesUp, ShipBytesDown int64
	// Connections and Cuts of the proxy.
	Connections, Cuts int64
	// RSSPeak is the client process's peak resident memory (VmHWM).
	RSSPeak int64
	// UploadCPU is the CPU time (user + system) the client process had
	// used when the shore had received every event; CPU all it used until
	// it was stopped after the ship held every result.
	UploadCPU, CPU time.Duration
	// CriticalLatency are the CRITICAL events' times from being written to
	// the topic to their receipt on the shore, sorted; BulkBehind is how
	// many BULK events were still without a receipt when the last CRITICAL
	// one had its receipt.
	CriticalLatency []time.Duration
	BulkBehind      int64
	// Applied is the number of APPLIED receipts; Rows the shore table's
	// rows at the end.
	Applied int64
	Rows    int64
	Rate    int
	// Heartbeats is how many of the client's heartbeats the shore accepted
	// (its transfer samples), ActiveHeartbeats those reporting upload time,
	// HeartbeatsRefused how many the shore refused (the client's log).
	Heartbeats, ActiveHeartbeats, HeartbeatsRefused int64
}

// Utilisation is the share of the link's capacity used up during the
// upload phase (first byte up until the shore had received every event),
// the outage excluded.
func (r *Result) Utilisation() float64 {
	up := r.Upload - r.Outage
	if up <= 0 {
		return 0
	}
	return float64(r.UploadBytes) / (float64(r.Rate) * up.Seconds())
}

// DrainUtilisation is the share of the link's capacity used up from the
// client's start until the last receipt, the outage excluded: it counts
// the time the link waits for the shore to apply.
func (r *Result) DrainUtilisation() float64 {
	up := r.Drain - r.DrainOutage
	if up <= 0 {
		return 0
	}
	return float64(r.BytesUp) / (float64(r.Rate) * up.Seconds())
}

// BytesPerEvent is everything sent up the link per event.
func (r *Result) BytesPerEvent() float64 {
	return float64(r.BytesUp) / float64(max(r.Events+r.Critical, 1))
}

// Write prints the figures.
func (r *Result) Write(w io.Writer) {
	fmt.Fprintf(w, "backlog:      %d BULK changes of narrow rows (+ %d CRITICAL), written to the topic in %s\n",
		r.Events, r.Critical, r.Build.Round(time.Millisecond))
	fmt.Fprintf(w, "received:     every event by the shore after %s: %.0f events/s from the topic to an acknowledged upload\n",
		r.Received.Round(time.Second), float64(r.Events+r.Critical)/max(r.Received.Seconds(), 1e-3))
	fmt.Fprintf(w, "drain:        %s to the last receipt (upload phase %s, of which the link was down %s)\n",
		r.Drain.Round(time.Second), r.Upload.Round(time.Second), r.Outage.Round(time.Second))
	fmt.Fprintf(w, "link used:    %.1f %% of %d B/s over the upload phase while up (%d B); %.1f %% to the last receipt "+
		"(%d B up, %d B down; %d connections, %d cut)\n",
		100*r.Utilisation(), r.Rate, r.UploadBytes, 100*r.DrainUtilisation(), r.BytesUp, r.BytesDown, r.Connections, r.Cuts)
	fmt.Fprintf(w, "on the wire:  %.1f B per event up (events %.1f B each before compression)\n", r.BytesPerEvent(),
		float64(r.RawBytes)/float64(max(r.Events+r.Critical, 1)))
	n := float64(max(r.Events+r.Critical, 1))
	fmt.Fprintf(w, "both ways:    the ship held every result after %s: %.1f B per event up, %.1f B down, %.1f B in all\n",
		r.ShipDone.Round(time.Second), float64(r.ShipBytesUp)/n, float64(r.ShipBytesDown)/n,
		float64(r.ShipBytesUp+r.ShipBytesDown)/n)
	fmt.Fprintf(w, "client RSS:   peak %.1f MiB\n", float64(r.RSSPeak)/(1<<20))
	fmt.Fprintf(w, "client CPU:   %.1f s until every event was received (%.0f µs per event), %.1f s in all (%.0f µs per event)\n",
		r.UploadCPU.Seconds(), float64(r.UploadCPU.Microseconds())/n, r.CPU.Seconds(), float64(r.CPU.Microseconds())/n)
	if n := len(r.CriticalLatency); n > 0 {
		fmt.Fprintf(w, "CRITICAL:     written → receipt p50 %s, max %s; %d BULK events still waiting when the last one "+
			"was applied\n", r.CriticalLatency[n/2].Round(time.Millisecond), r.CriticalLatency[n-1].Round(time.Millisecond),
			r.BulkBehind)
	}
	fmt.Fprintf(w, "heartbeats:   %d accepted by the shore, %d of them with upload time; %d refused\n", r.Heartbeats,
		r.ActiveHeartbeats, r.HeartbeatsRefused)
	fmt.Fprintf(w, "result:       %d receipts APPLIED, shore table %d rows\n", r.Applied, r.Rows)
}

// Run builds the backlog, drains it and measures.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	res := &Result{Events: o.Events, Critical: o.Critical, Rate: o.Rate}
	tag := fmt.Sprintf("%x", rand.Uint32())
	shoreDSN, drop, err := mysqldsn.CreateScratch(ctx, o.MariaDB, "relay_shipbench_"+tag)
	if err != nil {
		return nil, fmt.Errorf("shipbench: shore database: %w", err)
	}
	defer drop()
	target, err := apply.OpenTarget(shoreDSN)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	for _, q := range ShoreTables {
		if _, err := target.DB().ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("shipbench: shore table: %w", err)
		}
	}
	sh, err := shipdemo.StartShore(ctx, shipdemo.ShoreOptions{PostgresURL: o.PostgresURL, TargetDSN: shoreDSN,
		PKIDir: filepath.Join(o.Dir, "pki"), Node: node, UrgentRules: []string{"alarm"}, // the CRITICAL rule
		// Room for every upload in flight plus the receipt pulls and the
		// heartbeats.
		Limits:     shore.Limits{NodeConcurrency: o.Uploads + 2},
		Rules:      ShoreRules,
		DeferApply: o.ApplyAfterUpload})
	if err != nil {
		return nil, err
	}
	defer sh.Close()

	bulkTopic, critTopic := BulkTopic, CritTopic
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(o.Partitions), bulkTopic),
		kfake.SeedTopics(1, critTopic))
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	// The backlog, built while the ship is offline.
	began := time.Now()
	gen := newGenerator(o.Seed)
	if err := gen.produce(ctx, brokers, bulkTopic, o.Rows, o.Events, o.Progress); err != nil {
		return nil, err
	}
	res.Build = time.Since(began)
	fmt.Fprintf(o.Progress, "backlog of %d events in %s written in %s\n", o.Events, bulkTopic, res.Build.Round(time.Millisecond))

	// The link.
	u, err := url.Parse(sh.URL)
	if err != nil {
		return nil, err
	}
	proxy, err := weaklink.New(weaklink.Config{Target: u.Host, Rate: o.Rate, Latency: o.Latency,
		CutProbability: o.CutProbability, Seed: int64(o.Seed)})
	if err != nil {
		return nil, err
	}
	addr, err := proxy.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = proxy.Stop(context.Background()) }()
	_, port, _ := net.SplitHostPort(addr)

	// The client, as its own process.
	files, err := writeClientFiles(o.Dir)
	if err != nil {
		return nil, err
	}
	cf, kf := "node-"+node+".crt", "node-"+node+".key"
	logf, err := os.Create(filepath.Join(o.Dir, "client.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cctx, stopClient := context.WithCancel(ctx)
	defer stopClient()
	cmd := exec.CommandContext(cctx, o.Relay, "shipsync", "client", "--brokers", strings.Join(brokers, ","),
		"--logical", logical, "--rules", files.rules, "--types", files.types, "--state", filepath.Join(o.Dir, "client.db"),
		"--url", "https://127.0.0.1:"+port, "--ca", filepath.Join(o.Dir, "pki", "ca.crt"),
		"--cert", filepath.Join(o.Dir, "pki", cf), "--key", filepath.Join(o.Dir, "pki", kf),
		"--uploads", strconv.Itoa(o.Uploads), "--partition-in-flight", strconv.Itoa(o.Uploads), "--backoff-cap", "5s", "--progress-every", "10s", "--log-level", "warn",
		"--memprofile", filepath.Join(o.Dir, "client.heap"), "--full-answers="+strconv.FormatBool(o.FullAnswers))
	if o.CPUProfile != "" {
		cmd.Args = append(cmd.Args, "--cpuprofile", o.CPUProfile)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	began = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("shipbench: start the client: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		mu          sync.Mutex
		critWritten = map[int64]time.Time{} // alarm offset → written
		firstUp     time.Time               // the last poll before the first byte up
		lastIdle    = began
		outageAt    time.Time
		outageDone  bool
		critDone    bool
	)
	total := int64(o.Events + o.Critical)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.Now().Add(o.Timeout)
	var receipts int64
	for receipts < total {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-exited:
			return nil, fmt.Errorf("shipbench: the client exited early (%v); see %s", err, logf.Name())
		case <-tick.C:
		}
		now := time.Now()
		if rss := PeakRSS(cmd.Process.Pid); rss > res.RSSPeak {
			res.RSSPeak = rss
		}
		st := proxy.Stats()
		if firstUp.IsZero() {
			if st.BytesUp > 0 {
				firstUp = lastIdle
			} else {
				lastIdle = now
			}
		}
		// Cheap counts (the tables grow to millions of rows and this runs
		// every second on the same two cores): received = every stream's
		// released events plus those held past a gap; receipts by the
		// highest receipt id, confirmed with an exact count at the end.
		var inbox int64
		if res.Received == 0 {
			if err := sh.PG.Pool().QueryRow(ctx, "SELECT coalesce(sum(next_sequence - 1 + held), 0)::bigint "+
				"FROM sync_stream WHERE origin_node_id = $1", node).Scan(&inbox); err != nil {
				return nil, fmt.Errorf("shipbench: count received: %w", err)
			}
			if inbox >= total && o.ApplyAfterUpload {
				if err := sh.StartApplier(ctx); err != nil {
					return nil, err
				}
				fmt.Fprintf(o.Progress, "every event received: the shore's applier starts\n")
			}
			if inbox >= total {
				res.Received = time.Since(began)
				res.Upload, res.UploadBytes = now.Sub(firstUp), proxy.Stats().BytesUp
				res.UploadCPU = ProcessCPU(cmd.Process.Pid)
				if !outageAt.IsZero() {
					res.Outage = min(o.Outage, now.Sub(outageAt))
				}
			}
		}
		if err := sh.PG.Pool().QueryRow(ctx, "SELECT coalesce(max(receipt_id), 0) FROM sync_event_receipt").
			Scan(&receipts); err != nil {
			return nil, fmt.Errorf("shipbench: count receipts: %w", err)
		}
		if receipts >= total {
			if err := sh.PG.Pool().QueryRow(ctx, "SELECT count(*) FROM sync_event_receipt WHERE origin_node_id = $1",
				node).Scan(&receipts); err != nil {
				return nil, fmt.Errorf("shipbench: count receipts: %w", err)
			}
		}
		// How far the drain is: receipts, or events received while the
		// applier waits for the upload to end.
		done := receipts
		if o.ApplyAfterUpload && res.Received == 0 {
			done = inbox
		}
		if !critDone && done >= total/5 {
			critDone = true
			mu.Lock()
			if err := gen.critical(ctx, brokers, critTopic, o.Critical, critWritten); err != nil {
				mu.Unlock()
				return nil, err
			}
			mu.Unlock()
			fmt.Fprintf(o.Progress, "%d CRITICAL events written with %d of %d events done\n", o.Critical, done, total)
		}
		if !outageDone && o.Outage > 0 && done >= total*2/5 {
			outageDone = true
			proxy.SetDown(true)
			outageAt = time.Now()
			fmt.Fprintf(o.Progress, "link down for %s\n", o.Outage)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(o.Outage):
			}
			proxy.SetDown(false)
			res.DrainOutage = o.Outage
		}
		fmt.Fprintf(o.Progress, "%s: %d/%d receipts; link %d B up, %d B down, %d connections, %d cut; client RSS peak %.1f MiB\n",
			time.Since(began).Round(time.Second), receipts, total, st.BytesUp, st.BytesDown, st.Connections, st.Cuts,
			float64(res.RSSPeak)/(1<<20))
		if now.After(deadline) {
			return nil, fmt.Errorf("shipbench: not drained after %s (%d of %d receipts)", o.Timeout, receipts, total)
		}
	}
	res.Drain = time.Since(began)
	st := proxy.Stats()
	res.BytesUp, res.BytesDown, res.Connections, res.Cuts = st.BytesUp, st.BytesDown, st.Connections, st.Cuts
	// The shore holds every receipt; the ship pulls them at its own pace.
	// Until it holds them all, the answers it still needs have not crossed
	// the link: count the bytes down at that moment.
	if err := waitShipTerminal(ctx, filepath.Join(o.Dir, "client.db"), total, deadline, exited); err != nil {
		return nil, err
	}
	res.ShipDone = time.Since(began)
	st = proxy.Stats()
	res.ShipBytesUp, res.ShipBytesDown = st.BytesUp, st.BytesDown
	stopClient()
	<-exited
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
	}
	if rss := PeakRSS(cmd.Process.Pid); rss > res.RSSPeak {
		res.RSSPeak = rss
	}
	return res, measure(ctx, o, res, sh, target, critWritten)
}

// measure reads the results: receipts, rows, CRITICAL latencies, raw sizes.
func measure(ctx context.Context, o Options, res *Result, sh *shipdemo.Shore, target *apply.Target,
	critWritten map[int64]time.Time) error {
	pool := sh.PG.Pool()
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM sync_event_receipt WHERE origin_node_id = $1 AND result = 'APPLIED'",
		node).Scan(&res.Applied); err != nil {
		return err
	}
	if err := target.DB().QueryRowContext(ctx, "SELECT count(*) FROM tank").Scan(&res.Rows); err != nil {
		return err
	}
	if err := pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE active_seconds > 0) FROM sync_node_sample "+
		"WHERE node_id = $1", node).Scan(&res.Heartbeats, &res.ActiveHeartbeats); err != nil {
		return err
	}
	log, err := os.ReadFile(filepath.Join(o.Dir, "client.log"))
	if err != nil {
		return err
	}
	for l := range strings.Lines(string(log)) {
		// "refused" since this build; an older client logs the shore's 4xx.
		if strings.Contains(l, "shipsync client: heartbeat") &&
			(strings.Contains(l, "heartbeat refused") || strings.Contains(l, "answered HTTP 4")) {
			res.HeartbeatsRefused++
		}
	}
	st, err := client.OpenStore(ctx, filepath.Join(o.Dir, "client.db"), "", relayclock.System{})
	if err != nil {
		return err
	}
	defer st.Close()
	evs, err := st.Events(ctx)
	if err != nil {
		return err
	}
	var lastCrit time.Time
	for _, e := range evs {
		res.RawBytes += int64(e.RawBytes)
		if e.RuleID != "alarm" {
			continue
		}
		var decided time.Time
		if err := pool.QueryRow(ctx, "SELECT decided_at FROM sync_event_receipt WHERE origin_node_id = $1 AND event_id = $2",
			node, e.ID).Scan(&decided); err != nil {
			return fmt.Errorf("shipbench: receipt of a CRITICAL event: %w", err)
		}
		if w, ok := critWritten[e.Offset]; ok {
			res.CriticalLatency = append(res.CriticalLatency, decided.Sub(w))
		}
		if decided.After(lastCrit) {
			lastCrit = decided
		}
	}
	slices.Sort(res.CriticalLatency)
	if !lastCrit.IsZero() {
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM sync_event_receipt r JOIN sync_inbox_event e "+
			"ON e.origin_node_id = r.origin_node_id AND e.event_id = r.event_id "+
			"WHERE r.origin_node_id = $1 AND r.decided_at > $2 AND e.rule_id = 'tank'", node, lastCrit).
			Scan(&res.BulkBehind); err != nil {
			return fmt.Errorf("shipbench: count BULK after CRITICAL: %w", err)
		}
	}
	return nil
}

// PeakRSS reads a process's peak resident set (VmHWM) in bytes; 0 when
// it cannot.
func PeakRSS(pid int) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// ProcessCPU reads the CPU time (user + system) a process has used so far
// from /proc; 0 when it cannot. The kernel reports it in USER_HZ ticks,
// which Linux fixes at 100 per second for user space.
func ProcessCPU(pid int) time.Duration {
	return statCPU("/proc/" + strconv.Itoa(pid) + "/stat")
}

// ThreadCPU is ProcessCPU for one thread (tid) of process pid.
func ThreadCPU(pid, tid int) time.Duration {
	return statCPU("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/stat")
}

// statCPU reads utime + stime from a /proc stat file; 0 when it cannot.
func statCPU(path string) time.Duration {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start with the state (field 3).
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * (time.Second / 100)
}

type clientFiles struct{ rules, types string }

// rulesFile is the client's rules: tank BULK, alarm CRITICAL.
func rulesFile() map[string]any {
	return map[string]any{"rules": []map[string]any{
		{"id": "tank", "version": 1, "direction": "UPLINK", "database": shipDB, "table": "tank",
			"key_columns": []string{"id"}, "priority": "BULK"},
		{"id": "alarm", "version": 1, "direction": "UPLINK", "database": shipDB, "table": "alarm",
			"key_columns": []string{"id"}, "priority": "CRITICAL"},
	}}
}

// Rules returns the client's rules of the benchmark's tables.
func Rules() (*normalize.RuleSet, error) {
	data, err := json.Marshal(rulesFile())
	if err != nil {
		return nil, err
	}
	return normalize.LoadRules(bytes.NewReader(data))
}

// Types returns the column types of the benchmark's schema-less envelopes.
func Types() cdc.TypeMap {
	sync := map[string]cdc.ColumnType{
		"_sync_revision":   {Type: "string", Required: true},
		"_sync_origin":     {Type: "string", Required: true},
		"_sync_event_id":   {Type: "string"},
		"_sync_updated_at": {Type: "int64", Name: cdc.SemanticMicroTimestamp, Required: true},
	}
	tank := map[string]cdc.ColumnType{"id": {Type: "int64", Required: true}, "level": {Type: "int32", Required: true},
		"note": {Type: "string"}}
	alarm := map[string]cdc.ColumnType{"id": {Type: "int64", Required: true}, "code": {Type: "string", Required: true}}
	for k, v := range sync {
		tank[k], alarm[k] = v, v
	}
	return cdc.TypeMap{shipDB + ".tank": tank, shipDB + ".alarm": alarm}
}

// writeClientFiles writes Rules and Types as the client's files.
func writeClientFiles(dir string) (clientFiles, error) {
	f := clientFiles{rules: filepath.Join(dir, "rules.json"), types: filepath.Join(dir, "types.json")}
	for path, v := range map[string]any{f.rules: rulesFile(), f.types: Types()} {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return f, err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}

// Names of the benchmark's node, capture, database and topics.
const (
	Node      = node
	Logical   = logical
	BulkTopic = "sync.cdc." + logical + "." + shipDB + ".tank"
	CritTopic = "sync.cdc." + logical + "." + shipDB + ".alarm"
)

// ShoreTables are the shore database's tables, as CREATE TABLE statements.
var ShoreTables = []string{
	"CREATE TABLE tank (id BIGINT PRIMARY KEY, level INT NOT NULL, note VARCHAR(16) NULL, " + apply.SyncColumns + ")",
	"CREATE TABLE alarm (id BIGINT PRIMARY KEY, code VARCHAR(16) NOT NULL, " + apply.SyncColumns + ")",
}

// ShoreRules are the shore's rules of the benchmark's tables.
var ShoreRules = []shipdemo.ShoreRule{
	{ID: "tank", Table: "tank", Columns: []string{"id", "level", "note"}},
	{ID: "alarm", Table: "alarm", Columns: []string{"id", "code"}},
}

// WriteBacklog writes events BULK change envelopes of rows narrow rows
// (one insert each, then updates of random ones) to BulkTopic.
func WriteBacklog(ctx context.Context, brokers []string, rows, events int, seed uint64) error {
	return newGenerator(seed).produce(ctx, brokers, BulkTopic, rows, events, io.Discard)
}

// generator writes Debezium MySQL-connector envelopes (schemas disabled)
// of the ship's tables, with the revisions the ship's triggers would
// have written (time-based UUIDs, as MariaDB's UUID()).
type generator struct {
	r   *rand.Rand
	rev map[int64]string
	pos int64
	ts  time.Time
}

func newGenerator(seed uint64) *generator {
	return &generator{r: rand.New(rand.NewPCG(seed, 17)), rev: map[int64]string{},
		ts: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)}
}

func (g *generator) next() time.Time {
	g.ts = g.ts.Add(time.Duration(1+g.r.IntN(20)) * time.Second)
	g.pos += 300 + int64(g.r.IntN(200))
	return g.ts
}

func newRevision() string {
	u, err := uuid.NewUUID()
	if err != nil {
		return uuid.NewString()
	}
	return u.String()
}

type tankRow struct {
	ID        int64   `json:"id"`
	Level     int32   `json:"level"`
	Note      *string `json:"note"`
	Revision  string  `json:"_sync_revision"`
	Origin    string  `json:"_sync_origin"`
	EventID   *string `json:"_sync_event_id"`
	UpdatedAt int64   `json:"_sync_updated_at"`
}

type envelope struct {
	Before      any            `json:"before"`
	After       any            `json:"after"`
	Source      map[string]any `json:"source"`
	Op          string         `json:"op"`
	TsMs        int64          `json:"ts_ms"`
	Transaction any            `json:"transaction"`
}

func (g *generator) source(table string, at time.Time) map[string]any {
	return map[string]any{"version": "2.7.3.Final", "connector": "mysql", "name": logical, "ts_ms": at.UnixMilli(),
		"snapshot": "false", "db": shipDB, "table": table, "server_id": 1, "gtid": nil, "file": "mysql-bin.000042",
		"pos": g.pos, "row": 0, "thread": 12, "query": nil}
}

// produce writes rows inserts, then updates of random rows up to events
// records in all.
func (g *generator) produce(ctx context.Context, brokers []string, topic string, rows, events int, progress io.Writer) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(50_000))
	if err != nil {
		return err
	}
	defer cl.Close()
	var firstErr error
	var emu sync.Mutex
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			emu.Lock()
			firstErr = cmpErr(firstErr, err)
			emu.Unlock()
		}
	}
	last := map[int64]tankRow{}
	notes := []string{"ok", "sounded", "transfer", "settling", "low"}
	for i := range events {
		var ev envelope
		var id int64
		at := g.next()
		if i < rows {
			id = int64(i + 1)
			row := tankRow{ID: id, Level: int32(g.r.IntN(90_000)), Revision: newRevision(), Origin: node,
				UpdatedAt: at.UnixMicro()}
			ev = envelope{After: row, Op: "c"}
			last[id] = row
		} else {
			id = 1 + g.r.Int64N(int64(rows))
			before := last[id]
			after := before
			after.Level = int32(g.r.IntN(90_000))
			if g.r.IntN(4) == 0 {
				n := notes[g.r.IntN(len(notes))]
				after.Note = &n
			}
			after.Revision, after.UpdatedAt = newRevision(), at.UnixMicro()
			ev = envelope{Before: before, After: after, Op: "u"}
			last[id] = after
		}
		ev.Source, ev.TsMs = g.source("tank", at), at.Add(80*time.Millisecond).UnixMilli()
		value, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		key := []byte(`{"id":` + strconv.FormatInt(id, 10) + `}`)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: value}, done)
		if (i+1)%200_000 == 0 {
			fmt.Fprintf(progress, "backlog: %d records written\n", i+1)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return firstErr
}

// critical writes n CRITICAL inserts into topic (one partition) and
// records when each offset was written.
func (g *generator) critical(ctx context.Context, brokers []string, topic string, n int, written map[int64]time.Time) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := range n {
		at := g.next()
		row := map[string]any{"id": i + 1, "code": fmt.Sprintf("BILGE-%02d", i%7), "_sync_revision": newRevision(),
			"_sync_origin": node, "_sync_event_id": nil, "_sync_updated_at": at.UnixMicro()}
		value, err := json.Marshal(envelope{After: row, Op: "c", Source: g.source("alarm", at), TsMs: at.UnixMilli()})
		if err != nil {
			return err
		}
		r := &kgo.Record{Topic: topic, Key: []byte(`{"id":` + strconv.Itoa(i+1) + `}`), Value: value}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return err
		}
		written[r.Offset] = time.Now()
	}
	return nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// waitShipTerminal waits until the client's state store (read only, beside
// the running client) holds a terminal result for total uplink events, the
// client exits, or deadline passes.
func waitShipTerminal(ctx context.Context, path string, total int64, deadline time.Time, exited <-chan error) error {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return fmt.Errorf("shipbench: client state: %w", err)
	}
	defer db.Close()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM event_state WHERE direction = 'up' AND state = 'TERMINAL'").
			Scan(&n); err != nil {
			return fmt.Errorf("shipbench: client state: %w", err)
		}
		if n >= total {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("shipbench: the ship holds %d of %d results after the shore had them all", n, total)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			return fmt.Errorf("shipbench: the client exited before it held every result (%v)", err)
		case <-tick.C:
		}
	}
}
