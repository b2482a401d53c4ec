package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/app/sms/load"
	"github.com/relayhq/relay/internal/app/sms/reconcile"
	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/pgmaint"
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
	setServerGOGC()
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
	channelRate := fs.Int("channel-rate", 1000, "submits per second each simulated supplier account allows (the fixture's 200 would cap the chain at the suppliers; 0: the fixture's)")
	maintain := fs.Duration("maintain", 10*time.Second, "when the server's autovacuum is off, apply autovacuum's rules to the run's tables at this interval: ANALYZE or VACUUM what it would (0: never; autovacuum itself looks once a minute)")
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
		keep: *keep, log: log, pools: pools, channelRate: *channelRate})
	if err != nil {
		return err
	}
	defer l.close()
	clock := relayclock.System{}
	if *maintain > 0 {
		on, err := pgmaint.AutovacuumOn(ctx, l.d.Pool())
		if err != nil {
			return err
		}
		if !on {
			// Without it the tables keep the statistics of the empty tables
			// the migration made, and plans cached early scan them whole.
			fmt.Fprintf(env.Stderr, "sms load: the server's autovacuum is off; its rules applied to the run's tables every %s stand in for it\n", *maintain)
			mctx, stop := context.WithCancel(ctx)
			defer stop()
			go pgmaint.Loop(mctx, l.d.Pool(), *maintain, clock, func(err error) {
				log.Warn("sms load: maintenance round failed", "err", err)
			})
		}
	}
	// A positive price draws the enterprise's balance down; the fixture's
	// 500 CNY lasts about 11,000 segments, after which every request would be
	// refused for want of money and the higher tiers would measure refusals.
	// A top-up through the ledger (reconciled like any other entry) covers
	// every tier at three segments a message, twice over.
	var offered float64
	for _, r := range rates {
		offered += r * seconds.Seconds()
	}
	if err := topUp(ctx, l.d.Pool(), "yuntong", tenancy.DemoPrice*rules.Money(offered*3*2), clock); err != nil {
		return err
	}
	app := l.creds["yuntong/otp"]
	creds := load.Credentials{APIKey: app.APIKey, HMACSecret: app.HMACSecret}
	// The fixture's otp app counts a daily limit; a load run is not a day.
	if _, err := l.d.Pool().Exec(ctx, `UPDATE sms_app SET daily_limit = NULL WHERE name = 'otp'`); err != nil {
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
		cpu0, err := sampleChainCPU(ctx, l.d.Pool(), l.c.rdb, l.c.appName())
		if err != nil {
			return err
		}
		res, err := load.Run(ctx, load.Config{URL: l.apiURL, Credentials: creds, TPS: rate, Duration: *seconds,
			LongShare: *longShare, Clock: clock, Client: client})
		if err != nil {
			return err
		}
		dr, err := load.Drain(ctx, l.d.Pool(), res.Start, clock, *drainTimeout, func(done, total int) {
			fmt.Fprintf(env.Stderr, "\rtier %g/s: %d of %d decided   ", rate, done, total)
		})
		fmt.Fprint(env.Stderr, "\r")
		if err != nil {
			return fmt.Errorf("sms load: tier %g/s: %w", rate, err)
		}
		sr, err := load.SubmitRate(ctx, l.d.Pool(), load.Window{From: res.Start, To: clock.Now()})
		if err != nil {
			return err
		}
		cpu1, err := sampleChainCPU(ctx, l.d.Pool(), l.c.rdb, l.c.appName())
		if err != nil {
			return err
		}
		waitHooks(ctx, clock, l.c)
		rep, err := reconcile.Run(ctx, l.d.Pool(), reconcile.Options{SupplierRecords: l.records, Redis: l.c.rdb, ApplicationName: l.c.appName(),
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
		fmt.Fprintf(w, "           %s\n", cpu1.perMessage(cpu0, res.Accepted))
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

// topUp posts a top-up of amount to enterprise's account (a ledger entry
// keyed by the enterprise, so a second call changes nothing).
func topUp(ctx context.Context, pool *pgxpool.Pool, enterprise string, amount rules.Money, clock relaytype.Clock) error {
	var account int64
	if err := pool.QueryRow(ctx, `SELECT acc.id FROM sms_account acc JOIN sms_enterprise e ON e.id = acc.enterprise_id
		WHERE e.name = $1`, enterprise).Scan(&account); err != nil {
		return fmt.Errorf("sms load: account of %s: %w", enterprise, err)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tenancy.Post(ctx, tx, tenancy.Entry{AccountID: account, Kind: tenancy.KindTopup,
			IdemKey: "load-topup:" + enterprise, Amount: amount, Note: "relay sms load: enough for every tier",
			At: clock.Now()})
		if err != nil {
			return fmt.Errorf("sms load: top up %s: %w", enterprise, err)
		}
		return nil
	})
}
