package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/relayadmin"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaysink/relaykafka"
)

// captureActions are the actions of `relay shipsync capture`.
func captureActions() map[string]command {
	return map[string]command{
		"install": {"check the tables and create the changelog and the capture triggers (idempotent: a re-run " +
			"replaces the triggers, e.g. after ALTER TABLE)", runCaptureInstall},
		"uninstall": {"drop the capture triggers (every installed table, or --tables); the changelog stays " +
			"unless --drop-changelog", runCaptureUninstall},
		"run": {"capture: changelog → watermark intake → SQLite state (--state) → Debezium envelopes → Kafka, " +
			"a topic per table (sync.cdc.<logical>.<db>.<table>)", runCaptureRun},
		"topics": {"print the topics of the installed tables (the Kafka sink does not ask the broker to create " +
			"topics: create them first)", runCaptureTopics},
		"prune": {"delete the changelog rows already in the capture's local store (run also does it every " +
			"minute)", runCapturePrune},
	}
}

// runShipsyncCapture dispatches `relay shipsync capture <action>`.
func runShipsyncCapture(ctx context.Context, env *Env, args []string) error {
	return dispatchRoles(ctx, env, "shipsync capture", "docs/shipsync/capture.md", captureActions(), args)
}

// openCaptureDB opens the business database of --db.
func openCaptureDB(ctx context.Context, dsn string) (*sql.DB, error) {
	if dsn == "" {
		return nil, errors.New("--db is required (" + mysqldsn.Form + ")")
	}
	db, err := openMailbox(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("--db: %w", err)
	}
	return db, nil
}

// openCaptureStores opens the business database of --db and the SQLite
// state of --state; closeAll closes both.
func openCaptureStores(ctx context.Context, db, state string) (*sql.DB, *relaysqlite.Driver, func(), error) {
	if state == "" {
		return nil, nil, nil, errors.New("--state is required (a file path)")
	}
	conn, err := openCaptureDB(ctx, db)
	if err != nil {
		return nil, nil, nil, err
	}
	store, err := relaysqlite.Open(ctx, state)
	if err != nil {
		_ = conn.Close()
		return nil, nil, nil, fmt.Errorf("--state: %w", err)
	}
	return conn, store, func() { _ = store.Close(); _ = conn.Close() }, nil
}

func runCaptureInstall(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync capture install", "shipsync capture install --db DSN --node-id ID --tables T1,T2")
	db := fs.String("db", envOr("CAPTURE_DB", ""), "the business database (MariaDB/MySQL DSN naming the database); env CAPTURE_DB")
	nodeID := fs.String("node-id", "", "this node's id, written to _sync_origin by local writes")
	tables := fs.String("tables", "", "comma-separated tables to capture")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := openCaptureDB(ctx, *db)
	if err != nil {
		return err
	}
	defer conn.Close()
	installed, err := capture.Install(ctx, conn, capture.InstallConfig{NodeID: *nodeID, Tables: splitList(*tables)})
	if err != nil {
		return err
	}
	for _, t := range installed {
		fmt.Fprintf(env.Stdout, "capture install: %s.%s: %d columns, key (%s), triggers installed\n", t.DB, t.Name,
			len(t.Columns), strings.Join(t.Key, ", "))
	}
	return nil
}

func runCaptureUninstall(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync capture uninstall", "shipsync capture uninstall --db DSN [--tables T1,T2] [--drop-changelog]")
	db := fs.String("db", envOr("CAPTURE_DB", ""), "the business database; env CAPTURE_DB")
	tables := fs.String("tables", "", "comma-separated tables (default: every installed table)")
	drop := fs.Bool("drop-changelog", false, "also drop _sync_changelog and the capture metadata tables (changes not captured yet are lost)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := openCaptureDB(ctx, *db)
	if err != nil {
		return err
	}
	defer conn.Close()
	done, err := capture.Uninstall(ctx, conn, capture.UninstallConfig{Tables: splitList(*tables), DropChangelog: *drop})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "capture uninstall: triggers dropped on %d tables (%s); changelog %s\n", len(done),
		strings.Join(done, ", "), map[bool]string{true: "dropped", false: "kept"}[*drop])
	return nil
}

func runCaptureRun(ctx context.Context, env *Env, args []string) error {
	err := captureRun(ctx, env, args)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Stopped (SIGTERM, SIGINT) while starting up: a clean stop, as
		// once running; nothing was left half done.
		return nil
	}
	return err
}

