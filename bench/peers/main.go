// Command peers measures relay against peer systems on one PostgreSQL, in one
// run, alternating the systems round by round (A B A B …). It is a separate
// module so that the peers never become dependencies of relay itself.
//
// Scenario "burn-down, unordered": insert N no-op jobs in batches, then process
// them all; each job's worker/handler writes one row of an effect table. Every
// run is verified before it is reported: each job processed exactly once
// (store state and effect table). A run that lost or duplicated anything prints
// FAIL and the program exits non-zero.
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	postgres      string
	n             int
	rounds        int
	warmN         int
	riverWorkers  []int
	relaySettings []relaySetting
}

// result is one verified burn-down.
type result struct {
	N       int
	Insert  time.Duration
	Process time.Duration
}

func (r result) insertRate() float64  { return float64(r.N) / r.Insert.Seconds() }
func (r result) processRate() float64 { return float64(r.N) / r.Process.Seconds() }

// errFailed marks a run whose verification failed (FAIL already printed).
var errFailed = errors.New("FAIL: a run lost or duplicated jobs (see above)")

func parseFlags(args []string, out io.Writer) (*options, error) {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(out)
	o := &options{}
	fs.StringVar(&o.postgres, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL (a schema peers_<random> is created and dropped per run)")
	fs.IntVar(&o.n, "n", 100000, "jobs per run")
	fs.IntVar(&o.rounds, "rounds", 3, "measured rounds (each runs relay, then River)")
	fs.IntVar(&o.warmN, "warm-n", 20000, "jobs per warm-up run (capped at --n)")
	quick := fs.Bool("quick", false, "CI configuration: --n 5000 --rounds 1")
	riverW := fs.String("river-workers", "100,1000,2000", "River MaxWorkers candidates searched in the warm-up")
	relayS := fs.String("relay-settings", "4x100,16x256,32x512", "relay WorkersxBatchSize candidates searched in the warm-up")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *quick {
		o.n, o.rounds = 5000, 1
	}
	for _, f := range strings.Split(*riverW, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || w < 1 {
			return nil, fmt.Errorf("--river-workers: bad value %q", f)
		}
		o.riverWorkers = append(o.riverWorkers, w)
	}
	for _, f := range strings.Split(*relayS, ",") {
		ws, bs, ok := strings.Cut(strings.TrimSpace(f), "x")
		w, err1 := strconv.Atoi(ws)
		b, err2 := strconv.Atoi(bs)
		if !ok || err1 != nil || err2 != nil || w < 1 || b < 1 {
			return nil, fmt.Errorf("--relay-settings: bad value %q (want WORKERSxBATCH)", f)
		}
		o.relaySettings = append(o.relaySettings, relaySetting{Workers: w, BatchSize: b})
	}
	if o.n < 1 || o.rounds < 1 || o.warmN < 1 {
		return nil, errors.New("--n, --rounds and --warm-n must be ≥ 1")
	}
	o.warmN = min(o.warmN, o.n)
	return o, nil
}

// system is one contender with its chosen setting.
type system struct {
	name    string
	setting string
	run     func(ctx context.Context, n int) (result, error)
	results []result
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "burn-down, unordered: n=%d, rounds=%d, warm-up n=%d\n", o.n, o.rounds, o.warmN)
	failed := false
	// verified runs one burn-down and prints its line; a failure is FAIL.
	verified := func(label string, f func() (result, error)) (result, bool) {
		r, err := f()
		if err != nil {
			failed = true
			fmt.Fprintf(out, "  %-44s FAIL: %v\n", label, err)
			return r, false
		}
		fmt.Fprintf(out, "  %-44s ok  insert %8.0f jobs/s  process %8.0f jobs/s\n", label, r.insertRate(), r.processRate())
		return r, true
	}

	// Warm-up: search each system's concurrency setting, alternating systems.
	fmt.Fprintln(out, "warm-up (setting search):")
	var bestRiver, bestRelayIdx int
	var bestRiverRate, bestRelayRate float64
	for i := range max(len(o.riverWorkers), len(o.relaySettings)) {
		if i < len(o.relaySettings) {
			s := o.relaySettings[i]
			if r, ok := verified("relay "+s.String(), func() (result, error) { return runRelay(ctx, o.postgres, o.warmN, s) }); ok && r.processRate() > bestRelayRate {
				bestRelayRate, bestRelayIdx = r.processRate(), i
			}
		}
		if i < len(o.riverWorkers) {
			w := o.riverWorkers[i]
			if r, ok := verified(fmt.Sprintf("River MaxWorkers=%d", w), func() (result, error) { return runRiver(ctx, o.postgres, o.warmN, w) }); ok && r.processRate() > bestRiverRate {
				bestRiverRate, bestRiver = r.processRate(), w
			}
		}
	}
	if failed {
		return errFailed
	}
	rs := o.relaySettings[bestRelayIdx]
	systems := []*system{
		{name: "relay", setting: "ModeUnordered " + rs.String(),
			run: func(ctx context.Context, n int) (result, error) { return runRelay(ctx, o.postgres, n, rs) }},
		{name: "River", setting: fmt.Sprintf("v0.51.2 MaxWorkers=%d", bestRiver),
			run: func(ctx context.Context, n int) (result, error) { return runRiver(ctx, o.postgres, n, bestRiver) }},
	}

	fmt.Fprintln(out, "rounds:")
	for round := 1; round <= o.rounds; round++ {
		for _, s := range systems {
			if r, ok := verified(fmt.Sprintf("round %d %s", round, s.name), func() (result, error) { return s.run(ctx, o.n) }); ok {
				s.results = append(s.results, r)
			}
		}
	}
	if failed {
		return errFailed
	}

	fmt.Fprintf(out, "\n| system | setting | process min | process median | process max | insert median |\n|---|---|---|---|---|---|\n")
	for _, s := range systems {
		p := rates(s.results, result.processRate)
		in := rates(s.results, result.insertRate)
		fmt.Fprintf(out, "| %s | %s | %.0f jobs/s | %.0f jobs/s | %.0f jobs/s | %.0f jobs/s |\n",
			s.name, s.setting, p[0], median(p), p[len(p)-1], median(in))
	}
	ratio := median(rates(systems[0].results, result.processRate)) / median(rates(systems[1].results, result.processRate))
	insRatio := median(rates(systems[0].results, result.insertRate)) / median(rates(systems[1].results, result.insertRate))
	fmt.Fprintf(out, "\nrelay/River (median processing): %.2f×   (median insert: %.2f×)\n", ratio, insRatio)
	fmt.Fprintln(out, "all runs verified: every job processed exactly once")
	return nil
}

// rates returns f of every result, sorted ascending.
func rates(rs []result, f func(result) float64) []float64 {
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
