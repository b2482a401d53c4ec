// Command peers measures relay against peer systems on one PostgreSQL, in one
// run, alternating the systems round by round (A B A B …). It is a separate
// module so that the peers never become dependencies of relay itself.
//
// Scenarios (docs/benchmarks.md):
//
//   - burn-down, unordered: insert N no-op jobs in batches, then process them
//     all; relay ModeUnordered vs River. Each setting is searched first.
//   - burn-down, per key: the same with 1,000 keys; relay ModePerKey (order per
//     key verified) vs River, which has no per-key ordering (unordered).
//   - continuous: a producer inserts at a fixed offered rate while the system
//     drains; sustained throughput and end-to-end latency p50/p99.
//   - strict FIFO: relay ModeFIFO vs a watermill-sql v4 subscriber on one topic,
//     global order verified.
//   - outbox relay: events written in business transactions, relayed to Redis
//     Streams and to Kafka (in-process kfake); relay's Dispatcher vs
//     watermill's Forwarder, the broker read back (every event, duplicates,
//     per-key order).
//   - pgbench: `pgbench -c 2 -j 2 -T 20` of a one-row insert transaction, the
//     commit rate of this PostgreSQL as a yardstick.
//
// Each job's worker/handler writes one row of an effect table. Every run is
// verified before it is reported: each job processed exactly once (store state
// and effect table) and, where claimed, in order per key. A run that lost,
// duplicated or reordered anything prints FAIL and the program exits non-zero.
//
//	go run . --n 100000 --rounds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay"
)