func captureRun(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync capture run", "shipsync capture run --db DSN --state FILE --logical NAME "+
		"(--brokers HOSTS | --dev-kafka PORT)")
	db := fs.String("db", envOr("CAPTURE_DB", ""), "the business database; env CAPTURE_DB")
	state := fs.String("state", "", "the capture's SQLite state file (queue, watermark, outbox); created if absent")
	logical := fs.String("logical", "", "Debezium's topic.prefix: source.name and the topic part after sync.cdc")
	maxCommitDelay := fs.Duration("max-commit-delay", capture.MaxCommitDelayDefault,
		"how long a changelog id may stay invisible (its transaction open) before it is given up as a hole")
	poll := fs.Duration("poll-interval", capture.PollIntervalDefault,
		"how often the changelog, the capture's queue and its outbox are polled when idle")
	noHoleProbe := fs.Bool("no-hole-probe", false,
		"release a hole in the changelog ids only after --max-commit-delay, without asking MariaDB (INNODB_TRX, PROCESS privilege) whether the transaction that took the id has ended")
	brokers := fs.String("brokers", envOr("CAPTURE_BROKERS", ""), "comma-separated Kafka-API brokers; env CAPTURE_BROKERS")
	devKafka := fs.Int("dev-kafka", 0, "DEVELOPMENT ONLY: instead of --brokers, run an in-process Kafka-API broker "+
		"(franz-go's kfake) on 127.0.0.1:PORT with the topics of the tables installed now; in memory only, lost on exit")
	logLevel := fs.String("log-level", "info", "log level (debug, info, warn, error)")
	metricsAddr, adminFlags := addServiceFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *devKafka != 0 && *brokers != "":
		return errors.New("--dev-kafka and --brokers exclude each other")
	case *devKafka != 0:
		topics, err := captureTopics(ctx, *db, *logical)
		if err != nil {
			return err
		}
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(*devKafka), kfake.SeedTopics(1, topics...))
		if err != nil {
			return fmt.Errorf("--dev-kafka %d: %w", *devKafka, err)
		}
		defer cluster.Close()
		*brokers = strings.Join(cluster.ListenAddrs(), ",")
		fmt.Fprintf(env.Stderr, "capture: development Kafka broker in this process (kfake) at %s: in memory only, "+
			"lost on exit; not for production\n", *brokers)
	case *brokers == "":
		return errors.New("--brokers is required (or --dev-kafka PORT for a development run)")
	}
	sink, err := relaykafka.New(relaykafka.Config{Brokers: strings.Split(*brokers, ",")})
	if err != nil {
		return err
	}
	defer sink.Close(context.WithoutCancel(ctx))
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	conn, store, closeAll, err := openCaptureStores(ctx, *db, *state)
	if err != nil {
		return err
	}
	defer closeAll()
	clock := relayclock.System{}
	if err := capture.Migrate(ctx, store, clock); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	c, err := capture.New(capture.Config{DB: conn, Store: store, Sink: sink, Logical: *logical,
		MaxCommitDelay: *maxCommitDelay, NoHoleProbe: *noHoleProbe, PollInterval: *poll, Owner: defaultOwner(), Clock: clock, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	stopHTTP, err := startListeners(log, *metricsAddr, reg, adminFlags, relayadmin.Deps{Driver: store,
		Queue: capture.QueueDefault, Engine: c.Engine(), Intake: c.Intake(), OutboxTargets: []string{capture.TargetDefault},
		Active: c.Active, Clock: clock, Logger: log})
	if err != nil {
		return err
	}
	defer stopHTTP()
	log.Info("capture: starting", "logical", *logical, "state", *state)
	return c.Run(ctx)
}

// captureTopics lists the topics of the installed tables of --db.
func captureTopics(ctx context.Context, dsn, logical string) ([]string, error) {
	conn, err := openCaptureDB(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return capture.Topics(ctx, conn, "", logical)
}

func runCaptureTopics(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync capture topics", "shipsync capture topics --db DSN --logical NAME")
	db := fs.String("db", envOr("CAPTURE_DB", ""), "the business database; env CAPTURE_DB")
	logical := fs.String("logical", "", "Debezium's topic.prefix, as given to run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	topics, err := captureTopics(ctx, *db, *logical)
	if err != nil {
		return err
	}
	for _, t := range topics {
		fmt.Fprintln(env.Stdout, t)
	}
	return nil
}

func runCapturePrune(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync capture prune", "shipsync capture prune --db DSN --state FILE")
	db := fs.String("db", envOr("CAPTURE_DB", ""), "the business database; env CAPTURE_DB")
	state := fs.String("state", "", "the capture's SQLite state file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, store, closeAll, err := openCaptureStores(ctx, *db, *state)
	if err != nil {
		return err
	}
	defer closeAll()
	if err := relaymigrate.Check(ctx, store, relaymigrate.EngineLineOf(store)); err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	n, err := capture.PruneChangelog(ctx, conn, store, capture.PruneOpts{})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "capture prune: %d changelog rows deleted\n", n)
	return nil
}
