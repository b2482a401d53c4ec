package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/cmpp/cmppconn"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// channelFlags collects --channel specs.
type channelFlags []string

func (c *channelFlags) String() string { return fmt.Sprintf("%d channels", len(*c)) }

func (c *channelFlags) Set(v string) error { *c = append(*c, v); return nil }

// parseChannel reads NAME=ADDR,VERSION,SP_ID,SECRET_FILE[,CONNS[,WINDOW[,RATE]]];
// the secret is read from SECRET_FILE and never appears in an error.
func parseChannel(spec string) (gateway.ChannelConfig, error) {
	name, rest, ok := strings.Cut(spec, "=")
	parts := strings.Split(rest, ",")
	if !ok || name == "" || len(parts) < 4 || len(parts) > 7 {
		return gateway.ChannelConfig{}, fmt.Errorf("--channel %s: want NAME=ADDR,VERSION,SP_ID,SECRET_FILE[,CONNS[,WINDOW[,RATE]]]",
			relaytype.QuoteValue(name))
	}
	bad := func(what string) error { return fmt.Errorf("--channel %s: bad %s", relaytype.QuoteValue(name), what) }
	vs, err := parseVersions(parts[1])
	if err != nil || len(vs) != 1 {
		return gateway.ChannelConfig{}, bad("VERSION (2.0 or 3.0)")
	}
	secret, err := os.ReadFile(parts[3])
	if err != nil {
		return gateway.ChannelConfig{}, fmt.Errorf("--channel %s: secret file: %w", relaytype.QuoteValue(name), err)
	}
	pc := cmppconn.PoolConfig{Conn: cmppconn.Config{Addr: parts[0], Version: vs[0], SourceAddr: parts[2],
		Secret: strings.TrimSpace(string(secret))}}
	if len(parts) > 4 {
		if pc.Size, err = strconv.Atoi(parts[4]); err != nil || pc.Size < 1 {
			return gateway.ChannelConfig{}, bad("CONNS")
		}
	}
	if len(parts) > 5 {
		if pc.Conn.Window, err = strconv.Atoi(parts[5]); err != nil || pc.Conn.Window < 1 {
			return gateway.ChannelConfig{}, bad("WINDOW")
		}
	}
	if len(parts) > 6 {
		if pc.RateLimit, err = strconv.ParseFloat(parts[6], 64); err != nil || pc.RateLimit < 0 {
			return gateway.ChannelConfig{}, bad("RATE")
		}
	}
	return gateway.ChannelConfig{Name: name, Pool: pc}, nil
}