func main() {
	// Ctrl-C cancels the runs; each still drops its schema on the way out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// options are the parsed flags.
type options struct {
	postgres       string
	n              int
	rounds         int
	warmN          int
	keys           int
	riverWorkers   []int
	relaySettings  []relaySetting
	perKeyN        int
	orientN        int
	fifoN          int
	fifoBatch      int
	perKeySettings []relaySetting
	rates          []float64
	contSeconds    float64
	pgbenchSeconds int
	scenarios      []string
	outboxN        int
	outboxPeerN    int
	outboxKeys     int
	outboxPerTx    int
	outboxBatch    int
	outboxBrokers  []string
	redisAddr      string
	cpuProfile     string
}

// Scenario names for --scenarios.
const (
	scUnordered  = "unordered"
	scPerKey     = "per-key"
	scContinuous = "continuous"
	scFIFO       = "fifo"
	scOutbox     = "outbox"
	scPgbench    = "pgbench"
)

var allScenarios = []string{scUnordered, scPerKey, scContinuous, scFIFO, scOutbox, scPgbench}

func (o *options) has(sc string) bool { return slices.Contains(o.scenarios, sc) }

// result is one verified burn-down.
type result struct {
	N       int
	Insert  time.Duration
	Process time.Duration
}

func (r result) insertRate() float64  { return float64(r.N) / r.Insert.Seconds() }
func (r result) processRate() float64 { return float64(r.N) / r.Process.Seconds() }

// burnTimeout bounds one burn-down's processing.
const burnTimeout = 5 * time.Minute

// errFailed marks a run whose verification failed (FAIL already printed).
var errFailed = errors.New("FAIL: a run lost, duplicated or reordered jobs (see above)")

func parseFlags(args []string, out io.Writer) (*options, error) {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(out)
	o := &options{}
	fs.StringVar(&o.postgres, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL (a schema peers_<random> is created and dropped per run)")
	fs.IntVar(&o.n, "n", 100000, "jobs per burn-down run")
	fs.IntVar(&o.rounds, "rounds", 3, "measured rounds (each runs relay, then the peer)")
	fs.IntVar(&o.warmN, "warm-n", 8000, "jobs per warm-up run of the setting search (capped at --n)")
	fs.IntVar(&o.perKeyN, "perkey-n", 50000, "jobs per per-key burn-down run")
	fs.IntVar(&o.orientN, "orient-n", 10000, "jobs of the no-op orientation runs (0: skip)")
	fs.IntVar(&o.fifoN, "fifo-n", 30000, "messages per strict-FIFO run")
	fs.IntVar(&o.fifoBatch, "fifo-batch", relay.FIFOBatchMax, fmt.Sprintf("relay FIFOBatch of the strict-FIFO scenario (1..%d)", relay.FIFOBatchMax))
	fs.IntVar(&o.keys, "keys", 1000, "keys of the per-key burn-down (≤ --perkey-n)")
	riverW := fs.String("river-workers", "1000,2000,5000", "River MaxWorkers candidates searched in the warm-up")
	relayS := fs.String("relay-settings", "4x512x32,4x1024x64,8x1024x64", "relay WORKERSxBATCHSIZExTXBATCH candidates searched in the unordered warm-up")
	perKeyS := fs.String("perkey-settings", "4x256x32,8x512x32", "relay WORKERSxBATCHSIZExTXBATCH candidates searched in the per-key warm-up (BatchSize well below --keys)")
	rates := fs.String("rates", "1000,5000", "offered rates (msgs/s) of the continuous scenario")
	fs.Float64Var(&o.contSeconds, "cont-seconds", 6, "seconds of offered load per continuous run")
	fs.IntVar(&o.pgbenchSeconds, "pgbench-seconds", 20, "pgbench -T (0: skip the baseline)")
	fs.IntVar(&o.outboxN, "outbox-n", 100000, "events per relay outbox run")
	fs.IntVar(&o.outboxPeerN, "outbox-peer-n", 30000, "events per Forwarder outbox run (0: --outbox-n)")
	fs.IntVar(&o.outboxKeys, "outbox-keys", 1000, "keys of the outbox scenario")
	fs.IntVar(&o.outboxPerTx, "outbox-per-tx", 50, "events per business transaction of the outbox scenario")
	fs.IntVar(&o.outboxBatch, "outbox-batch", 0, "relay DispatcherConfig.BatchSize of the outbox scenario (0: the default)")
	brokers := fs.String("outbox-brokers", "redis,kafka", "outbox destinations: redis (Redis Streams at --redis), kafka (in-process kfake)")
	fs.StringVar(&o.redisAddr, "redis", "127.0.0.1:6379", "Redis server of the outbox scenario")
	scen := fs.String("scenarios", strings.Join(allScenarios, ","), "scenarios to run")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (relay and the peers alike: focus on a system's frames) to this file")
	quick := fs.Bool("quick", false, "CI configuration: small runs, one round, one setting each, no pgbench (correctness, not figures)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *quick {
		o.n, o.perKeyN, o.orientN, o.fifoN, o.rounds, o.warmN, o.keys = 3000, 3000, 1000, 3000, 1, 1000, 100
		*riverW, *relayS, *perKeyS, *rates = "1000", "4x256x32", "4x64x16", "500"
		o.contSeconds, o.pgbenchSeconds = 2, 0
		o.outboxN, o.outboxPeerN, o.outboxKeys, o.outboxPerTx = 3000, 1000, 100, 20
	}
	for _, f := range strings.Split(*riverW, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || w < 1 {
			return nil, fmt.Errorf("--river-workers: bad value %q", f)
		}
		o.riverWorkers = append(o.riverWorkers, w)
	}
	var err error
	if o.relaySettings, err = parseRelaySettings("--relay-settings", *relayS); err != nil {
		return nil, err
	}
	if o.perKeySettings, err = parseRelaySettings("--perkey-settings", *perKeyS); err != nil {
		return nil, err
	}
	for _, f := range strings.Split(*rates, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("--rates: bad value %q", f)
		}
		o.rates = append(o.rates, r)
	}
	for _, f := range strings.Split(*brokers, ",") {
		f = strings.TrimSpace(f)
		if f != brokerRedis && f != brokerKafka {
			return nil, fmt.Errorf("--outbox-brokers: unknown broker %q (have %s, %s)", f, brokerRedis, brokerKafka)
		}
		o.outboxBrokers = append(o.outboxBrokers, f)
	}
	if o.outboxPeerN == 0 {
		o.outboxPeerN = o.outboxN
	}
	for _, f := range strings.Split(*scen, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allScenarios, f) {
			return nil, fmt.Errorf("--scenarios: unknown scenario %q (have %s)", f, strings.Join(allScenarios, ", "))
		}
		o.scenarios = append(o.scenarios, f)
	}
	switch {
	case o.n < 1 || o.rounds < 1 || o.warmN < 1:
		return nil, errors.New("--n, --rounds and --warm-n must be ≥ 1")
	case o.perKeyN < 1 || o.fifoN < 1:
		return nil, errors.New("--perkey-n and --fifo-n must be ≥ 1")
	case o.fifoBatch < 1 || o.fifoBatch > relay.FIFOBatchMax:
		return nil, fmt.Errorf("--fifo-batch %d: want 1..%d", o.fifoBatch, relay.FIFOBatchMax)
	case o.keys < 1 || o.keys > o.perKeyN:
		return nil, fmt.Errorf("--keys %d: want 1..--perkey-n (%d)", o.keys, o.perKeyN)
	case o.contSeconds <= 0 || o.pgbenchSeconds < 0:
		return nil, errors.New("--cont-seconds must be > 0 and --pgbench-seconds ≥ 0")
	case o.outboxKeys < 1 || o.outboxPerTx < 1 || o.outboxBatch < 0 || o.outboxN < o.outboxKeys || o.outboxPeerN < o.outboxKeys:
		return nil, errors.New("--outbox-keys and --outbox-per-tx must be ≥ 1, --outbox-batch ≥ 0, --outbox-n and --outbox-peer-n ≥ --outbox-keys")
	}
	o.warmN = min(o.warmN, o.n)
	return o, nil
}

// parseRelaySettings parses a list of WORKERSxBATCHSIZExTXBATCH.
func parseRelaySettings(flagName, list string) ([]relaySetting, error) {
	var out []relaySetting
	for _, f := range strings.Split(list, ",") {
		parts := strings.Split(strings.TrimSpace(f), "x")
		var v [3]int
		ok := len(parts) == 3
		for i := 0; ok && i < 3; i++ {
			n, err := strconv.Atoi(parts[i])
			ok = err == nil && n >= 1
			v[i] = n
		}
		if !ok {
			return nil, fmt.Errorf("%s: bad value %q (want WORKERSxBATCHSIZExTXBATCH)", flagName, f)
		}
		out = append(out, relaySetting{Workers: v[0], BatchSize: v[1], TxBatch: v[2]})
	}
	return out, nil
}

// summaryRow is one line of the closing table.
type summaryRow struct {
	scenario, relay, peer, ratio, goal string
}

// bench is one run of the program.
type bench struct {
	o       *options
	out     io.Writer
	failed  bool
	summary []summaryRow
}

// verified runs f and prints its line (label, then ok and line(r), or FAIL).
func verified[R any](b *bench, label string, f func() (R, error), line func(R) string) (R, bool) {
	r, err := f()
	if err != nil {
		b.failed = true
		fmt.Fprintf(b.out, "  %-52s FAIL: %v\n", label, err)
		return r, false
	}
	fmt.Fprintf(b.out, "  %-52s ok  %s\n", label, line(r))
	return r, true
}

func burnLine(r result) string {
	return fmt.Sprintf("insert %8.0f jobs/s  process %8.0f jobs/s", r.insertRate(), r.processRate())
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	b := &bench{o: o, out: out}
	started := time.Now()
	if err := b.printMachine(ctx); err != nil {
		return err
	}

	relayS, riverW := o.relaySettings[0], o.riverWorkers[0]
	if o.has(scUnordered) {
		relayS, riverW = b.search(ctx, "unordered", 0, o.relaySettings, o.riverWorkers)
		if b.failed {
			return errFailed
		}
		b.burnDown(ctx, "burn-down, unordered", o.n, 0, relayS, riverW)
		if !b.failed && o.orientN > 0 {
			b.orientation(ctx, relayS, riverW)
		}
	}
	if o.has(scPerKey) && !b.failed {
		// River has no keys: it runs its unordered best setting.
		perKeyS, _ := b.search(ctx, fmt.Sprintf("per key, %d keys", o.warmKeys()), o.warmKeys(), o.perKeySettings, nil)
		if !b.failed {
			b.burnDown(ctx, fmt.Sprintf("burn-down, per key (%d keys)", o.keys), o.perKeyN, o.keys, perKeyS, riverW)
		}
	}
	if o.has(scContinuous) && !b.failed {
		for _, rate := range o.rates {
			b.continuous(ctx, rate, relayS, riverW)
		}
	}
	if o.has(scFIFO) && !b.failed {
		b.fifo(ctx)
	}
	if o.has(scOutbox) && !b.failed {
		for _, kind := range o.outboxBrokers {
			b.outbox(ctx, kind)
		}
	}
	if b.failed {
		return errFailed
	}
	if o.has(scPgbench) && o.pgbenchSeconds > 0 {
		fmt.Fprintf(out, "\n== pgbench baseline: pgbench -n -c 2 -j 2 -T %d, one-row INSERT per transaction\n", o.pgbenchSeconds)
		tps, err := runPgbench(ctx, o.postgres, o.pgbenchSeconds)
		switch {
		case errors.Is(err, errPgbenchMissing):
			fmt.Fprintln(out, "  pgbench not installed: skipped")
		case err != nil:
			return err
		default:
			fmt.Fprintf(out, "  tps %.0f\n", tps)
			b.summary = append(b.summary, summaryRow{"pgbench one-row insert, 2 clients", fmt.Sprintf("%.0f tps", tps), "", "", ""})
		}
	}

	fmt.Fprintf(out, "\n== summary (medians; relay/peer ratio of medians)\n\n| scenario | relay | peer | relay/peer | goal |\n|---|---|---|---|---|\n")
	for _, r := range b.summary {
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s |\n", r.scenario, r.relay, r.peer, r.ratio, r.goal)
	}
	fmt.Fprintf(out, "\nall runs verified: every job processed exactly once (and in order per key where claimed), every outbox event in the broker; wall time %s\n",
		time.Since(started).Round(time.Second))
	return nil
}

// printMachine prints the cores and the server's version and settings.
func (b *bench) printMachine(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, b.o.postgres)
	if err != nil {
		return fmt.Errorf("PostgreSQL is not reachable: %w", err)
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return err
	}
	var settings []string
	for _, name := range []string{"shared_buffers", "synchronous_commit", "fsync", "wal_level", "max_wal_size", "max_connections", "autovacuum"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return err
		}
		settings = append(settings, name+"="+v)
	}
	fmt.Fprintf(b.out, "machine: %d cores (GOMAXPROCS %d), %s/%s, %s\nPostgreSQL %s: %s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), version, strings.Join(settings, " "))
	return nil
}

