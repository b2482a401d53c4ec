package cli

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/simulate"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/relayadmin"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaysink/relaykafka"
)

// runMsgx dispatches `relay msgx <role>`.
func runMsgx(ctx context.Context, env *Env, args []string) error {
	roles := map[string]func(context.Context, *Env, []string) error{
		"run":      runMsgxRun,
		"migrate":  runMsgxMigrate,
		"mailbox":  runMsgxMailbox,
		"params":   runMsgxParams,
		"simulate": runMsgxSimulate,
		"verify":   runMsgxVerify,
		"request":  runMsgxRequest,
		"demo":     runMsgxDemo,
	}
	help := len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help")
	if len(args) == 0 || roles[args[0]] == nil {
		w := env.Stderr
		if help {
			w = env.Stdout // asked for: usage on stdout, exit 0
		}
		fmt.Fprintln(w, `usage: relay msgx <role> [flags]

roles:
  demo      the whole exchange on this machine: a simulated AODB day in a scratch mailbox, every role, Kafka in-process, progress, a reconciliation
  run       run every msgx role: intake, FIFO pump, write-back, dispatchers, jobs, HTTP entry
  migrate   create or upgrade the msgx PostgreSQL schema
  mailbox   create the CMINMSGS/COUTMSGS mailbox tables in a development database
  params    print every setting (PARAM key), its value and meaning
  simulate  write a simulated AODB operating day into CMINMSGS and save what must result
  verify    compare the store, the Kafka topics and the mailbox marks with a simulation
  request   register an outbound request (REQT-SCHD for a day, REQT-REFD for a type)

run `+"`relay msgx <role> -h`"+` for a role's flags`)
		switch {
		case help:
			return nil
		case len(args) == 0:
			return errors.New("msgx: missing role")
		}
		return fmt.Errorf("msgx: unknown role %q", args[0])
	}
	return roles[args[0]](ctx, env, args[1:])
}

// paramFlags collects repeated --param key=value flags.
type paramFlags []string

func (p *paramFlags) String() string { return strings.Join(*p, " ") }

func (p *paramFlags) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("want key=value, got %q", v)
	}
	*p = append(*p, v)
	return nil
}

// msgxConfigFlags registers --param and --params-file on fs and returns a
// function that builds the configuration after fs.Parse: defaults, then the
// file's key=value lines, then each --param in order.
func msgxConfigFlags(fs *flag.FlagSet) func() (msgx.Config, error) {
	var params paramFlags
	fs.Var(&params, "param", "set a PARAM key, e.g. --param msgx.flight.absent-field=clear (repeatable; `relay msgx params` lists them)")
	file := fs.String("params-file", "", "file of key=value lines (# comments) applied before --param")
	return func() (msgx.Config, error) {
		cfg := msgx.Defaults()
		if *file != "" {
			f, err := os.Open(*file)
			if err != nil {
				return cfg, err
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			for line := 1; sc.Scan(); line++ {
				t := strings.TrimSpace(sc.Text())
				if t == "" || strings.HasPrefix(t, "#") {
					continue
				}
				k, v, ok := strings.Cut(t, "=")
				if !ok {
					return cfg, fmt.Errorf("%s:%d: want key=value", *file, line)
				}
				if err := cfg.Set(strings.TrimSpace(k), v); err != nil {
					return cfg, fmt.Errorf("%s:%d: %w", *file, line, err)
				}
			}
			if err := sc.Err(); err != nil {
				return cfg, err
			}
		}
		for _, p := range params {
			k, v, _ := strings.Cut(p, "=")
			if err := cfg.Set(k, v); err != nil {
				return cfg, err
			}
		}
		return cfg, cfg.Validate()
	}
}

// openMailbox opens the MariaDB/MySQL mailbox with the DSN options intake
// needs (parseTime, UTC).
func openMailbox(ctx context.Context, mailbox string) (*sql.DB, error) {
	if mailbox == "" {
		return nil, errors.New("--mailbox is required (" + mysqldsn.Form + ")")
	}
	cfg, err := mysqldsn.Parse(mailbox)
	if err != nil {
		return nil, fmt.Errorf("--mailbox: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("mailbox %s: %w", dsn.Redact(mailbox), dsn.Scrub(err, mailbox))
	}
	boundPool(db)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("mailbox %s: %w", dsn.Redact(mailbox), dsn.Scrub(err, mailbox))
	}
	return db, nil
}

// openMsgxStores opens the msgx store and the mailbox; close releases both.
func openMsgxStores(ctx context.Context, storeURL, mailboxDSN string) (d *relaypgx.Driver, mb *sql.DB, close func(), err error) {
	d, err = openPG(ctx, storeURL)
	if err != nil {
		return nil, nil, nil, err
	}
	mb, err = openMailbox(ctx, mailboxDSN)
	if err != nil {
		_ = d.Close()
		return nil, nil, nil, err
	}
	return d, mb, func() { _ = mb.Close(); _ = d.Close() }, nil
}

func storeFlag(fs *flag.FlagSet) *string {
	return fs.String("store", envOr("RELAY_STORE", ""), "msgx PostgreSQL store (postgres://… or a keyword/value DSN); env RELAY_STORE")
}

func mailboxFlag(fs *flag.FlagSet) *string {
	return fs.String("mailbox", envOr("MSGX_MAILBOX", ""), "shared mailbox DSN (go-sql-driver/mysql); env MSGX_MAILBOX")
}

func runMsgxMigrate(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "msgx migrate", "msgx migrate --store URL")
	store := storeFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	d, err := openPG(ctx, *store)
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := msgx.Migrate(ctx, d, relayclock.System{})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "msgx migrate: %d migrations applied\n", len(res.Applied))
	return nil
}

