package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // foreign MySQL/MariaDB sources
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	_ "modernc.org/sqlite" // foreign SQLite sources

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/demo"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/relayadmin"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaylock"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relayservice"
	"github.com/relayhq/relay/relaysink/relaykafka"
	"github.com/relayhq/relay/relaysource"
)

// runServe runs the demo pipeline (watermark intake over a foreign table →
// global FIFO → projection) as a long-lived service. Only one instance per
// pipeline is active: others wait for the pipeline lock (seed 000 §4.5).
func runServe(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "serve", "serve --store URL --source-driver sqlite|mysql --source-dsn DSN [flags]")
	store := fs.String("store", envOr("RELAY_STORE", ""), "store: postgres://…, a keyword/value DSN (host=… dbname=…), sqlite:PATH or a path like ./relay.db; env RELAY_STORE")
	queue := fs.String("queue", "demo", "queue name")
	srcDriver := fs.String("source-driver", "sqlite", "foreign source driver: sqlite or mysql")
	srcDSN := fs.String("source-dsn", "", "foreign source DSN (SQLite file path, or a go-sql-driver/mysql DSN)")
	srcTable := fs.String("source-table", "source_messages", "foreign table (columns id, payload, received_at)")
	seed := fs.String("seed", "", "cutover seeding (min, zero, max or an id); refused if the queue already has a watermark or messages")
	delay := fs.Duration("max-commit-delay", 60*time.Second, "how long a hole may wait for a late commit before it is released as permanent")
	poll := fs.Duration("poll", time.Second, "poll interval of intake and engine")
	metricsAddr, adminFlags := addServiceFlags(fs)
	owner := fs.String("owner", defaultOwner(), "instance name in the lock and logs")
	lockTTL := fs.Duration("lock-ttl", relaylock.TTLDefault, "lease length on lease-based stores (SQLite)")
	logLevel := fs.String("log-level", "info", "log level (debug, info, warn, error)")
	kafkaBrokers := fs.String("kafka-brokers", "", "comma-separated Kafka brokers: the handler appends a change event per applied message to the outbox and a dispatcher delivers them (empty: no outbox stage)")
	ack := fs.Bool("ack", false, "write processing marks back to the source (columns procflag, proctime) with the acknowledgement write-back")
	ackR := fs.Duration("ack-deadline", time.Hour, "R: the forced-write window and transient-failure deadline of the acknowledgement write-back")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	if *srcDSN == "" {
		return errors.New("--source-dsn is required")
	}
	dialect := relaysource.Dialect(*srcDriver)
	if dialect != relaysource.DialectSQLite && dialect != relaysource.DialectMySQL {
		return fmt.Errorf("--source-driver %q: want sqlite or mysql", *srcDriver)
	}
	if dialect == relaysource.DialectMySQL {
		if _, err := mysqldsn.Parse(*srcDSN); err != nil {
			return fmt.Errorf("--source-dsn: %w", err)
		}
	}
	d, err := openStore(ctx, *store)
	if err != nil {
		return err
	}
	defer d.Close()
	clock := relayclock.System{}
	line, err := demo.MigrationLine(d.Name())
	if err != nil {
		return err
	}
	if _, err := relaymigrate.Up(ctx, d, clock, relaymigrate.EngineLineOf(d), line); err != nil {
		return err
	}
	src, err := sql.Open(*srcDriver, *srcDSN)
	if err != nil {
		return fmt.Errorf("open source %s: %w", dsn.Redact(*srcDSN), dsn.Scrub(err, *srcDSN))
	}
	boundPool(src)
	defer src.Close()
	tableCfg := relaysource.SQLTableConfig{
		Dialect: dialect, Table: *srcTable, IDColumn: "id", PayloadColumn: "payload", ReceivedAtColumn: "received_at",
	}
	if *ack {
		tableCfg.MarkColumn, tableCfg.MarkTimeColumn = "procflag", "proctime"
	}
	table, err := relaysource.NewSQLTable(src, tableCfg)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	intake, err := relayintake.New(d, table, relayintake.Config{Queue: *queue, MaxCommitDelay: *delay,
		PollInterval: *poll, Clock: clock, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	handler := &demo.Handler{Queue: *queue}
	var dispatchers []*relay.Dispatcher
	var targets []string
	if *kafkaBrokers != "" {
		handler.Target = "kafka-" + *queue
		targets = []string{handler.Target}
		sink, err := relaykafka.New(relaykafka.Config{Brokers: strings.Split(*kafkaBrokers, ",")})
		if err != nil {
			return err
		}
		defer sink.Close(context.WithoutCancel(ctx))
		dispatcher, err := relay.NewDispatcher(d, sink, relay.DispatcherConfig{Target: handler.Target, BatchSize: 1000,
			PollInterval: *poll, Clock: clock, Logger: log, Registerer: reg})
		if err != nil {
			return err
		}
		dispatchers = append(dispatchers, dispatcher)
	}
	engine, err := relay.NewEngine(d, relay.Config{Queue: *queue, Mode: relay.ModeFIFO,
		Handler: handler, IgnoreRules: demo.IgnoreRules, Watermarked: true, FIFOBatch: 16, AckIntent: *ack,
		PollInterval: *poll, Clock: clock, Logger: log, Registerer: reg, InstanceID: *owner})
	if err != nil {
		return err
	}
	var ackWriter *relay.AckWriter
	if *ack {
		ackWriter, err = relay.NewAckWriter(d, table, relay.AckConfig{Queue: *queue, Gate: engine.Gate(), R: *ackR,
			PollInterval: *poll, Clock: clock, Logger: log, Registerer: reg})
		if err != nil {
			return err
		}
	}
	svc, err := relayservice.New(relayservice.Config{Name: "pipeline:" + *queue, Owner: *owner, Driver: d,
		Intake: intake, Engine: engine, Dispatchers: dispatchers, AckWriter: ackWriter, LockTTL: *lockTTL,
		Clock: clock, Logger: log, Prepare: func(ctx context.Context) error {
			if *seed == "" {
				return nil
			}
			w, err := intake.Seed(ctx, *seed)
			if err != nil {
				return fmt.Errorf("seed %q: %w", *seed, err)
			}
			log.InfoContext(ctx, "watermark seeded", "queue", *queue, "mode", *seed, "watermark", w)
			return nil
		}})
	if err != nil {
		return err
	}
	stopHTTP, err := startListeners(log, *metricsAddr, reg, adminFlags, relayadmin.Deps{Driver: d, Queue: *queue,
		Engine: engine, Intake: intake, Ack: ackWriter, OutboxTargets: targets, Active: svc.Active, Clock: clock, Logger: log})
	if err != nil {
		return err
	}
	defer stopHTTP()
	if err := svc.Run(ctx); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

func defaultOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}