// search runs every candidate setting once on a warm-n burn-down (keyed when
// keys > 0), alternating systems, and returns the fastest of each (River: 0
// when it has no candidates).
func (b *bench) search(ctx context.Context, name string, keys int, relayS []relaySetting, riverW []int) (relaySetting, int) {
	o := b.o
	fmt.Fprintf(b.out, "\n== setting search: burn-down, %s, n=%d per run\n", name, o.warmN)
	var bestRiver, bestRelay int
	var bestRiverRate, bestRelayRate float64
	for i := range max(len(riverW), len(relayS)) {
		if i < len(relayS) {
			s := relayS[i]
			if r, ok := verified(b, "relay "+s.String(), func() (result, error) { return runRelayBurn(ctx, o.postgres, o.warmN, keys, s) }, burnLine); ok && r.processRate() > bestRelayRate {
				bestRelayRate, bestRelay = r.processRate(), i
			}
		}
		if i < len(riverW) {
			w := riverW[i]
			if r, ok := verified(b, fmt.Sprintf("River MaxWorkers=%d", w), func() (result, error) { return runRiverBurn(ctx, o.postgres, o.warmN, w, false) }, burnLine); ok && r.processRate() > bestRiverRate {
				bestRiverRate, bestRiver = r.processRate(), w
			}
		}
	}
	return relayS[bestRelay], bestRiver
}

