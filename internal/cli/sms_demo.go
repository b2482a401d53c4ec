package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/hookrecv"
	"github.com/relayhq/relay/internal/app/sms/reconcile"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// runSmsDemo runs the whole send chain on this machine for a newcomer: a
// scratch PostgreSQL schema seeded with the fixture, a simulated supplier
// per channel on loopback, every role in this process, a webhook receiver;
// it sends N messages through the signed HTTP API, shows progress until
// every one is decided, and reconciles.
func runSmsDemo(ctx context.Context, env *Env, args []string) error {
	setServerGOGC()
	fs := newFlags(env, "sms demo", "sms demo [-n 2000] [--postgres URL] [--redis ADDR]")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL server (the demo works in a scratch schema it drops at the end)")
	redisAddr := fs.String("redis", envOr("RELAY_REDIS_ADDR", "127.0.0.1:6379"), "Redis server (the demo uses streams of its own, removed at the end)")
	n := fs.Int("n", 2000, "messages to send")
	longShare := fs.Float64("long-share", 0.1, "share of three-segment messages")
	failShare := fs.Float64("fail-share", 0.03, "share of status reports that say not delivered (those numbers are retried through another channel)")
	concurrency := fs.Int("concurrency", 32, "requests in flight at once")
	timeout := fs.Duration("timeout", 3*time.Minute, "give up after this long")
	keep := fs.Bool("keep", false, "keep the scratch schema and streams (printed) for a look afterwards")
	logLevel := fs.String("log-level", "warn", "log level (off, debug, info, warn, error)")
	var pools smsPools
	poolsFlag(fs, &pools, smsPoolsSmall)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sms demo: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *n < 1 || *longShare < 0 || *longShare > 1 || *failShare < 0 || *failShare > 1 || *concurrency < 1 {
		return errors.New("sms demo: -n and --concurrency must be positive, --long-share and --fail-share in [0, 1]")
	}
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	l, err := startLocal(ctx, env, localOpts{what: "demo", pgURL: *pgURL, redisAddr: *redisAddr, failShare: *failShare,
		keep: *keep, log: log, pools: pools})
	if err != nil {
		return err
	}
	defer l.close()
	c, clock := l.c, relayclock.System{}
	runCtx, stopSend := context.WithCancel(ctx)
	defer stopSend()

	// Send, with progress, until every message is decided.
	began := clock.Now()
	sender := &demoSender{url: l.apiURL, creds: l.creds, longShare: *longShare, rng: rand.New(rand.NewPCG(1, uint64(began.UnixNano())))}
	sendDone := make(chan error, 1)
	go func() { sendDone <- sender.send(runCtx, *n, *concurrency) }()
	deadline := clock.After(*timeout)
	var sendErr error
	sending := true
	for {
		p, err := demoProgress(ctx, c)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "\rsent %d/%d · admitted %d · refused %d · completed %d · submits %d · %.0fs   ",
			sender.sent.Load(), *n, p.admitted+p.completed, p.refused, p.completed, p.submits, clock.Now().Sub(began).Seconds())
		if sending {
			select {
			case sendErr = <-sendDone:
				sending = false
				if sendErr != nil {
					return fmt.Errorf("sms demo: send: %w", sendErr)
				}
			default:
			}
		}
		if !sending && p.completed+p.refused >= int64(sender.accepted.Load()) {
			break
		}
		select {
		case <-clock.After(500 * time.Millisecond):
		case <-deadline:
			return fmt.Errorf("sms demo: not drained after %s (see the progress line)", *timeout)
		case err := <-l.ran:
			return fmt.Errorf("sms demo: the chain stopped: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	took := clock.Now().Sub(began)
	fmt.Fprintln(env.Stderr)
	// Let the webhooks of the last completions go out.
	waitHooks(ctx, clock, c)
	l.stop()
	fmt.Fprintf(env.Stdout, "sms demo: %d messages sent and decided in %s (%d accepted, %d client errors)\n",
		*n, took.Round(time.Millisecond), sender.accepted.Load(), sender.failed.Load())
	return demoReconcile(ctx, env, l)
}

// demoSender posts signed requests to the API.
type demoSender struct {
	url                    string
	creds                  map[string]tenancy.AppCredentials
	longShare              float64
	mu                     sync.Mutex
	rng                    *rand.Rand
	sent, accepted, failed atomic.Int64
}

// demoPrefixes are number prefixes of the fixture's three carriers.
var demoPrefixes = []string{"138", "130", "133"}

func (s *demoSender) send(ctx context.Context, n, concurrency int) error {
	client := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxConnsPerHost: concurrency, MaxIdleConnsPerHost: concurrency}}
	jobs := make(chan int)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range concurrency {
		wg.Go(func() {
			for i := range jobs {
				if err := s.one(ctx, client, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	return ctx.Err()
}

func (s *demoSender) one(ctx context.Context, client *http.Client, i int) error {
	s.mu.Lock()
	long := s.rng.Float64() < s.longShare
	s.mu.Unlock()
	// A number of its own per message (no frequency limit is hit), never
	// one of the fixture's blacklisted numbers (they end in 0000…).
	number := demoPrefixes[i%3] + fmt.Sprintf("%08d", 10000000+i)
	app := "yuntong/otp"
	req := admit.Request{ClientMsgID: "demo-" + strconv.Itoa(i), Numbers: []string{number}, Template: "otp",
		SignName: "云通科技", Params: map[string]string{"code": fmt.Sprintf("%06d", i%1000000), "minutes": "5"}}
	if long {
		app = "yuntong/notify"
		body := ""
		for range 10 {
			body += "您的订单已发货，请注意查收。"
		}
		req = admit.Request{ClientMsgID: "demo-" + strconv.Itoa(i), Numbers: []string{number}, Content: "【云通科技】" + body}
	}
	body, _ := json.Marshal(req)
	c := s.creds[app]
	ts := time.Now().Unix() //nolint:forbidigo // the request's own timestamp, as a client stamps it
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(admit.HeaderKey, c.APIKey)
	r.Header.Set(admit.HeaderTimestamp, strconv.FormatInt(ts, 10))
	r.Header.Set(admit.HeaderSignature, admit.Sign(c.HMACSecret, http.MethodPost, "/v1/messages", ts, body))
	s.sent.Add(1)
	resp, err := client.Do(r)
	if err != nil {
		s.failed.Add(1)
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		s.failed.Add(1)
		return fmt.Errorf("POST /v1/messages: %s", resp.Status)
	}
	s.accepted.Add(1)
	return nil
}

type demoCounts struct{ admitted, refused, completed, submits int64 }

func demoProgress(ctx context.Context, c *chain) (demoCounts, error) {
	var p demoCounts
	err := c.d.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'admitted'), count(*) FILTER (WHERE state = 'refused'),
		count(*) FILTER (WHERE state = 'completed'), (SELECT count(*) FROM sms_submit WHERE result IS NOT NULL)
		FROM sms_message`).Scan(&p.admitted, &p.refused, &p.completed, &p.submits)
	return p, err
}

// waitHooks waits (up to 10 s) until the webhook outbox is drained.
func waitHooks(ctx context.Context, clock relaytype.Clock, c *chain) {
	for range 100 {
		var left int64
		if err := c.d.Pool().QueryRow(ctx, `SELECT count(*) FROM relay_outbox WHERE target = 'sms-webhook' AND state <> 'SENT'`).
			Scan(&left); err != nil || left == 0 {
			return
		}
		select {
		case <-clock.After(100 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

// demoReconcile checks what the demo promises and prints it.
func demoReconcile(ctx context.Context, env *Env, l *local) error {
	c, records, hooks := l.c, l.records, l.hooks
	var submits, dupKeys int
	byKey := map[string]int{}
	for _, path := range records {
		rec, err := supplier.ReadRecord(path)
		if err != nil {
			return err
		}
		counts := rec.Counts()
		submits += counts.Submits
		dupKeys += len(counts.Duplicates())
		for k, v := range counts.ByKey {
			byKey[k] += v
		}
	}
	var q struct {
		messages, completed, refused, attempts, retries, badRetries, firstSubmits, delivered, failed, unknown int64
		freezes, charges, releases, refunds, frozen                                                           int64
		workOpen, outboxOpen                                                                                  int64
	}
	err := c.d.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM sms_message), (SELECT count(*) FROM sms_message WHERE state = 'completed'),
		(SELECT count(*) FROM sms_message WHERE state = 'refused'), (SELECT count(*) FROM sms_attempt),
		(SELECT count(*) FROM sms_attempt WHERE retry_of IS NOT NULL),
		(SELECT count(*) FROM sms_attempt r LEFT JOIN sms_attempt o ON o.id = r.retry_of
		  WHERE r.retry_of IS NOT NULL AND (o.id IS NULL OR o.state <> 'failed' OR o.message_id <> r.message_id
		  OR o.recipient <> r.recipient OR o.attempt_no <> r.attempt_no - 1)),
		(SELECT count(*) FROM sms_submit s JOIN sms_attempt a ON a.id = s.attempt_id WHERE a.attempt_no = 1),
		(SELECT count(*) FROM sms_message, unnest(outcomes) o WHERE o = 'delivered'),
		(SELECT count(*) FROM sms_message, unnest(outcomes) o WHERE o = 'failed'),
		(SELECT count(*) FROM sms_message, unnest(outcomes) o WHERE o = 'unknown'),
		(SELECT coalesce(sum(amount_li), 0) FROM sms_ledger WHERE kind = 'freeze'),
		(SELECT coalesce(sum(amount_li), 0) FROM sms_ledger WHERE kind = 'charge'),
		(SELECT coalesce(sum(amount_li), 0) FROM sms_ledger WHERE kind = 'release'),
		(SELECT coalesce(sum(amount_li), 0) FROM sms_ledger WHERE kind = 'refund'),
		(SELECT coalesce(sum(frozen_li), 0) FROM sms_account),
		(SELECT count(*) FROM relay_work WHERE state NOT IN ('idle')),
		(SELECT count(*) FROM relay_outbox WHERE state <> 'SENT')`).Scan(&q.messages, &q.completed, &q.refused,
		&q.attempts, &q.retries, &q.badRetries, &q.firstSubmits, &q.delivered, &q.failed, &q.unknown, &q.freezes, &q.charges,
		&q.releases, &q.refunds, &q.frozen, &q.workOpen, &q.outboxOpen)
	if err != nil {
		return err
	}
	distinct, total, bad := hooks.Counts()
	w := env.Stdout
	fmt.Fprintf(w, "messages:   %d (%d completed, %d refused)\n", q.messages, q.completed, q.refused)
	fmt.Fprintf(w, "numbers:    %d delivered, %d failed, %d unknown; %d attempts, %d of them retries\n",
		q.delivered, q.failed, q.unknown, q.attempts, q.retries)
	fmt.Fprintf(w, "supplier:   %d submits, %d distinct submitIds, %d submitted twice\n", submits, len(byKey), dupKeys)
	fmt.Fprintf(w, "ledger:     frozen %s = charged %s + released %s; refunded %s; still frozen %s\n",
		li(q.freezes), li(q.charges), li(q.releases), li(q.refunds), li(q.frozen))
	fmt.Fprintf(w, "webhooks:   %d messages notified (%d deliveries, %d refused signatures)\n", distinct, total, bad)
	fmt.Fprintf(w, "left:       %d open work records, %d unsent outbox events\n", q.workOpen, q.outboxOpen)
	rep, err := reconcile.Run(ctx, c.d.Pool(), reconcile.Options{SupplierRecords: records, Redis: c.rdb, ApplicationName: c.appName(),
		Streams: l.streams()})
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	rep.Write(w)
	ok := rep.OK()
	if int64(distinct) != q.completed || bad != 0 {
		fmt.Fprintln(w, "PROBLEM: not one verified webhook per completed message")
		ok = false
	}
	if !ok {
		return errors.New("sms demo: reconciliation FAILED")
	}
	fmt.Fprintln(w, "ok: every message decided, no submitId twice at a supplier, retries linked, ledger balanced, one webhook per message, nothing left")
	return nil
}

// li formats an amount in li as yuan.
func li(v int64) string { return fmt.Sprintf("%d.%03d CNY", v/1000, v%1000) }

// localOpts configures startLocal.
type localOpts struct {
	what, pgURL, redisAddr string
	pools                  smsPools
	failShare              float64
	// channelRate, when positive, replaces every channel's submit rate limit
	// (per second) of the fixture before the gateway starts.
	channelRate int
	keep        bool
	log         *slog.Logger
}

// local is the whole send chain on this machine: a scratch schema with the
// fixture, a simulated supplier per channel on loopback, every role in this
// process, the API on a free loopback port and a webhook receiver.
type local struct {
	c       *chain
	d       *relaypgx.Driver // the harness's own pool (fixture, drain polls, reconciliation), not the chain's
	apiURL  string
	creds   map[string]tenancy.AppCredentials
	records []string
	hooks   *hookrecv.Receiver
	prefix  string
	ran     chan error
	stop    func() // stops the chain (then the suppliers); idempotent
	undo    []func()
}

// close stops what startLocal started and removes the scratch schema and
// streams unless keep.
func (l *local) close() {
	l.stop()
	for i := len(l.undo) - 1; i >= 0; i-- {
		l.undo[i]()
	}
}

// streams are the local chain's three stream names.
func (l *local) streams() []string {
	return []string{l.prefix + "submit", l.prefix + "result", l.prefix + "report"}
}

func startLocal(ctx context.Context, env *Env, o localOpts) (l *local, err error) {
	l = &local{stop: func() {}}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	log := o.log
	clock := relayclock.System{}
	tag := randomHex(4)
	schema := "relay_sms_" + o.what + "_" + tag
	schemaURL, drop, err := scratchSchema(ctx, o.pgURL, schema)
	if err != nil {
		return nil, err
	}
	if !o.keep {
		l.undo = append(l.undo, drop)
	}
	dir, err := os.MkdirTemp("", "relay-sms-"+o.what+"-")
	if err != nil {
		return nil, err
	}
	l.undo = append(l.undo, func() { _ = os.RemoveAll(dir) })
	fmt.Fprintf(env.Stderr, "sms %s: schema %s, streams sms:%s:%s:*, secrets and supplier records in %s\n", o.what, schema, o.what, tag, dir)

	// 1. The schema and the fixture.
	d, err := relaypgx.Open(ctx, schemaURL)
	if err != nil {
		return nil, err
	}
	l.undo = append(l.undo, func() { _ = d.Close() })
	l.d = d
	if _, err := relaymigrate.Up(ctx, d, clock, chainLines(d)...); err != nil {
		return nil, err
	}
	secretOf := func(name string) string { return filepath.Join(dir, "channel-"+name+".secret") }
	for _, name := range tenancy.DemoChannels {
		if _, err := ensureSecretFile(secretOf(name)); err != nil {
			return nil, err
		}
	}
	l.creds = map[string]tenancy.AppCredentials{}
	creds := l.creds
	if _, err := tenancy.Seed(ctx, d.Pool(), tenancy.DemoFixture(func(name string) string { return "file:" + secretOf(name) }),
		tenancy.SeedOpts{Clock: clock, NewApp: func(c tenancy.AppCredentials) error {
			creds[c.Enterprise+"/"+c.App] = c
			return nil
		}}); err != nil {
		return nil, err
	}

	// 2. A simulated supplier per channel, on loopback.
	snap, err := tenancy.Load(ctx, d.Pool(), clock)
	if err != nil {
		return nil, err
	}
	supCtx, stopSuppliers := context.WithCancel(context.WithoutCancel(ctx)) // stopped after the chain: the gateway leaves first
	var served sync.WaitGroup
	var servers []*supplier.Server
	l.stop = func() { // until the chain runs: the suppliers alone
		stopSuppliers()
		for _, s := range servers {
			_ = s.Close()
		}
		served.Wait()
	}
	for _, ch := range snap.Data().Channels {
		secret, err := os.ReadFile(secretOf(ch.Name))
		if err != nil {
			return nil, err
		}
		v := cmpp.V30
		if ch.CMPPVersion == "2.0" {
			v = cmpp.V20
		}
		record := filepath.Join(dir, "supplier-"+ch.Name+".jsonl")
		l.records = append(l.records, record)
		srv, err := supplier.New(supplier.Config{
			Accounts: []supplier.Account{{SourceAddr: ch.SPID, Secret: string(bytes.TrimSpace(secret)), Versions: []cmpp.Version{v}}},
			Behaviour: supplier.Behaviour{
				Latency:     supplier.Dist{Kind: supplier.DistUniform, Min: time.Millisecond, Max: 5 * time.Millisecond},
				ReportDelay: supplier.Dist{Kind: supplier.DistUniform, Min: 5 * time.Millisecond, Max: 100 * time.Millisecond},
				ReportStats: []supplier.Weighted[string]{{Value: "DELIVRD", Weight: 1000 - int(o.failShare*1000)}, {Value: "UNDELIV", Weight: int(o.failShare * 1000)}},
			},
			Record: supplier.RecordConfig{Path: record}, Clock: clock, Logger: log})
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		served.Go(func() { _ = srv.Serve(supCtx, ln) })
		servers = append(servers, srv)
		if _, err := d.Pool().Exec(ctx, `UPDATE sms_channel SET address = $1 WHERE name = $2`, ln.Addr().String(), ch.Name); err != nil {
			return nil, err
		}
	}

	if o.channelRate > 0 {
		if _, err := d.Pool().Exec(ctx, `UPDATE sms_channel SET rate_limit = $1`, o.channelRate); err != nil {
			return nil, err
		}
	}

	// 3. A webhook receiver; every app takes callbacks.
	hookSecret := []byte(randomHex(16))
	hooks, err := hookrecv.Start(hookSecret, log)
	if err != nil {
		return nil, err
	}
	hookURL := hooks.URL()
	l.hooks = hooks
	l.undo = append(l.undo, hooks.Close)
	if _, err := d.Pool().Exec(ctx, `UPDATE sms_app SET webhook_topic = name`); err != nil {
		return nil, err
	}

	// 4. Every role in this process.
	prefix := "sms:" + o.what + ":" + tag + ":"
	l.prefix = prefix
	c, err := openChain(ctx, chainOpts{pgURL: schemaURL, redisAddr: o.redisAddr, clock: clock, log: log,
		roles:         chainRoles{worker: true, publisher: true, gateway: true, callback: true},
		commandStream: prefix + "submit", resultStream: prefix + "result", reportStream: prefix + "report",
		webhookURL: hookURL, webhookSecret: hookSecret, instance: o.what + "-" + tag, pools: o.pools})
	if err != nil {
		return nil, err
	}
	l.c = c
	l.undo = append(l.undo, c.close)
	if !o.keep {
		l.undo = append(l.undo, func() { c.rdb.Del(context.WithoutCancel(ctx), l.streams()...) })
	}
	api, err := admit.NewAPI(admit.APIConfig{Driver: c.apiD, Engine: c.apiEngine, Clock: clock, Logger: log})
	if err != nil {
		return nil, err
	}
	lf := &listenFlags{prefix: "api", addr: "127.0.0.1:0"}
	hcfg, _, err := lf.config(api, log)
	if err != nil {
		return nil, err
	}
	srv, err := relayhttp.Listen(hcfg)
	if err != nil {
		return nil, err
	}
	go func() { _ = srv.Serve() }()
	l.apiURL = srv.URL()
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l.ran = make(chan error, 1)
	go func() { l.ran <- c.run(runCtx) }()
	var once sync.Once
	l.stop = func() {
		once.Do(func() {
			_ = srv.Shutdown(context.WithoutCancel(ctx))
			stop()
			if err := <-l.ran; err != nil {
				log.Warn("sms: the chain stopped with an error", "err", err)
			}
			l.ran <- nil
			stopSuppliers()
			for _, s := range servers {
				_ = s.Close()
			}
			served.Wait()
		})
	}
	fmt.Fprintf(env.Stderr, "sms %s: API on %s, %d channels with a simulated supplier each\n", o.what, srv.URL(), len(l.records))
	return l, nil
}
