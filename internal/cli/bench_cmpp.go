package cli

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/cmpp/cmppconn"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/relayclock"
)

// benchCmppAccount is the SP id the benchmark logs in with.
const benchCmppAccount = "900001"

// runBenchCmpp runs `relay bench cmpp`: Submit + SubmitResp pairs per second
// between a cmppconn.Pool in this process and the supplier simulator in
// another (`relay sms supplier`, started as a child unless --supplier names
// a running one), over loopback, per CMPP version and pool size.
func runBenchCmpp(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench cmpp", "bench cmpp [--conns 1,4,8] [--n N] [--rounds R] [--versions 2.0,3.0] [--window W] "+
		"[--supplier ADDR --account SP_ID:SECRET]")
	conns := fs.String("conns", "1,4,8", "comma-separated pool sizes (connections) to measure")
	n := fs.Int("n", 50000, "Submits per round")
	rounds := fs.Int("rounds", 3, "rounds per setting (min, median and max are reported)")
	versions := fs.String("versions", "2.0,3.0", "CMPP versions to measure")
	window := fs.Int("window", cmppconn.WindowDefault, "W: unanswered Submits per connection")
	addr := fs.String("supplier", "", "a running `relay sms supplier` to measure against (default: start one as a child process)")
	account := fs.String("account", "", "with --supplier: the SP_ID:SECRET to log in with")
	gwN := fs.Int("gateway-commands", 20000, "commands per round of the end-to-end gateway measurement (0: skip it)")
	gwConns := fs.Int("gateway-conns", 4, "connections of the gateway's channel in the end-to-end measurement")
	redisAddr := fs.String("redis", envOr("RELAY_REDIS_ADDR", "127.0.0.1:6379"), "Redis server for the end-to-end measurement's streams")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL for the end-to-end measurement (a scratch schema is created and dropped)")
	logLevel := fs.String("log-level", "warn", "connection log level (off, debug, info, warn, error)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (not the supplier's) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	sizes, err := parseInts("--conns", *conns)
	if err != nil {
		return err
	}
	var vs []cmpp.Version
	for _, v := range strings.Split(*versions, ",") {
		switch strings.TrimSpace(v) {
		case "2.0":
			vs = append(vs, cmpp.V20)
		case "3.0":
			vs = append(vs, cmpp.V30)
		default:
			return fmt.Errorf("--versions: %q is neither 2.0 nor 3.0", v)
		}
	}
	if *n < 1 || *rounds < 1 || *window < 1 || *gwN < 0 || *gwConns < 1 {
		return errors.New("--n, --rounds, --window and --gateway-conns must be at least 1, --gateway-commands not negative")
	}
	sp, secret := benchCmppAccount, ""
	if *addr == "" {
		secret = randomHex(8)
		stop, a, err := startSupplierChild(ctx, sp+":"+secret, max(slices.Max(sizes), *gwConns), *window)
		if err != nil {
			return err
		}
		defer stop()
		*addr = a
	} else {
		var ok bool
		if sp, secret, ok = strings.Cut(*account, ":"); !ok || sp == "" {
			return errors.New("--supplier needs --account SP_ID:SECRET")
		}
	}

	fmt.Fprintf(env.Stdout, "relay bench cmpp: Submit+SubmitResp pairs/s, pool in this process, supplier simulator at %s "+
		"(another process unless --supplier), window %d, %d Submits per round (one destination, 140 bytes), %d rounds\n",
		*addr, *window, *n, *rounds)
	fmt.Fprintf(env.Stdout, "%-7s %-6s %10s %10s %10s\n", "version", "conns", "min/s", "median/s", "max/s")
	for _, v := range vs {
		for _, size := range sizes {
			var rates []float64
			for range *rounds {
				r, err := benchCmppRound(ctx, cmppconn.Config{Addr: *addr, Version: v, SourceAddr: sp, Secret: secret,
					Window: *window, Logger: log}, size, *n)
				if err != nil {
					return fmt.Errorf("bench cmpp %s conns=%d: %w", v, size, err)
				}
				rates = append(rates, r)
			}
			slices.Sort(rates)
			fmt.Fprintf(env.Stdout, "%-7s %-6d %10.0f %10.0f %10.0f\n", v, size, rates[0], rates[len(rates)/2], rates[len(rates)-1])
		}
	}
	if *gwN == 0 {
		return nil
	}
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, DisableIdentity: true})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("--redis %s: %w", *redisAddr, err)
	}
	fmt.Fprintf(env.Stdout, "\nrelay bench cmpp: gateway end to end, commands/s from a backlog of %d commands on the command stream "+
		"to every result settled in PostgreSQL, written to the result stream and the command acked; CMPP 3.0, %d connections, "+
		"window %d, %d rounds\n", *gwN, *gwConns, *window, *rounds)
	fmt.Fprintf(env.Stdout, "%-7s %10s %10s %10s\n", "conns", "min/s", "median/s", "max/s")
	var rates []float64
	for range *rounds {
		cfg := gateway.Config{Redis: rdb, Consumer: "bench", Group: gateway.GroupDefault, Logger: log, Clock: relayclock.System{},
			Channels: []gateway.ChannelConfig{{Name: "bench", Pool: cmppconn.PoolConfig{Size: *gwConns,
				Conn: cmppconn.Config{Addr: *addr, Version: cmpp.V30, SourceAddr: sp, Secret: secret, Window: *window}}}}}
		r, err := benchGatewayRound(ctx, env, cfg, *pgURL, *gwN)
		if err != nil {
			return fmt.Errorf("bench cmpp gateway: %w", err)
		}
		rates = append(rates, r)
	}
	slices.Sort(rates)
	fmt.Fprintf(env.Stdout, "%-7d %10.0f %10.0f %10.0f\n", *gwConns, rates[0], rates[len(rates)/2], rates[len(rates)-1])
	return nil
}