// mailboxUsage is the help of `relay msgx mailbox`.
const mailboxUsage = `usage: relay msgx mailbox create --mailbox DSN

Creates CMINMSGS and COUTMSGS, if they do not exist, in the shape an AODB
site uses (docs/msgx/operations.md shows the DDL). For a development or test
database only: a site's mailbox belongs to the AODB and msgx never changes it.`

// runMsgxMailbox runs `relay msgx mailbox create`: the mailbox tables in the
// shape the AODB site uses, for a development or test database. A site's own
// mailbox already exists and belongs to the AODB; msgx never changes it.
func runMsgxMailbox(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 || args[0] != "create" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(env.Stdout, mailboxUsage)
			return nil
		}
		fmt.Fprintln(env.Stderr, mailboxUsage)
		return errors.New("msgx mailbox: the only action is create")
	}
	fs := newFlags(env, "msgx mailbox create", "msgx mailbox create --mailbox DSN")
	mailbox := mailboxFlag(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	mb, err := openMailbox(ctx, *mailbox)
	if err != nil {
		return err
	}
	defer mb.Close()
	if err := simulate.CreateMailbox(ctx, mb); err != nil {
		return fmt.Errorf("msgx mailbox create on %s: %w", dsn.Redact(*mailbox), dsn.Scrub(err, *mailbox))
	}
	fmt.Fprintf(env.Stdout, "msgx mailbox: CMINMSGS and COUTMSGS exist on %s\n", dsn.Redact(*mailbox))
	return nil
}

func runMsgxParams(_ context.Context, env *Env, args []string) error {
	fs := newFlags(env, "msgx params", "msgx params [--markdown] [--param k=v …]")
	markdown := fs.Bool("markdown", false, "print the Markdown table of docs/msgx/settings.md")
	build := msgxConfigFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := build()
	if err != nil {
		return err
	}
	if *markdown {
		return msgx.WriteParamsMarkdown(env.Stdout, &cfg)
	}
	return msgx.WriteParams(env.Stdout, &cfg)
}

