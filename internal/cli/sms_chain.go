package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/cmpp/cmppconn"
	"github.com/relayhq/relay/internal/app/sms/complete"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/route"
	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relayservice"
	"github.com/relayhq/relay/relaysink/relayredis"
	"github.com/relayhq/relay/relaysink/relaywebhook"
	"github.com/relayhq/relay/relaytype"
	"github.com/relayhq/relay/relaywork"
)

// chainRoles says which parts of the send chain a process runs.
type chainRoles struct {
	worker    bool // stages A and B: the sms-admit queue
	publisher bool // stage C: the outbox to the command stream (and webhooks)
	gateway   bool // the CMPP gateway, channels from the database
	callback  bool // stage D: intake and completion
}

// chainOpts configures openChain.
type chainOpts struct {
	pgURL, redisAddr string
	roles            chainRoles
	migrate          bool
	instance         string
	// The streams; "" takes the gateway's defaults.
	commandStream, resultStream, reportStream string
	// webhookURL and webhookSecret: the customer callbacks' receiver base
	// URL and signing secret (publisher role; empty URL: no webhooks).
	webhookURL    string
	webhookSecret []byte
	deadlines     complete.Deadlines
	clock         relaytype.Clock
	log           *slog.Logger
	// pools are the connection budgets of the roles' own pools (zero
	// fields: smsPoolsDefault).
	pools smsPools
	// workLease is how long the completion holds a claimed work record
	// (0: relaywork.LeaseDefault); a killed callback's claims are taken
	// over once it has passed.
	workLease time.Duration
}

// smsPools are the PostgreSQL connections of each role's own pool: a burst
// at one role (API requests, a callback backlog) waits for its own
// connections and never takes those of the stages that feed the gateway.
type smsPools struct{ api, stage, publisher, gateway, callback int }

// smsPoolsDefault: 16 + 16 + 4 + 8 + 12 = 56 connections for a process
// running every role, within PostgreSQL's default max_connections of 100
// with room for operators and migrations.
var smsPoolsDefault = smsPools{api: 16, stage: 16, publisher: 4, gateway: 8, callback: 12}

// smsPoolsSmall is the demo's budget (24 connections): a newcomer's
// machine, and tests that run beside others on one server.
var smsPoolsSmall = smsPools{api: 6, stage: 6, publisher: 2, gateway: 4, callback: 6}

// String is the --pools form.
func (p *smsPools) String() string {
	return fmt.Sprintf("%d,%d,%d,%d,%d", p.api, p.stage, p.publisher, p.gateway, p.callback)
}

// Set reads API,STAGE,PUBLISHER,GATEWAY,CALLBACK connection counts.
func (p *smsPools) Set(v string) error {
	parts := strings.Split(v, ",")
	if len(parts) != 5 {
		return errors.New("want API,STAGE,PUBLISHER,GATEWAY,CALLBACK connection counts, e.g. 16,16,4,8,12")
	}
	var n [5]int
	for i, s := range parts {
		x, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || x < 1 || x > 500 {
			return fmt.Errorf("%s is not a connection count (1-500)", relaytype.QuoteValue(s))
		}
		n[i] = x
	}
	*p = smsPools{api: n[0], stage: n[1], publisher: n[2], gateway: n[3], callback: n[4]}
	return nil
}

// poolsFlag registers --pools with def as its default.
func poolsFlag(fs *flag.FlagSet, p *smsPools, def smsPools) {
	*p = def
	fs.Var(p, "pools", "PostgreSQL connections of each role's own pool: API,STAGE,PUBLISHER,GATEWAY,CALLBACK (default "+
		def.String()+"); the sum must fit the server's max_connections beside everything else")
}

// chain is the open parts of the send chain.
type chain struct {
	o chainOpts
	// d is the stages' (and the schema's) pool; apiD the API's, with
	// apiEngine, a producer-only engine on it; pubD, gwD and cbd the
	// publisher's, the gateway's and the callback's.
	d, apiD, pubD, gwD, cbd *relaypgx.Driver
	apiEngine               *relay.Engine
	rdb                     *redis.Client
	work                    *relaywork.Store // on the stages' pool (Ensure of new attempts)
	cbWork                  *relaywork.Store // on the callback's pool (its claims, the completion's metrics)
	engine                  *relay.Engine
	svc                     *relayservice.Service
	disp                    []*relay.Dispatcher
	gw                      *gateway.Gateway
	intake                  *complete.Intake
	completer               *complete.Completer
	closers                 []func()
}

