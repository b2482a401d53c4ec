package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/complete"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaytype"
	"github.com/relayhq/relay/relaywork"
)

// chainFlags registers the flags every chain role shares.
func chainFlags(fs *flag.FlagSet, o *chainOpts) (logLevel *string, webhookSecretFile *string) {
	fs.StringVar(&o.pgURL, "postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL of the engine, the sms tables and the gateway's")
	fs.StringVar(&o.redisAddr, "redis", envOr("RELAY_REDIS_ADDR", "127.0.0.1:6379"), "Redis server holding the streams")
	fs.BoolVar(&o.migrate, "migrate", false, "apply the engine, relay_work, sms and sms_gateway migration lines first (otherwise an old schema is refused)")
	fs.StringVar(&o.instance, "instance-id", "", "this process's name: lease owner, consumer name (default: host and a random suffix)")
	fs.StringVar(&o.commandStream, "command-stream", gateway.CommandStreamDefault, "stream of submit commands")
	fs.StringVar(&o.resultStream, "result-stream", gateway.ResultStreamDefault, "stream of submit results")
	fs.StringVar(&o.reportStream, "report-stream", gateway.ReportStreamDefault, "stream of status reports")
	fs.DurationVar(&o.deadlines.Result, "result-deadline", complete.ResultDeadlineDefault,
		"a segment without a submit result this long after its attempt is unknown (never resent)")
	fs.DurationVar(&o.deadlines.Report, "report-deadline", complete.ReportDeadlineDefault,
		"a segment whose status report has not come this long after its attempt is unknown")
	fs.DurationVar(&o.workLease, "work-lease", relaywork.LeaseDefault,
		"how long the completion holds a claimed work record; a killed callback's claims pass to another after it")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "base URL of the customers' result callbacks (an app's topic is appended); empty: none")
	webhookSecretFile = fs.String("webhook-secret-file", "", "file holding the secret the callbacks are signed with (required with --webhook-url)")
	logLevel = fs.String("log-level", "warn", "log level (off, debug, info, warn, error)")
	poolsFlag(fs, &o.pools, smsPoolsDefault)
	return logLevel, webhookSecretFile
}

// runSmsRole runs the roles of the send chain in one process: `relay sms
// worker`, `publisher`, `callback` and `all` (which also serves the API).
func runSmsRole(name string, roles chainRoles, api bool) func(ctx context.Context, env *Env, args []string) error {
	return func(ctx context.Context, env *Env, args []string) error {
		setServerGOGC()
		fs := newFlags(env, "sms "+name, "sms "+name+" [flags]")
		o := chainOpts{roles: roles}
		logLevel, secretFile := chainFlags(fs, &o)
		metricsAddr := fs.String("metrics-addr", "", "serve /metrics and /healthz on this address (empty: off); public and "+
			"read-only: :PORT means 127.0.0.1:PORT, and a non-loopback address is logged as a warning")
		var lf *listenFlags
		if api {
			lf = addListenFlags(fs, "api", "the SMS API")
			lf.addr = smsAPIAddrDefault
			fs.Lookup("api-addr").DefValue = smsAPIAddrDefault
		}
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("sms %s: unexpected argument %s", name, relaytype.QuoteValue(fs.Arg(0)))
		}
		log, err := env.Logger(*logLevel)
		if err != nil {
			return err
		}
		o.log = log
		if o.webhookURL != "" {
			if *secretFile == "" {
				return errors.New("sms: --webhook-url needs --webhook-secret-file")
			}
			b, err := os.ReadFile(*secretFile)
			if err != nil {
				return fmt.Errorf("--webhook-secret-file: %w", err)
			}
			o.webhookSecret = []byte(strings.TrimSpace(string(b)))
		}
		c, err := openChain(ctx, o)
		if err != nil {
			return err
		}
		defer c.close()
		reg := prometheus.NewRegistry()
		work := c.work
		if c.cbWork != nil {
			work = c.cbWork // the claims' counters are the callback's store's
		}
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			work.Collector(), complete.Collector(c.intake, c.completer))
		if c.gw != nil {
			reg.MustRegister(c.gw.Collector())
		}
		if mc, ok := metricsConfig(*metricsAddr, reg, log); ok {
			stopHTTP, err := startHTTP(log, mc)
			if err != nil {
				return err
			}
			defer stopHTTP()
		}
		var srv *relayhttp.Server
		if api {
			h, err := admit.NewAPI(admit.APIConfig{Driver: c.apiD, Engine: c.apiEngine, Clock: c.o.clock, Logger: log})
			if err != nil {
				return err
			}
			cfg, _, err := lf.config(h, log)
			if err != nil {
				return err
			}
			if srv, err = relayhttp.Listen(cfg); err != nil {
				return err
			}
			go func() { _ = srv.Serve() }()
			defer func() {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpStopTimeout)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			fmt.Fprintf(env.Stdout, "sms %s: API on %s\n", name, srv.URL())
		}
		fmt.Fprintf(env.Stdout, "sms %s: running as %s (%s)\n", name, c.o.instance, describeRoles(roles))
		return c.run(ctx)
	}
}

func describeRoles(r chainRoles) string {
	var out []string
	for _, x := range []struct {
		on   bool
		what string
	}{{r.worker, "admission and routing"}, {r.publisher, "command and webhook publisher"}, {r.gateway, "gateway"},
		{r.callback, "callback intake and completion"}} {
		if x.on {
			out = append(out, x.what)
		}
	}
	return strings.Join(out, ", ")
}