func runMsgxRun(ctx context.Context, env *Env, args []string) error {
	setServerGOGC()
	fs := newFlags(env, "msgx run", "msgx run --store URL --mailbox DSN (--kafka-brokers HOSTS | --dev-kafka PORT) [--http-addr ADDR] "+
		"[--admin-addr ADDR] [--metrics-addr ADDR] [--param k=v …]")
	store := storeFlag(fs)
	mailbox := mailboxFlag(fs)
	brokers := fs.String("kafka-brokers", envOr("MSGX_KAFKA_BROKERS", ""), "comma-separated Kafka brokers; env MSGX_KAFKA_BROKERS")
	devKafka := fs.Int("dev-kafka", 0, "DEVELOPMENT ONLY: instead of --kafka-brokers, run an in-process Kafka-API broker "+
		"(franz-go's kfake) on 127.0.0.1:PORT with both topics; it keeps everything in memory and loses it on exit")
	sendFlags := addListenFlags(fs, "http", "the compatibility entry POST /cminmsgs/send")
	metricsAddr, adminFlags := addServiceFlags(fs)
	owner := fs.String("owner", defaultOwner(), "instance name in the pipeline lock and logs")
	logLevel := fs.String("log-level", "info", "log level (debug, info, warn, error)")
	build := msgxConfigFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := build()
	if err != nil {
		return err
	}
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	switch {
	case *devKafka != 0 && *brokers != "":
		return errors.New("--dev-kafka and --kafka-brokers exclude each other")
	case *devKafka != 0:
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(*devKafka),
			kfake.SeedTopics(4, cfg.MsgTopic, cfg.SchdTopic))
		if err != nil {
			return fmt.Errorf("--dev-kafka %d: %w", *devKafka, err)
		}
		defer cluster.Close()
		*brokers = strings.Join(cluster.ListenAddrs(), ",")
		log.Warn("msgx: development Kafka broker in this process (kfake): in memory only, lost on exit; not for production",
			"brokers", *brokers)
	case *brokers == "":
		return errors.New("--kafka-brokers is required (or --dev-kafka PORT for a development run)")
	}
	d, err := openPG(ctx, *store)
	if err != nil {
		return err
	}
	defer d.Close()
	clock := relayclock.System{}
	if _, err := msgx.Migrate(ctx, d, clock); err != nil {
		return err
	}
	mb, err := openMailbox(ctx, *mailbox)
	if err != nil {
		return err
	}
	defer mb.Close()
	sink, err := relaykafka.New(relaykafka.Config{Brokers: strings.Split(*brokers, ",")})
	if err != nil {
		return err
	}
	defer sink.Close(context.WithoutCancel(ctx))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	svc, err := msgx.New(msgx.Options{Config: cfg, Store: d, Mailbox: mb, Sink: sink, Owner: *owner,
		Clock: clock, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/cminmsgs/send", svc.SendHandler())
	sendCfg, sendOn, err := sendFlags.config(mux, log)
	if err != nil {
		return err
	}
	var extra []relayhttp.Config
	if sendOn {
		sendCfg.MaxBodyBytes = sisxml.MaxSize // the handler answers 413 above it
		extra = append(extra, sendCfg)
	}
	stopHTTP, err := startListeners(log, *metricsAddr, reg, adminFlags, relayadmin.Deps{Driver: d, Queue: cfg.Pipeline,
		Engine: svc.Engine(), Intake: svc.Intake(), Ack: svc.AckWriter(), OutboxTargets: []string{msgx.TargetMsg, msgx.TargetSchd},
		Active: svc.Active, Clock: clock, Logger: log}, extra...)
	if err != nil {
		return err
	}
	defer stopHTTP()
	log.Info("msgx: starting", "pipeline", cfg.Pipeline, "owner", *owner)
	return svc.Run(ctx)
}

func runMsgxRequest(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "msgx request", "msgx request --store URL --mailbox DSN schd YYYYMMDD | refd TYPE")
	store := storeFlag(fs)
	mailbox := mailboxFlag(fs)
	build := msgxConfigFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("usage: relay msgx request [flags] schd YYYYMMDD | refd TYPE")
	}
	cfg, err := build()
	if err != nil {
		return err
	}
	d, mb, closeStores, err := openMsgxStores(ctx, *store, *mailbox)
	if err != nil {
		return err
	}
	defer closeStores()
	log, _ := env.Logger("warn")
	r := msgx.NewRequester(cfg, d.Pool(), mb, relayclock.System{}, log)
	req, err := r.Register(ctx, strings.ToUpper(fs.Arg(0)), fs.Arg(1))
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "request %d registered: REQT-%s %s, SEQN %s, PENDING (the running instance sends it)\n",
		req.ID, req.Type, req.Scope, req.SEQN)
	return nil
}