// benchGatewayRound fills a scratch command stream with n commands, then
// runs a Gateway on it until every command has its result in the result
// stream and nothing is pending, and returns the commands per second from
// the gateway's start to that moment. Every result must be ACCEPTED.
func benchGatewayRound(ctx context.Context, env *Env, cfg gateway.Config, pgURL string, n int) (float64, error) {
	clock := relayclock.System{}
	cleanup, err := gatewayScratch(ctx, env, &cfg, pgURL, "bench")
	if err != nil {
		return 0, err
	}
	defer cleanup()
	content := []byte(strings.Repeat("bench message ", 10))
	pipe := cfg.Redis.Pipeline()
	for i := 1; i <= n; i++ {
		c := gateway.Command{SubmitID: uint64(i), Channel: "bench", SrcID: "106900001", ServiceID: "BENCH",
			Dests: []string{fmt.Sprintf("139%08d", i)}, MsgFmt: cmpp.FmtASCII, Content: content, PkTotal: 1, PkNumber: 1}
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: cfg.CommandStream, Values: c.Values()})
		if i%1000 == 0 || i == n {
			if _, err := pipe.Exec(ctx); err != nil {
				return 0, fmt.Errorf("fill the command stream: %w", err)
			}
		}
	}
	g, err := gateway.New(cfg)
	if err != nil {
		return 0, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	start := clock.Now()
	go func() { ran <- g.Run(runCtx) }()
	deadline := clock.After(5 * time.Minute)
	for {
		st := g.Stats()
		if st.Results >= int64(n) {
			p, err := cfg.Redis.XPending(ctx, cfg.CommandStream, cfg.Group).Result()
			if err != nil {
				return 0, err
			}
			if p.Count == 0 {
				break
			}
		}
		select {
		case <-clock.After(2 * time.Millisecond):
		case <-deadline:
			return 0, fmt.Errorf("%d of %d results after 5 min (%s)", st.Results, n, gatewayStatsLine(st))
		case err := <-ran:
			return 0, fmt.Errorf("the gateway stopped: %v", err)
		}
	}
	elapsed := clock.Now().Sub(start)
	stop()
	if err := <-ran; err != nil {
		return 0, err
	}
	if st := g.Stats(); st.Accepted != int64(n) || st.Results != int64(n) {
		return 0, fmt.Errorf("expected %d accepted results: %s", n, gatewayStatsLine(st))
	}
	return float64(n) / elapsed.Seconds(), nil
}

// benchCmppRound submits n Submits through a pool of size connections, with
// twice as many submitters as window slots so every window stays full, and
// returns the pairs per second. Any outcome but Accepted fails the round.
func benchCmppRound(ctx context.Context, cfg cmppconn.Config, size, n int) (float64, error) {
	clock := relayclock.System{}
	p, err := cmppconn.NewPool(cmppconn.PoolConfig{Conn: cfg, Size: size})
	if err != nil {
		return 0, err
	}
	if err := p.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { _ = p.Stop(context.WithoutCancel(ctx)) }()
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for p.Live() < size {
		select {
		case <-wait.Done():
			return 0, fmt.Errorf("%d of %d connections logged in within 30 s (last error: %v)", p.Live(), size, p.LastErr())
		case <-clock.After(5 * time.Millisecond):
		}
	}
	content := make([]byte, 140)
	for i := range content {
		content[i] = byte('a' + i%26)
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	start := clock.Now()
	for range 2 * size * cfg.Window {
		wg.Go(func() {
			s := &cmpp.Submit{PkTotal: 1, PkNumber: 1, ServiceID: "BENCH", MsgSrc: cfg.SourceAddr, SrcID: "106900001",
				DestTerminalIDs: []string{"13800138000"}, MsgContent: content}
			for next.Add(1) <= int64(n) {
				if _, err := p.Submit(ctx, s); err != nil {
					errMu.Lock()
					firstErr = cmp.Or(firstErr, err)
					errMu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := clock.Now().Sub(start)
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(n) / elapsed.Seconds(), nil
}

// startSupplierChild starts `relay sms supplier` from this binary on a free
// loopback port for one account (the secret goes through the environment,
// not the process list) and returns a stop function and its address.
func startSupplierChild(ctx context.Context, account string, maxConns, window int) (stop func(), addr string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, exe, "sms", "supplier", "--listen", "127.0.0.1:0", "--max-conns", fmt.Sprint(maxConns),
		"--window", fmt.Sprint(window), "--keepalive", "-1s", "--stats-every", "0", "--log-level", "warn")
	cmd.Env = append(os.Environ(), "SMS_SUPPLIER_ACCOUNTS="+account)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start the supplier simulator: %w", err)
	}
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
	lines := bufio.NewScanner(stderr)
	const prefix = "sms supplier: listening on "
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), prefix); ok {
			addr, _, _ = strings.Cut(rest, " ")
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return stop, addr, nil
		}
	}
	stop()
	return nil, "", errors.New("the supplier simulator exited before listening")
}

// randomHex returns n random bytes in hex (crypto/rand: also used for the
// secrets of the simulators the bench and the gateway demo start).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