// warmKeys is the key count of the per-key setting search: --keys, but at
// least four messages per key.
func (o *options) warmKeys() int { return max(1, min(o.keys, o.warmN/4)) }

// burnDown runs the rounds of a burn-down scenario of n jobs (keys 0:
// unordered).
func (b *bench) burnDown(ctx context.Context, name string, n, keys int, rs relaySetting, riverW int) {
	o := b.o
	mode := "ModeUnordered"
	if keys > 0 {
		mode = "ModePerKey, order per key verified"
	}
	fmt.Fprintf(b.out, "\n== %s: n=%d, rounds=%d\n", name, n, o.rounds)
	var relayRes, riverRes []result
	for round := 1; round <= o.rounds; round++ {
		if r, ok := verified(b, fmt.Sprintf("round %d relay", round), func() (result, error) { return runRelayBurn(ctx, o.postgres, n, keys, rs) }, burnLine); ok {
			relayRes = append(relayRes, r)
		}
		if r, ok := verified(b, fmt.Sprintf("round %d River", round), func() (result, error) { return runRiverBurn(ctx, o.postgres, n, riverW, false) }, burnLine); ok {
			riverRes = append(riverRes, r)
		}
	}
	if b.failed {
		return
	}
	riverNote := ""
	if keys > 0 {
		riverNote = ", unordered: River has no per-key ordering"
	}
	fmt.Fprintf(b.out, "\n| system | setting | process min | process median | process max | insert median |\n|---|---|---|---|---|---|\n")
	rows := []struct {
		name, setting string
		rs            []result
	}{
		{"relay", mode + " " + rs.String(), relayRes},
		{"River", fmt.Sprintf("v0.51.2 MaxWorkers=%d%s", riverW, riverNote), riverRes},
	}
	for _, row := range rows {
		p := values(row.rs, result.processRate)
		in := values(row.rs, result.insertRate)
		fmt.Fprintf(b.out, "| %s | %s | %.0f jobs/s | %.0f jobs/s | %.0f jobs/s | %.0f jobs/s |\n",
			row.name, row.setting, p[0], median(p), p[len(p)-1], median(in))
	}
	relayMed, riverMed := median(values(relayRes, result.processRate)), median(values(riverRes, result.processRate))
	insRatio := median(values(relayRes, result.insertRate)) / median(values(riverRes, result.insertRate))
	fmt.Fprintf(b.out, "\nrelay/River (median processing): %.2f×   (median insert: %.2f×)\n", relayMed/riverMed, insRatio)
	goal := "≥ 2×"
	if keys > 0 {
		goal = "≥ 1.5× (River unordered)"
	}
	b.summary = append(b.summary, summaryRow{
		scenario: fmt.Sprintf("%s, n=%d", name, n),
		relay:    fmt.Sprintf("%.0f jobs/s (%s)", relayMed, mode),
		peer:     fmt.Sprintf("%.0f jobs/s (River MaxWorkers=%d%s)", riverMed, riverW, riverNote),
		ratio:    fmt.Sprintf("%.2f×", relayMed/riverMed),
		goal:     goal,
	})
}

