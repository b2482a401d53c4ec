package cli

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"time"

	"crypto/tls"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/shorecdc"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaytype"
)

// shipsyncShoreAddrDefault is where `relay shipsync shore` listens without
// --addr.
const shipsyncShoreAddrDefault = "127.0.0.1:8443"

// shipsyncShoreMaxConnsDefault bounds the connections open at once on
// --addr. Every node keeps its connection between requests (a new one
// costs a TLS handshake with both certificates on a weak link), so the
// bound must be above the nodes one process serves: under it, the nodes
// beyond it wait in the accept queue with no answer at all instead of a
// 429 with Retry-After. The request limits are the back-pressure; this
// only bounds memory (tens of KiB per idle TLS connection).
const shipsyncShoreMaxConnsDefault = 2048

// startApplier opens the target and starts the applier on the apply queue;
// stop drains it within the stop timeout.
func startApplier(ctx context.Context, env *Env, d *relaypgx.Driver, inbox *shore.Inbox, targetDSN, instance string,
	workers, urgentWorkers int, reg prometheus.Registerer, log *slog.Logger) (stop func(), err error) {
	target, err := apply.OpenTarget(targetDSN)
	if err != nil {
		return nil, fmt.Errorf("--target %s: %w", dsn.Redact(targetDSN), dsn.Scrub(err, targetDSN))
	}
	if err := target.EnsureLedger(ctx); err != nil {
		_ = target.Close()
		return nil, fmt.Errorf("--target %s: %w", dsn.Redact(targetDSN), dsn.Scrub(err, targetDSN))
	}
	if instance == "" {
		host, _ := os.Hostname()
		instance = cmp.Or(host, "shore") + "-" + randomHex(3)
	}
	a, err := apply.New(apply.Config{Driver: d, Target: target, Clock: relayclock.System{}, InstanceID: instance,
		Workers: workers, UrgentWorkers: urgentWorkers, Logger: log, Registerer: reg})
	if err != nil {
		_ = target.Close()
		return nil, err
	}
	if err := a.Start(ctx); err != nil {
		_ = target.Close()
		return nil, err
	}
	inbox.OnRelease(a.Notify)
	fmt.Fprintf(env.Stdout, "shipsync shore: applying to %s as %s\n", dsn.Redact(targetDSN), instance)
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), httpStopTimeout)
		defer cancel()
		if err := a.Stop(sctx); err != nil {
			log.Warn("shipsync shore: applier stop", "error", err)
		}
		_ = target.Close()
	}, nil
}

// watchGaps asks nodes to resend stream gaps older than grace, once a
// second of clock time, until ctx ends.
func watchGaps(ctx context.Context, inbox *shore.Inbox, clock relaytype.Clock, grace, every time.Duration, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-clock.After(time.Second):
		}
		rs, err := inbox.AskResends(ctx, grace, every)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("shipsync shore: resend requests", "error", err)
			}
			continue
		}
		for _, r := range rs {
			log.Info("shipsync shore: gap in a node's stream; resend requested", "node_id", r.Node,
				"connector", r.Connector, "partition", r.Partition, "from", r.From, "to", r.To)
		}
	}
}