func runSmsGateway(ctx context.Context, env *Env, args []string) error {
	setServerGOGC()
	fs := newFlags(env, "sms gateway", "sms gateway --channel NAME=ADDR,VERSION,SP_ID,SECRET_FILE[,CONNS[,WINDOW[,RATE]]] [flags] | --demo N")
	var channels channelFlags
	fs.Var(&channels, "channel", "a channel NAME=ADDR,VERSION,SP_ID,SECRET_FILE[,CONNS[,WINDOW[,RATE]]] (repeatable); the secret is read from SECRET_FILE")
	redisAddr := fs.String("redis", envOr("RELAY_REDIS_ADDR", "127.0.0.1:6379"), "Redis server holding the streams")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL holding gateway_submit")
	migrate := fs.Bool("migrate", false, "apply the sms_gateway migration line first (otherwise an old schema is refused)")
	consumer := fs.String("consumer", "gateway-1", "consumer name in the group: unique per running gateway, the same across its restarts")
	group := fs.String("group", gateway.GroupDefault, "consumer group")
	cmdStream := fs.String("command-stream", gateway.CommandStreamDefault, "stream of submit commands")
	resStream := fs.String("result-stream", gateway.ResultStreamDefault, "stream of submit results")
	repStream := fs.String("report-stream", gateway.ReportStreamDefault, "stream of status reports and MO")
	minIdle := fs.Duration("min-idle", gateway.MinIdleDefault, "XAUTOCLAIM min-idle-time (longer than --stale-claim)")
	staleClaim := fs.Duration("stale-claim", gateway.StaleClaimDefault, "age at which an unsettled claim is UNKNOWN (longer than --submit-timeout)")
	submitTimeout := fs.Duration("submit-timeout", gateway.SubmitTimeoutDefault, "bound on one Submit")
	claimEvery := fs.Duration("claim-interval", gateway.ClaimIntervalDefault, "time between XAUTOCLAIM passes")
	trim := fs.Bool("trim-commands", false, "after each XAUTOCLAIM pass, remove the command entries the group has delivered and acked (only when no other group reads the stream)")
	readCount := fs.Int("read-count", gateway.ReadCountDefault, "entries per XREADGROUP/XAUTOCLAIM: the largest batch claimed and settled in one statement")
	concurrency := fs.Int("concurrency", gateway.ConcurrencyDefault, "commands in work at once (also the most a crash can leave UNKNOWN)")
	fromDB := fs.Bool("channels-from-db", false, "take the active channels of sms_channel in --postgres (address, version, SP_Id, connections, window, rate; each secret from its file:PATH secret_ref), as `relay sms all` does, instead of --channel")
	demo := fs.Int("demo", 0, "demo: start a simulated supplier on loopback, push N commands (and one duplicate), run until every result is in, print a summary and exit")
	demoTimeout := fs.Duration("demo-timeout", time.Minute, "give up on the demo after this long")
	logLevel := fs.String("log-level", "warn", "log level (off, debug, info, warn, error)")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics and /healthz on this address (empty: off); public and "+
		"read-only: :PORT means 127.0.0.1:PORT, and a non-loopback address is logged as a warning")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sms gateway: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	cfg := gateway.Config{Consumer: *consumer, Group: *group, CommandStream: *cmdStream, ResultStream: *resStream,
		ReportStream: *repStream, MinIdle: *minIdle, StaleClaim: *staleClaim, SubmitTimeout: *submitTimeout,
		ClaimInterval: *claimEvery, ReadCount: *readCount, Concurrency: *concurrency, TrimCommands: *trim, Clock: relayclock.System{}, Logger: log}
	for _, spec := range channels {
		ch, err := parseChannel(spec)
		if err != nil {
			return err
		}
		cfg.Channels = append(cfg.Channels, ch)
	}
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, DisableIdentity: true})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("--redis %s: %w", *redisAddr, err)
	}
	cfg.Redis = rdb
	if *demo > 0 {
		return runGatewayDemo(ctx, env, cfg, *pgURL, *demo, *demoTimeout)
	}
	if *fromDB && len(cfg.Channels) > 0 {
		return errors.New("sms gateway: --channels-from-db and --channel exclude each other")
	}
	if len(cfg.Channels) == 0 && !*fromDB {
		return errors.New("sms gateway: at least one --channel is required (or --channels-from-db, or --demo N)")
	}
	d, err := relaypgx.Open(ctx, *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer d.Close()
	if *migrate {
		if _, err := relaymigrate.Up(ctx, d, relayclock.System{}, gateway.MigrationLine()); err != nil {
			return err
		}
	} else if err := relaymigrate.Check(ctx, d, gateway.MigrationLine()); err != nil {
		return fmt.Errorf("sms gateway: %w (run with --migrate)", err)
	}
	cfg.DB = d.Pool()
	if *fromDB {
		if cfg.Channels, err = dbChannels(ctx, d, cfg.Clock); err != nil {
			return err
		}
	}
	g, err := gateway.New(cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), g.Collector())
	if mc, ok := metricsConfig(*metricsAddr, reg, log); ok {
		stopHTTP, err := startHTTP(log, mc)
		if err != nil {
			return err
		}
		defer stopHTTP()
	}
	names := make([]string, len(cfg.Channels))
	for i, ch := range cfg.Channels {
		names[i] = ch.Name
	}
	fmt.Fprintf(env.Stderr, "sms gateway: consumer %s of group %s on %s; channels %s\n", *consumer, *group, *cmdStream, strings.Join(names, ","))
	err = g.Run(ctx)
	fmt.Fprintf(env.Stderr, "sms gateway: stopped: %s\n", gatewayStatsLine(g.Stats()))
	return err
}

func gatewayStatsLine(st gateway.Stats) string {
	return fmt.Sprintf("submits=%d accepted=%d rejected=%d unknown=%d not_sent=%d duplicates=%d stale_claims=%d busy=%d "+
		"malformed=%d claimed=%d results=%d retries=%d reports=%d mo=%d late_resps=%d", st.Submits, st.Accepted, st.Rejected, st.Unknown, st.NotSent,
		st.Duplicates, st.StaleClaims, st.Busy, st.Malformed, st.Claimed, st.Results, st.Retries, st.Reports, st.MO, st.Late)
}