// orientation runs one true no-op burn-down per system (no effect row; the
// job states are verified): what each costs without the effect write, to set
// beside the figures for no-op work. Not part of any ratio.
func (b *bench) orientation(ctx context.Context, rs relaySetting, riverW int) {
	o := b.o
	fmt.Fprintf(b.out, "\n== orientation: burn-down, unordered, true no-op jobs (no effect row), n=%d, one run each\n", o.orientN)
	verified(b, "relay "+rs.String(), func() (result, error) { return runRelayBurn(ctx, o.postgres, o.orientN, noEffect, rs) }, burnLine)
	verified(b, fmt.Sprintf("River MaxWorkers=%d", riverW), func() (result, error) { return runRiverBurn(ctx, o.postgres, o.orientN, riverW, true) }, burnLine)
}

// fifo runs the rounds of the strict-FIFO scenario: relay with a Handler (one
// statement per message, as the watermill handler), relay with a
// BatchHandler (the run of heads applied as one pipelined batch of the same
// statements), and the watermill-sql subscriber, alternating.
func (b *bench) fifo(ctx context.Context) {
	o := b.o
	fmt.Fprintf(b.out, "\n== strict FIFO, one queue, global order verified: n=%d, rounds=%d\n", o.fifoN, o.rounds)
	var relayRes, batchRes, wmRes []result
	for round := 1; round <= o.rounds; round++ {
		if r, ok := verified(b, fmt.Sprintf("round %d relay Handler", round), func() (result, error) { return runRelayFIFO(ctx, o.postgres, o.fifoN, o.fifoBatch, false) }, burnLine); ok {
			relayRes = append(relayRes, r)
		}
		if r, ok := verified(b, fmt.Sprintf("round %d relay BatchHandler", round), func() (result, error) { return runRelayFIFO(ctx, o.postgres, o.fifoN, o.fifoBatch, true) }, burnLine); ok {
			batchRes = append(batchRes, r)
		}
		if r, ok := verified(b, fmt.Sprintf("round %d watermill-sql", round), func() (result, error) { return runWatermillFIFO(ctx, o.postgres, o.fifoN) }, burnLine); ok {
			wmRes = append(wmRes, r)
		}
	}
	if b.failed {
		return
	}
	relaySetting := fmt.Sprintf("ModeFIFO FIFOBatch=%d, Handler (a statement per message)", o.fifoBatch)
	batchSetting := fmt.Sprintf("ModeFIFO FIFOBatch=%d, BatchHandler (the heads' statements as one pipelined batch)", o.fifoBatch)
	wmSetting := "watermill-sql v4.1.2 subscriber, SubscribeBatchSize 100 (default)"
	fmt.Fprintf(b.out, "\n| system | setting | process min | process median | process max | insert median |\n|---|---|---|---|---|---|\n")
	for _, row := range []struct {
		name, setting string
		rs            []result
	}{{"relay", relaySetting, relayRes}, {"relay", batchSetting, batchRes}, {"watermill-sql", wmSetting, wmRes}} {
		p := values(row.rs, result.processRate)
		fmt.Fprintf(b.out, "| %s | %s | %.0f msgs/s | %.0f msgs/s | %.0f msgs/s | %.0f msgs/s |\n",
			row.name, row.setting, p[0], median(p), p[len(p)-1], median(values(row.rs, result.insertRate)))
	}
	relayMed, batchMed, wmMed := median(values(relayRes, result.processRate)), median(values(batchRes, result.processRate)),
		median(values(wmRes, result.processRate))
	fmt.Fprintf(b.out, "\nrelay/watermill-sql (median processing): Handler %.2f×, BatchHandler %.2f×\n", relayMed/wmMed, batchMed/wmMed)
	for _, r := range []struct {
		setting string
		med     float64
	}{{relaySetting, relayMed}, {batchSetting, batchMed}} {
		b.summary = append(b.summary, summaryRow{
			scenario: fmt.Sprintf("strict FIFO, n=%d", o.fifoN),
			relay:    fmt.Sprintf("%.0f msgs/s (%s)", r.med, r.setting),
			peer:     fmt.Sprintf("%.0f msgs/s (%s)", wmMed, wmSetting),
			ratio:    fmt.Sprintf("%.2f×", r.med/wmMed),
			goal:     "≥ 1.5×",
		})
	}
}

