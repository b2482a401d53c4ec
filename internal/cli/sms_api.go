package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/complete"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relayservice"
	"github.com/relayhq/relay/relaytype"
)

// smsAPIAddrDefault is where `relay sms api` listens without --api-addr.
const smsAPIAddrDefault = "127.0.0.1:8090"

// runSmsAPI serves the send chain's HTTP API (internal/app/sms/admit) and,
// unless --no-stage, runs the admission stage on the sms-admit queue in the
// same process until ctx ends.
func runSmsAPI(ctx context.Context, env *Env, args []string) error {
	setServerGOGC()
	fs := newFlags(env, "sms api", "sms api --postgres URL [--migrate] [--api-addr 127.0.0.1:8090] [--no-stage]")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL of the engine and the sms tables")
	migrate := fs.Bool("migrate", false, "apply the engine and sms migration lines first (otherwise an old schema is refused)")
	noStage := fs.Bool("no-stage", false, "only accept requests; another process runs the admission stage")
	instance := fs.String("instance-id", "", "lease owner name of this process's stage (default: a random one)")
	maxBody := fs.Int64("max-body", admit.MaxBodyDefault, "largest POST body in bytes (413 above)")
	acceptBatch := fs.Int("accept-batch", admit.AcceptBatchDefault,
		"most requests committed together in one accept transaction (group commit; 1: each alone)")
	acceptConc := fs.Int("accept-concurrency", admit.AcceptConcurrencyDefault,
		"accept transactions open at once; requests arriving while all are busy wait for the next")
	secretTTL := fs.Duration("secret-ttl", admit.SecretTTLDefault,
		"reuse an app's key and secret from memory this long (a suspended app is refused at most this late; negative: read every request)")
	api := addListenFlags(fs, "api", "the SMS API")
	api.addr = smsAPIAddrDefault
	addr := fs.Lookup("api-addr")
	addr.DefValue = smsAPIAddrDefault
	addr.Usage = "serve the SMS API (POST /v1/messages, GET /v1/messages/{id}) on this address; :PORT means " +
		"127.0.0.1:PORT, and a non-loopback address needs --api-token-file or --api-client-ca (mutual TLS)"
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sms api: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if api.addr == "" {
		return errors.New("sms api: --api-addr is empty")
	}
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d, err := relaypgx.Open(ctx, *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer d.Close()
	clock := relayclock.System{}
	lines := append([]relaymigrate.Line{relaymigrate.EngineLineOf(d)}, tenancy.MigrationLines()...)
	if *migrate {
		if _, err := relaymigrate.Up(ctx, d, clock, lines...); err != nil {
			return err
		}
	} else if err := relaymigrate.Check(ctx, d, lines...); err != nil {
		return fmt.Errorf("sms api: %w (run with --migrate)", err)
	}
	var stage *admit.Stage
	if !*noStage {
		work, err := complete.NewWorkStore(d.Pool(), nil)
		if err != nil {
			return err
		}
		if stage, err = admit.NewStage(admit.StageConfig{Driver: d, Clock: clock, Work: work, Logger: log}); err != nil {
			return err
		}
	}
	engine, err := relay.NewEngine(d, admit.EngineConfig(stage, *instance, clock, log))
	if err != nil {
		return err
	}
	h, err := admit.NewAPI(admit.APIConfig{Driver: d, Engine: engine, Clock: clock, MaxBody: *maxBody, Logger: log,
		AcceptBatch: *acceptBatch, AcceptConcurrency: *acceptConc, SecretTTL: *secretTTL})
	if err != nil {
		return err
	}
	cfg, _, err := api.config(h, log)
	if err != nil {
		return err
	}
	cfg.MaxBodyBytes = *maxBody
	srv, err := relayhttp.Listen(cfg)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	fmt.Fprintf(env.Stdout, "sms api: listening on %s (queue %s, stage %s)\n", srv.URL(), admit.Queue,
		map[bool]string{true: "off", false: "on"}[*noStage])

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	if stage != nil {
		// Shared: claims are leased message by message, so several processes
		// may run the stage on one queue.
		svc, err := relayservice.New(relayservice.Config{Driver: d, Engine: engine, Shared: true, Clock: clock, Logger: log})
		if err != nil {
			return errors.Join(err, srv.Shutdown(context.Background()))
		}
		go func() { ran <- svc.Run(ctx) }()
	} else {
		go func() { <-ctx.Done(); ran <- nil }()
	}
	select {
	case err = <-ran:
		stop()
	case err = <-served:
		stop()
		err = errors.Join(err, <-ran)
	}
	sctx, cancel := context.WithTimeout(context.Background(), httpStopTimeout)
	defer cancel()
	return errors.Join(err, srv.Shutdown(sctx))
}
