package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/sms/load"
	"github.com/relayhq/relay/internal/app/sms/reconcile"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// smsTiersDefault is the tier ladder of `relay sms load`: a smoke tier,
// then offered rates up to 2,000 requests/s.
const smsTiersDefault = "5,20,50,100,200,500,1000,2000"

// runSmsLoad offers load tiers through the signed HTTP API to the whole
// chain on this machine (the demo's set-up: scratch schema, a simulated
// supplier per channel, every role in this process), drains each tier,
// measures it, and reconciles after every tier.
func runSmsLoad(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "sms load", "sms load [--tiers 5,20,…,2000] [--tier-seconds 10] [--postgres URL] [--redis ADDR]")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL server (a scratch schema, dropped at the end)")
	redisAddr := fs.String("redis", envOr("RELAY_REDIS_ADDR", "127.0.0.1:6379"), "Redis server (streams of the run's own)")
	tiers := fs.String("tiers", smsTiersDefault, "offered requests per second of each tier, in order")
	seconds := fs.Duration("tier-seconds", 10*time.Second, "how long each tier offers its rate")
	longShare := fs.Float64("long-share", 0.1, "share of three-segment messages")
	failShare := fs.Float64("fail-share", 0.03, "share of status reports that say not delivered")
	drainTimeout := fs.Duration("drain-timeout", 5*time.Minute, "give up a tier when it is not drained after this long")
	keep := fs.Bool("keep", false, "keep the scratch schema and streams")
	logLevel := fs.String("log-level", "warn", "log level (off, debug, info, warn, error)")
	var pools smsPools
	poolsFlag(fs, &pools, smsPoolsDefault)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (every role, the suppliers and the load generator) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sms load: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	var rates []float64
	for _, f := range strings.Split(*tiers, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 {
			return fmt.Errorf("--tiers: %s is not a positive rate", relaytype.QuoteValue(f))
		}
		rates = append(rates, r)
	}
	if *seconds <= 0 {
		return errors.New("--tier-seconds must be positive")
	}
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	l, err := startLocal(ctx, env, localOpts{what: "load", pgURL: *pgURL, redisAddr: *redisAddr, failShare: *failShare,
		keep: *keep, log: log, pools: pools})
	if err != nil {
		return err
	}
	defer l.close()
	clock := relayclock.System{}
	app := l.creds["yuntong/otp"]
	creds := load.Credentials{APIKey: app.APIKey, HMACSecret: app.HMACSecret}
	// The fixture's otp app counts a daily limit; a load run is not a day.
	if _, err := l.c.d.Pool().Exec(ctx, `UPDATE sms_app SET daily_limit = NULL WHERE name = 'otp'`); err != nil {
		return err
	}
	// At most 48 connections: the API serves 64 at once (relayhttp's
	// MaxConns); more would wait in the accept queue behind idle
	// keep-alive connections and time out.
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 48, MaxIdleConnsPerHost: 48}}
	w := env.Stdout
	fmt.Fprintln(w, "offered/s  sent   accepted  dropped  client p50/p95/p99 ms   full submits/s  drained in  reconcile")
	failed := false
	for _, rate := range rates {
		res, err := load.Run(ctx, load.Config{URL: l.apiURL, Credentials: creds, TPS: rate, Duration: *seconds,
			LongShare: *longShare, Clock: clock, Client: client})
		if err != nil {
			return err
		}
		dr, err := load.Drain(ctx, l.c.d.Pool(), res.Start, clock, *drainTimeout, func(done, total int) {
			fmt.Fprintf(env.Stderr, "\rtier %g/s: %d of %d decided   ", rate, done, total)
		})
		fmt.Fprint(env.Stderr, "\r")
		if err != nil {
			return fmt.Errorf("sms load: tier %g/s: %w", rate, err)
		}
		sr, err := load.SubmitRate(ctx, l.c.d.Pool(), load.Window{From: res.Start, To: clock.Now()})
		if err != nil {
			return err
		}
		waitHooks(ctx, clock, l.c)
		rep, err := reconcile.Run(ctx, l.c.d.Pool(), reconcile.Options{SupplierRecords: l.records, Redis: l.c.rdb, ApplicationName: l.c.appName(),
			Streams: l.streams()})
		if err != nil {
			return err
		}
		verdict := "ok"
		if !rep.OK() {
			verdict, failed = "FAILED", true
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		fmt.Fprintf(w, "%9g  %5d  %8d  %7d  %6.1f / %6.1f / %6.1f  %14.0f  %9.1fs  %s\n", rate, res.Sent, res.Accepted,
			res.Dropped, ms(res.Latency.P50), ms(res.Latency.P95), ms(res.Latency.P99), sr.PerSecond, dr.Elapsed.Seconds(), verdict)
		if len(res.Errors) > 0 {
			fmt.Fprintf(w, "           errors by HTTP status (0: no answer): %v\n", res.Errors)
		}
		if !rep.OK() {
			rep.Write(w)
			break
		}
	}
	if failed {
		return errors.New("sms load: a reconciliation failed")
	}
	return nil
}