// runShipsyncShore serves the shore's data API over mutual TLS until ctx
// ends.
func runShipsyncShore(ctx context.Context, env *Env, args []string) error {
	setServerGOGC()
	fs := newFlags(env, "shipsync shore", "shipsync shore --postgres URL [--migrate] --tls-cert FILE --tls-key FILE "+
		"--client-ca FILE [--addr 127.0.0.1:8443]")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL of the shore (node registry and inbox)")
	migrate := fs.Bool("migrate", false, "apply the shipsync migration line first (otherwise an old schema is refused)")
	addr := fs.String("addr", shipsyncShoreAddrDefault, "serve the data API (/sync/v1/…) over HTTPS on this address")
	certFile := fs.String("tls-cert", "", "the shore's PEM server certificate (relay shipsync pki server). Required")
	keyFile := fs.String("tls-key", "", "PEM private key of --tls-cert. Required")
	clientCA := fs.String("client-ca", "", "PEM CA the node certificates are verified against (mutual TLS). Required")
	hosts := fs.String("hosts", "", "comma-separated host names clients may use besides IP addresses and localhost")
	maxConns := fs.Int("max-conns", shipsyncShoreMaxConnsDefault, "connections open at once on --addr (nodes keep theirs "+
		"between requests: keep it above the number of nodes this process serves; beyond it clients wait unanswered)")
	var lim shore.Limits
	fs.IntVar(&lim.GlobalConcurrency, "global-concurrency", shore.GlobalConcurrencyDefault, "requests in flight across all nodes (429 above)")
	fs.Float64Var(&lim.GlobalRate, "global-rate", shore.GlobalRateDefault, "requests per second across all nodes (429 above)")
	fs.IntVar(&lim.GlobalBurst, "global-burst", 0, "burst of --global-rate (0: twice the rate)")
	fs.IntVar(&lim.NodeConcurrency, "node-concurrency", shore.NodeConcurrencyDefault, "requests in flight per node (429 above)")
	fs.Float64Var(&lim.NodeRate, "node-rate", shore.NodeRateDefault, "requests per second per node (429 above)")
	fs.IntVar(&lim.NodeBurst, "node-burst", 0, "burst of --node-rate (0: twice the rate)")
	target := fs.String("target", envOr("SHIPSYNC_TARGET_DSN", ""), "the shore business database (MariaDB/MySQL DSN, "+
		"user:pw@tcp(host:3306)/db; default $SHIPSYNC_TARGET_DSN): run the applier writing released events to it. "+
		"Empty: receive only (another shore process applies)")
	instance := fs.String("instance-id", "", "this process's name as the owner of apply leases (default: host and a random "+
		"suffix); a restarted process with the same name takes its leases back at once")
	applyWorkers := fs.Int("apply-workers", apply.WorkersDefault, "apply batches in flight")
	urgentWorkers := fs.Int("urgent-workers", apply.UrgentWorkersDefault, "apply batches in flight of the --urgent-rules")
	gapGrace := fs.Duration("gap-grace", shore.GapGraceDefault, "how long a gap in a node's stream may stay open before "+
		"the node is asked to resend it")
	resendEvery := fs.Duration("resend-every", shore.ResendEveryDefault, "how often an unfilled gap is asked for again")
	urgentRules := fs.String("urgent-rules", "", "comma-separated rule ids applied on a queue of their own "+
		"(with --urgent-workers), never behind the other rules' backlog: the ships' CRITICAL and HIGH rules; "+
		"every shore process needs the same list, changed only while those rules have nothing waiting")
	maxHeld := fs.Int("max-held", shore.MaxHeldDefault, "events one stream may hold past a gap; further ones are "+
		"answered RETRYABLE_FAILURE until the gap is filled")
	uploadMinor := fs.Int("upload-minor", wire.UploadMinor, "the highest upload minor offered to nodes: 1 lets them send "+
		"events column by column (protocol 1.1), 0 holds them at 1.0; both are accepted either way")
	cdcBrokers := fs.String("cdc-brokers", "", "Kafka-API brokers of the shore database's CDC topics, comma-separated: "+
		"run the shore CDC consumer, which turns the shore's own writes into downlink commands (empty: off)")
	cdcPrefix := fs.String("cdc-prefix", "sync.cdc.shore.", "the shore CDC consumer reads every topic whose name starts with this")
	cdcRules := fs.String("cdc-rules", "", "the shore's rules file (JSON, docs/shipsync/normalize.md; its database and "+
		"tables are the shore's): DOWNLINK and BOTH rules are forwarded. Required with --cdc-brokers")
	cdcTypes := fs.String("cdc-types", "", "JSON file typing the columns of envelopes without a schema (docs/shipsync/cdc.md)")
	nodeID := fs.String("node-id", "shore", "the shore's node id: the _sync_origin its capture writes on local writes and "+
		"the origin of its commands")
	cdcConnector := fs.String("cdc-connector-id", "capture-shore", "source_connector_id of the shore's events")
	cdcGroup := fs.String("cdc-group", "shipsync-shore-cdc", "consumer group of the shore CDC consumer (run one per group)")
	cdcInstance := fs.String("cdc-group-instance-id", "", "static membership of --cdc-group (KIP-345): a shore process "+
		"restarted under the same id takes the partitions back at once instead of after the session timeout (empty: dynamic)")
	arbiterOn := fs.Bool("arbiter", false, "run the conflict arbiter (needs --target): decide cases by each rule's "+
		"policy, write winning versions to the shore database, send decisions to the nodes, act on their answers")
	arbiterEvery := fs.Duration("arbiter-every", 2*time.Second, "how often the arbiter looks for work when idle")
	arbiterLease := fs.Duration("arbiter-lease", arbiter.LeaseDefault, "how long a case the arbiter claimed stays its "+
		"own; a case whose lease ran out (its arbiter died) is taken over by any arbiter, a restarted one included")
	logLevel := fs.String("log-level", "info", "debug, info, warn, error or off")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics, /healthz (liveness), /health (each subsystem's state, JSON) and /readyz (readiness: 503 while "+
		"PostgreSQL or --target does not answer a ping, or once stopping) on this address (empty: off); public and "+
		"read-only: :PORT means 127.0.0.1:PORT")
	consoleF := addConsoleFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync shore: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *maxConns < 1 {
		return errors.New("shipsync shore: --max-conns must be ≥ 1")
	}
	if *arbiterLease <= 0 {
		return errors.New("shipsync shore: --arbiter-lease must be positive")
	}
	if *certFile == "" || *keyFile == "" || *clientCA == "" {
		return errors.New("shipsync shore: --tls-cert, --tls-key and --client-ca are required (mutual TLS; make them with relay shipsync pki)")
	}
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert: %w", err)
	}
	cas, err := certPool(*clientCA)
	if err != nil {
		return fmt.Errorf("--client-ca: %w", err)
	}
	d, err := relaypgx.Open(ctx, *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer d.Close()
	clock := relayclock.System{}
	if err := migrateOrCheck(ctx, d, clock, *migrate, "shipsync shore", shore.MigrationLines(d)...); err != nil {
		return err
	}
	codec, err := wire.NewCodec(wire.Config{})
	if err != nil {
		return err
	}
	inbox, err := shore.NewInbox(d, codec, clock)
	if err != nil {
		return err
	}
	if *maxHeld < 1 {
		return errors.New("shipsync shore: --max-held must be ≥ 1")
	}
	if *uploadMinor < 0 || *uploadMinor > wire.UploadMinor {
		return fmt.Errorf("shipsync shore: --upload-minor must be 0 … %d", wire.UploadMinor)
	}
	offered := *uploadMinor
	if offered == 0 {
		offered = -1 // shore.Config: negative says 0
	}
	inbox.LimitHeld(*maxHeld)
	inbox.SetUrgentRules(splitList(*urgentRules))
	h, err := shore.NewHandler(shore.Config{Registry: shore.NewRegistry(d.Pool(), clock),
		Inbox: inbox, Codec: codec, Clock: clock, Limits: lim, Logger: log, UploadMinor: offered})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(h.Collectors()...)
	reg.MustRegister(shore.NewFleetMetrics(shore.NewRegistry(d.Pool(), clock)))
	ready, closeReady, err := shoreReadiness(d, *target, log)
	if err != nil {
		return err
	}
	defer closeReady()
	health := shore.NewHealth(shore.HealthConfig{Pool: d.Pool(), Clock: clock, Driver: d,
		Target: ready.checkPing("target"), Arbiter: *arbiterOn})
	reg.MustRegister(health)
	ready.health = func(ctx context.Context) any { return health.Report(ctx) }
	if *target != "" {
		stop, err := startApplier(ctx, env, d, inbox, *target, *instance, *applyWorkers, *urgentWorkers, reg, log)
		if err != nil {
			return err
		}
		defer stop()
	} else {
		log.Warn("shipsync shore: no --target: events are received and held for an applier, not applied here")
	}
	go watchGaps(ctx, inbox, clock, *gapGrace, *resendEvery, log)
	if *arbiterOn {
		if *target == "" {
			return errors.New("shipsync shore: --arbiter needs --target (decisions are written to the shore database)")
		}
		t, err := apply.OpenTarget(*target)
		if err != nil {
			return fmt.Errorf("--target %s: %w", dsn.Redact(*target), dsn.Scrub(err, *target))
		}
		defer t.Close()
		name := *instance
		if name == "" {
			host, _ := os.Hostname()
			name = cmp.Or(host, "shore") + "-" + randomHex(3)
		}
		a, err := arbiter.New(arbiter.Config{Pool: d.Pool(), Target: t, ShoreNode: *nodeID, Instance: name, Clock: clock,
			Lease: *arbiterLease, Logger: log})
		if err != nil {
			return err
		}
		arbiterDone := make(chan struct{})
		actx, stopArbiter := context.WithCancel(ctx)
		// Run gives its case leases up as it returns; stop it and wait for
		// that before the pool closes (also when serving failed and ctx
		// is still live).
		defer func() { stopArbiter(); <-arbiterDone }()
		go func() {
			defer close(arbiterDone)
			if err := a.Run(actx, *arbiterEvery); err != nil {
				log.Error("shipsync shore: arbiter stopped", "error", err)
			}
		}()
		fmt.Fprintf(env.Stdout, "shipsync shore: arbitrating conflicts as %s\n", name)
	}
	cdcFailed := make(chan error, 1)
	if *cdcBrokers != "" {
		if *cdcRules == "" {
			return errors.New("shipsync shore: --cdc-rules is required with --cdc-brokers")
		}
		rules, err := loadRulesFlag("cdc-rules", *cdcRules)
		if err != nil {
			return err
		}
		types, err := loadTypesFlag("cdc-types", *cdcTypes)
		if err != nil {
			return err
		}
		dl := shore.NewDownlink(d.Pool(), clock)
		n, err := shorecdc.NewNormalizer(*nodeID, *cdcConnector, 0, rules, dl)
		if err != nil {
			return err
		}
		dec, err := cdc.New(cdc.Config{Types: types})
		if err != nil {
			return err
		}
		var kopts []kgo.Opt
		if *cdcInstance != "" {
			kopts = append(kopts, kgo.InstanceID(*cdcInstance))
		}
		consumer, err := shorecdc.New(shorecdc.Config{Brokers: splitList(*cdcBrokers), TopicPrefix: *cdcPrefix,
			Group: *cdcGroup, KafkaOpts: kopts, Downlink: dl, Decoder: dec, Normalizer: n, Clock: clock, Logger: log})
		if err != nil {
			return err
		}
		go func() {
			if err := consumer.Run(ctx); err != nil {
				cdcFailed <- fmt.Errorf("shipsync shore: cdc consumer: %w", err)
			}
		}()
		fmt.Fprintf(env.Stdout, "shipsync shore: forwarding the shore's changes from topics %s* as node %s\n", *cdcPrefix, *nodeID)
	}
	cs, err := consoleF.start(d.Pool(), *target, *nodeID, nil, log)
	if err != nil {
		return err
	}
	if cs != nil {
		defer cs.stop()
		fmt.Fprintf(env.Stdout, "shipsync shore: console on %s/console/ (API %s/api/v1/)\n", cs.url, cs.url)
	}
	if mc, ok := metricsConfig(*metricsAddr, reg, log); ok {
		stopHTTP, err := startHTTP(log, withReadiness(mc, ready))
		if err != nil {
			return err
		}
		defer stopHTTP()
	}
	srv, err := relayhttp.Listen(relayhttp.Config{Name: "--addr", Addr: *addr, Handler: h,
		TLS: shore.ServerTLS(cert, cas, clock), Hosts: splitList(*hosts), Logger: log, MaxConns: *maxConns,
		// The handler bounds bodies itself (ERROR_CODE_BODY_TOO_LARGE); this
		// is the listener's outer bound, a little above.
		MaxBodyBytes: int64(codec.Config().MaxBytes) + 128<<10})
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	fmt.Fprintf(env.Stdout, "shipsync shore: listening on %s (mutual TLS)\n", srv.URL())
	log.Info("shipsync shore: limits", "limits", h.Limits().String())
	select {
	case <-ctx.Done():
		err = nil
	case err = <-served:
	case err = <-cdcFailed:
	}
	// Not ready from now on: an orchestrator stops sending requests while
	// those in flight drain; then the applier and the arbiter stop (deferred)
	// and release the leases of what they did not finish.
	ready.stop()
	sctx, cancel := context.WithTimeout(context.Background(), httpStopTimeout)
	defer cancel()
	return errors.Join(err, srv.Shutdown(sctx))
}