// continuous runs the rounds of the continuous scenario at one offered rate.
func (b *bench) continuous(ctx context.Context, rate float64, rs relaySetting, riverW int) {
	o := b.o
	n := int(rate * o.contSeconds)
	fmt.Fprintf(b.out, "\n== continuous: offered %.0f msgs/s for %gs (n=%d), rounds=%d\n", rate, o.contSeconds, n, o.rounds)
	line := func(r contResult) string {
		return fmt.Sprintf("sustained %6.0f msgs/s  p50 %8s  p99 %8s", r.rate(), r.P50.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond))
	}
	var relayRes, riverRes []contResult
	for round := 1; round <= o.rounds; round++ {
		if r, ok := verified(b, fmt.Sprintf("round %d relay", round), func() (contResult, error) { return runRelayContinuous(ctx, o.postgres, n, rate, 0, rs) }, line); ok {
			relayRes = append(relayRes, r)
		}
		if r, ok := verified(b, fmt.Sprintf("round %d River", round), func() (contResult, error) { return runRiverContinuous(ctx, o.postgres, n, rate, riverW) }, line); ok {
			riverRes = append(riverRes, r)
		}
	}
	if b.failed {
		return
	}
	fmt.Fprintf(b.out, "\n| system | setting | sustained median | p50 min / median / max | p99 min / median / max |\n|---|---|---|---|---|\n")
	ms := func(d float64) string { return time.Duration(d).Round(100 * time.Microsecond).String() }
	for _, row := range []struct {
		name, setting string
		rs            []contResult
	}{
		{"relay", "ModeUnordered " + rs.String(), relayRes},
		{"River", fmt.Sprintf("v0.51.2 MaxWorkers=%d", riverW), riverRes},
	} {
		p50 := values(row.rs, func(r contResult) float64 { return float64(r.P50) })
		p99 := values(row.rs, func(r contResult) float64 { return float64(r.P99) })
		fmt.Fprintf(b.out, "| %s | %s | %.0f msgs/s | %s / %s / %s | %s / %s / %s |\n", row.name, row.setting,
			median(values(row.rs, contResult.rate)), ms(p50[0]), ms(median(p50)), ms(p50[len(p50)-1]),
			ms(p99[0]), ms(median(p99)), ms(p99[len(p99)-1]))
	}
	relayP50 := median(values(relayRes, func(r contResult) float64 { return float64(r.P50) }))
	riverP50 := median(values(riverRes, func(r contResult) float64 { return float64(r.P50) }))
	relayP99 := median(values(relayRes, func(r contResult) float64 { return float64(r.P99) }))
	riverP99 := median(values(riverRes, func(r contResult) float64 { return float64(r.P99) }))
	b.summary = append(b.summary, summaryRow{
		scenario: fmt.Sprintf("continuous, offered %.0f msgs/s", rate),
		relay:    fmt.Sprintf("%.0f msgs/s, p50 %s, p99 %s", median(values(relayRes, contResult.rate)), ms(relayP50), ms(relayP99)),
		peer:     fmt.Sprintf("%.0f msgs/s, p50 %s, p99 %s", median(values(riverRes, contResult.rate)), ms(riverP50), ms(riverP99)),
		ratio:    fmt.Sprintf("p50 latency %.2f×", relayP50/riverP50),
		goal:     "sustain the offered rate",
	})
}

// values returns f of every result, sorted ascending.
func values[R any](rs []R, f func(R) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	slices.Sort(out)
	return out
}

// median of sorted xs.
func median(xs []float64) float64 {
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