// runGatewayDemo runs a gateway against an in-process supplier on loopback,
// in a fresh PostgreSQL schema and fresh streams (both removed at the end),
// pushes n commands and a duplicate of the first, waits for every result,
// and checks and prints what the supplier's record and the streams show.
func runGatewayDemo(ctx context.Context, env *Env, cfg gateway.Config, pgURL string, n int, timeout time.Duration) error {
	clock := relayclock.System{}
	secret := randomHex(6)
	cleanup, err := gatewayScratch(ctx, env, &cfg, pgURL, "demo")
	if err != nil {
		return err
	}
	defer cleanup()

	dir, err := os.MkdirTemp("", "relay-sms-gw-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	record := filepath.Join(dir, "supplier.jsonl")
	const spID = "900001"
	srv, err := supplier.New(supplier.Config{Accounts: []supplier.Account{{SourceAddr: spID, Secret: secret}},
		Record: supplier.RecordConfig{Path: record}, Clock: clock, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	cfg.Channels = []gateway.ChannelConfig{{Name: "demo", Pool: cmppconn.PoolConfig{Size: 2,
		Conn: cmppconn.Config{Addr: ln.Addr().String(), Version: cmpp.V30, SourceAddr: spID, Secret: secret}}}}
	g, err := gateway.New(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "sms gateway demo: supplier on %s\n", ln.Addr())
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- g.Run(runCtx) }()

	began := clock.Now()
	for i := 1; i <= n; i++ {
		if err := pushDemo(ctx, cfg, uint64(i)); err != nil {
			return err
		}
	}
	if err := pushDemo(ctx, cfg, 1); err != nil { // a duplicate: must not reach the supplier
		return err
	}
	deadline := clock.After(timeout)
	for {
		l, err := cfg.Redis.XLen(ctx, cfg.ResultStream).Result()
		if err != nil {
			return err
		}
		if l >= int64(n+1) {
			break
		}
		select {
		case <-clock.After(20 * time.Millisecond):
		case <-deadline:
			return fmt.Errorf("sms gateway demo: %d of %d results after %s", l, n+1, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	took := clock.Now().Sub(began)
	stop()
	if err := <-ran; err != nil {
		return err
	}
	_ = srv.Close()
	if err := <-served; err != nil {
		return err
	}
	return demoSummary(ctx, env, cfg, g.Stats(), record, n, took)
}

// gatewayScratch points cfg at a fresh PostgreSQL schema holding the
// gateway's table and at fresh stream names, both named after kind and a
// random tag, and returns what removes them (schema, streams, pool). It
// prints where they are on stderr.
func gatewayScratch(ctx context.Context, env *Env, cfg *gateway.Config, pgURL, kind string) (cleanup func(), err error) {
	tag := randomHex(6)
	schema := "relay_sms_gw_" + kind + "_" + tag
	schemaURL, drop, err := scratchSchema(ctx, pgURL, schema)
	if err != nil {
		return nil, err
	}
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	undo = append(undo, drop)
	d, err := relaypgx.Open(ctx, schemaURL)
	if err != nil {
		cleanup()
		return nil, err
	}
	undo = append(undo, func() { _ = d.Close() })
	if _, err := relaymigrate.Up(ctx, d, relayclock.System{}, gateway.MigrationLine()); err != nil {
		cleanup()
		return nil, err
	}
	cfg.DB = d.Pool()
	prefix := "sms:" + kind + ":" + tag + ":"
	cfg.CommandStream, cfg.ResultStream, cfg.ReportStream = prefix+"submit", prefix+"result", prefix+"report"
	rdb, streams := cfg.Redis, []string{cfg.CommandStream, cfg.ResultStream, cfg.ReportStream}
	undo = append(undo, func() { rdb.Del(context.WithoutCancel(ctx), streams...) })
	fmt.Fprintf(env.Stderr, "sms gateway %s: streams %s*, schema %s\n", kind, prefix, schema)
	return cleanup, nil
}

func pushDemo(ctx context.Context, cfg gateway.Config, id uint64) error {
	c := gateway.Command{SubmitID: id, Channel: "demo", SrcID: "10690001", ServiceID: "DEMO",
		Dests: []string{fmt.Sprintf("139%08d", id%100000000)}, MsgFmt: cmpp.FmtASCII,
		Content: []byte("demo message " + strconv.FormatUint(id, 10)), PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1}
	return cfg.Redis.XAdd(ctx, &redis.XAddArgs{Stream: cfg.CommandStream, Values: c.Values()}).Err()
}

// demoSummary checks the demo's invariants and prints them.
func demoSummary(ctx context.Context, env *Env, cfg gateway.Config, st gateway.Stats, record string, n int, took time.Duration) error {
	rec, err := supplier.ReadRecord(record)
	if err != nil {
		return err
	}
	counts := rec.Counts()
	msgs, err := cfg.Redis.XRange(ctx, cfg.ResultStream, "-", "+").Result()
	if err != nil {
		return err
	}
	events, accepted := map[string]int{}, 0
	for _, m := range msgs {
		r, err := gateway.ParseResult(m.Values)
		if err != nil {
			return err
		}
		if events[r.EventID]++; events[r.EventID] == 1 && r.State == gateway.StateAccepted {
			accepted++
		}
	}
	pending, err := cfg.Redis.XPending(ctx, cfg.CommandStream, cfg.Group).Result()
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "commands:  %d (+1 duplicate of submitId 1) in %s\n", n, took.Round(time.Millisecond))
	fmt.Fprintf(env.Stdout, "supplier:  %d submits, %d distinct submit keys, %d submitted twice\n",
		counts.Submits, len(counts.ByKey), len(counts.Duplicates()))
	fmt.Fprintf(env.Stdout, "results:   %d written, %d distinct event ids, %d accepted\n", len(msgs), len(events), accepted)
	fmt.Fprintf(env.Stdout, "pending:   %d unacked commands\n", pending.Count)
	fmt.Fprintf(env.Stdout, "gateway:   %s\n", gatewayStatsLine(st))
	if counts.Submits != n || len(counts.ByKey) != n || len(counts.Duplicates()) != 0 || len(events) != n ||
		accepted != n || pending.Count != 0 {
		return errors.New("sms gateway demo: FAILED: expected every command submitted once, one accepted result each, nothing pending")
	}
	fmt.Fprintln(env.Stdout, "ok: every command submitted once, one result each (the duplicate re-emitted, not resubmitted), nothing pending")
	return nil
}