// chainLines are the migration lines of the send chain.
func chainLines(d *relaypgx.Driver) []relaymigrate.Line {
	lines := append([]relaymigrate.Line{relaymigrate.EngineLineOf(d)}, tenancy.MigrationLines()...)
	return append(lines, gateway.MigrationLine())
}

// openChain connects and builds the parts o.roles name (the API is the
// caller's: it needs only c.engine and c.d).
func openChain(ctx context.Context, o chainOpts) (c *chain, err error) {
	if o.clock == nil {
		o.clock = relayclock.System{}
	}
	o.commandStream = cmp.Or(o.commandStream, gateway.CommandStreamDefault)
	o.resultStream = cmp.Or(o.resultStream, gateway.ResultStreamDefault)
	o.reportStream = cmp.Or(o.reportStream, gateway.ReportStreamDefault)
	if o.instance == "" {
		host, _ := os.Hostname()
		o.instance = cmp.Or(host, "relay") + "-" + randomHex(3)
	}
	o.pools.api = cmp.Or(o.pools.api, smsPoolsDefault.api)
	o.pools.stage = cmp.Or(o.pools.stage, smsPoolsDefault.stage)
	o.pools.publisher = cmp.Or(o.pools.publisher, smsPoolsDefault.publisher)
	o.pools.gateway = cmp.Or(o.pools.gateway, smsPoolsDefault.gateway)
	o.pools.callback = cmp.Or(o.pools.callback, smsPoolsDefault.callback)
	c = &chain{o: o}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if c.d, err = c.open(ctx, o.pools.stage, "stage"); err != nil {
		return nil, err
	}
	if c.apiD, err = c.open(ctx, o.pools.api, "api"); err != nil {
		return nil, err
	}
	if o.migrate {
		if _, err := relaymigrate.Up(ctx, c.d, relayclock.System{}, chainLines(c.d)...); err != nil {
			return nil, err
		}
	} else if err := relaymigrate.Check(ctx, c.d, chainLines(c.d)...); err != nil {
		return nil, fmt.Errorf("sms: %w (run with --migrate)", err)
	}
	c.rdb = redis.NewClient(&redis.Options{Addr: o.redisAddr, DisableIdentity: true})
	c.closers = append(c.closers, func() { _ = c.rdb.Close() })
	if o.roles.gateway || o.roles.callback {
		if err := c.rdb.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("--redis %s: %w", o.redisAddr, err)
		}
	}
	if c.work, err = complete.NewWorkStore(c.d.Pool(), nil); err != nil {
		return nil, err
	}
	var stage *admit.Stage
	if o.roles.worker {
		stage, err = admit.NewStage(admit.StageConfig{Driver: c.d, Clock: o.clock, Work: c.work, CommandStream: o.commandStream,
			Deadlines: o.deadlines, Logger: o.log})
		if err != nil {
			return nil, err
		}
	}
	if c.engine, err = relay.NewEngine(c.d, admit.EngineConfig(stage, o.instance, o.clock, o.log)); err != nil {
		return nil, err
	}
	if c.apiEngine, err = relay.NewEngine(c.apiD, admit.EngineConfig(nil, o.instance, o.clock, o.log)); err != nil {
		return nil, err
	}
	if o.roles.worker {
		if c.svc, err = relayservice.New(relayservice.Config{Driver: c.d, Engine: c.engine, Shared: true, Clock: o.clock,
			Logger: o.log}); err != nil {
			return nil, err
		}
	}
	if o.roles.publisher {
		if c.pubD, err = c.open(ctx, o.pools.publisher, "publisher"); err != nil {
			return nil, err
		}
		sink, err := relayredis.New(relayredis.Config{Addr: o.redisAddr})
		if err != nil {
			return nil, err
		}
		// Both targets delete what their sink confirmed (DeleteDelivered):
		// the chain keeps no SENT history of its outbox (the submits, the
		// ledger and the webhook receiver's own records are the evidence),
		// and a SENT mark would cost a new row version in four indexes per
		// event (docs/sms/send.md).
		x, err := relay.NewDispatcher(c.pubD, sink, relay.DispatcherConfig{Target: route.Target, Clock: o.clock, Logger: o.log,
			PollInterval: 200 * time.Millisecond, Owner: o.instance, DeleteDelivered: true})
		if err != nil {
			return nil, err
		}
		c.disp = append(c.disp, x)
		if o.webhookURL != "" {
			hook, err := relaywebhook.New(relaywebhook.Config{URL: o.webhookURL, Secret: o.webhookSecret, Clock: o.clock})
			if err != nil {
				return nil, err
			}
			x, err := relay.NewDispatcher(c.pubD, hook, relay.DispatcherConfig{Target: complete.WebhookTarget, Clock: o.clock,
				Logger: o.log, Owner: o.instance, DeleteDelivered: true})
			if err != nil {
				return nil, err
			}
			c.disp = append(c.disp, x)
		}
	}
	if o.roles.gateway {
		if c.gwD, err = c.open(ctx, o.pools.gateway, "gateway"); err != nil {
			return nil, err
		}
		if err := c.openGateway(ctx); err != nil {
			return nil, err
		}
	}
	if o.roles.callback {
		if c.cbd, err = c.open(ctx, o.pools.callback, "callback"); err != nil {
			return nil, err
		}
		work, err := relaywork.New(c.cbd.Pool(), relaywork.Config{Queue: complete.WorkQueue, Lease: o.workLease})
		if err != nil {
			return nil, err
		}
		c.cbWork = work
		if c.intake, err = complete.NewIntake(complete.IntakeConfig{Pool: c.cbd.Pool(), Redis: c.rdb, Work: work,
			Clock: o.clock, Consumer: o.instance, ResultStream: o.resultStream, ReportStream: o.reportStream,
			Logger: o.log}); err != nil {
			return nil, err
		}
		if c.completer, err = complete.NewCompleter(complete.Config{Driver: c.cbd, Work: work, Clock: o.clock,
			Owner: o.instance, Deadlines: o.deadlines, CommandStream: o.commandStream, Logger: o.log}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// open opens a pool of at most conns connections on the chain's database,
// its sessions named for role (see appName).
func (c *chain) open(ctx context.Context, conns int, role string) (*relaypgx.Driver, error) {
	u, err := dsn.WithParam(c.o.pgURL, "pool_max_conns", fmt.Sprint(conns))
	if err == nil {
		u, err = dsn.WithParam(u, "application_name", c.appName()+"/"+role)
	}
	if err != nil {
		return nil, fmt.Errorf("--postgres: %w", err)
	}
	d, err := relaypgx.Open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("--postgres %s: %w", dsn.Redact(c.o.pgURL), dsn.Scrub(err, c.o.pgURL))
	}
	c.closers = append(c.closers, func() { _ = d.Close() })
	return d, nil
}

// appName starts the application_name of every session of the chain's
// pools, followed by "/" and the pool's role (api, stage, publisher,
// gateway, callback): the application_name the --postgres connection
// string (or PGAPPNAME) gives, else "relay-sms-" and the instance — so an
// operator can tell the instances and their roles apart, and a harness that
// names its own sessions X and passes X to every role finds them all under
// X with the reconciliation's health check (which takes the name and every
// "<name>/…").
func (c *chain) appName() string { return chainAppName(c.o.pgURL, c.o.instance) }

// chainAppName is appName for the connection string pgURL and instance.
func chainAppName(pgURL, instance string) string {
	if cfg, err := pgxpool.ParseConfig(pgURL); err == nil {
		if n := cfg.ConnConfig.RuntimeParams["application_name"]; n != "" {
			return n
		}
	}
	return "relay-sms-" + instance
}

// openGateway builds the gateway with the active channels of the
// database: address, version, SP_Id, connections, window and rate from
// sms_channel, each secret read from its secret_ref file.
func (c *chain) openGateway(ctx context.Context) error {
	cfg := gateway.Config{Consumer: c.o.instance, CommandStream: c.o.commandStream, ResultStream: c.o.resultStream,
		ReportStream: c.o.reportStream, Redis: c.rdb, DB: c.gwD.Pool(), Clock: c.o.clock, Logger: c.o.log}
	var err error
	if cfg.Channels, err = dbChannels(ctx, c.d, c.o.clock); err != nil {
		return err
	}
	c.gw, err = gateway.New(cfg)
	return err
}

// dbChannels is the gateway's configuration of every active channel of
// sms_channel; an error when there is none.
func dbChannels(ctx context.Context, d *relaypgx.Driver, clock relaytype.Clock) ([]gateway.ChannelConfig, error) {
	snap, err := tenancy.Load(ctx, d.Pool(), clock)
	if err != nil {
		return nil, fmt.Errorf("sms: channels: %w", err)
	}
	var out []gateway.ChannelConfig
	for _, ch := range snap.Data().Channels {
		if !ch.Active {
			continue
		}
		cc, err := gatewayChannel(ch)
		if err != nil {
			return nil, err
		}
		out = append(out, cc)
	}
	if len(out) == 0 {
		return nil, errors.New("sms: no active channel in sms_channel for the gateway")
	}
	return out, nil
}

// gatewayChannel is the gateway's configuration of a channel row.
func gatewayChannel(ch rules.Channel) (gateway.ChannelConfig, error) {
	path, ok := strings.CutPrefix(ch.SecretRef, "file:")
	if !ok {
		return gateway.ChannelConfig{}, fmt.Errorf("sms: channel %s: secret_ref is not file:PATH", ch.Name)
	}
	secret, err := os.ReadFile(path)
	if err != nil {
		return gateway.ChannelConfig{}, fmt.Errorf("sms: channel %s: secret: %w", ch.Name, err)
	}
	v := cmpp.V30
	if ch.CMPPVersion == "2.0" {
		v = cmpp.V20
	}
	return gateway.ChannelConfig{Name: ch.Name, Pool: cmppconn.PoolConfig{Size: ch.Connections, RateLimit: float64(ch.RateLimit),
		Conn: cmppconn.Config{Addr: ch.Address, Version: v, SourceAddr: ch.SPID, Secret: strings.TrimSpace(string(secret)),
			Window: ch.Window}}}, nil
}

// run runs the built parts until ctx ends (or one fails), then stops them
// in reverse order.
func (c *chain) run(ctx context.Context) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	goRun := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil && ctx.Err() == nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
				stop(err)
			}
		})
	}
	for _, x := range c.disp {
		if err := x.Start(ctx); err != nil {
			return fmt.Errorf("dispatcher %s: %w", x.Target(), err)
		}
	}
	defer func() {
		for _, x := range c.disp {
			if err := x.Stop(context.WithoutCancel(ctx)); err != nil {
				c.o.log.Warn("sms: stop dispatcher", "target", x.Target(), "err", err)
			}
		}
	}()
	if c.svc != nil {
		goRun("stage", c.svc.Run)
		goRun("counter sweep", c.sweepCounters)
	}
	if c.gw != nil {
		goRun("gateway", c.gw.Run)
	}
	if c.intake != nil {
		goRun("intake", c.intake.Run)
		goRun("completion", c.completer.Run)
	}
	<-ctx.Done()
	wg.Wait()
	return errors.Join(errs...)
}

// sweepCounters deletes expired limit counters every minute.
func (c *chain) sweepCounters(ctx context.Context) error {
	for {
		select {
		case <-c.o.clock.After(time.Minute):
		case <-ctx.Done():
			return nil
		}
		for {
			n, err := admit.SweepCounters(ctx, c.d.Pool(), c.o.clock.Now(), 1000)
			if err != nil {
				if ctx.Err() == nil {
					c.o.log.Warn("sms: sweep limit counters", "err", err)
				}
				break
			}
			if n < 1000 {
				break
			}
		}
	}
}

// close closes what openChain opened, in reverse order.
func (c *chain) close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
}
