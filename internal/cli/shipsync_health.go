package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaytype"
)

// readyTimeoutDefault bounds each dependency ping of /readyz: an orchestrator
// asks every few seconds, and a database that does not answer within it is
// as good as down for the requests this process would take.
const readyTimeoutDefault = 2 * time.Second

// readyCheck is one dependency /readyz pings: name is what a failure says
// ("postgres", "target"), ping answers within ctx or fails.
type readyCheck struct {
	name string
	ping func(ctx context.Context) error
}

// readiness serves /healthz (liveness: the process answers) and /readyz
// (readiness: 200 while every check answers within timeout; 503 with the
// first failing check's name and a short reason, or "stopping" once stop was
// called). The body never carries a driver's error text (addresses, users):
// the detail goes to log, once per change of state. Safe for concurrent use.
type readiness struct {
	checks   []readyCheck
	timeout  time.Duration
	log      *slog.Logger
	stopping atomic.Bool

	mu   sync.Mutex
	last string // the last answer's reason ("" : ready), to log changes only

	// health, when set, answers /health: the subsystems' states as JSON.
	health func(ctx context.Context) any
}

// checkPing returns the ping of the check named name (nil: none).
func (r *readiness) checkPing(name string) func(context.Context) error {
	for _, c := range r.checks {
		if c.name == name {
			return c.ping
		}
	}
	return nil
}

// newReadiness returns the probes of checks, each ping bounded by timeout
// (≤ 0: readyTimeoutDefault).
func newReadiness(log *slog.Logger, timeout time.Duration, checks ...readyCheck) *readiness {
	if timeout <= 0 {
		timeout = readyTimeoutDefault
	}
	return &readiness{checks: checks, timeout: timeout, log: log}
}

// stop makes /readyz fail from now on (the process is draining), so an
// orchestrator sends it no new requests.
func (r *readiness) stop() { r.stopping.Store(true) }

// check returns "" when ready, otherwise a short reason.
func (r *readiness) check(ctx context.Context) string {
	if r.stopping.Load() {
		return "stopping"
	}
	for _, c := range r.checks {
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		err := c.ping(cctx)
		cancel()
		if err == nil {
			continue
		}
		reason := c.name + ": ping failed"
		if errors.Is(err, context.DeadlineExceeded) {
			reason = fmt.Sprintf("%s: no answer within %s", c.name, r.timeout)
		}
		r.changed(reason, err)
		return reason
	}
	r.changed("", nil)
	return ""
}

// changed logs a change of readiness (not every probe).
func (r *readiness) changed(reason string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reason == r.last {
		return
	}
	r.last = reason
	if reason == "" {
		r.log.Info("readiness: ready again")
		return
	}
	r.log.Warn("readiness: not ready", "reason", reason, "error", err)
}

// handler answers /healthz and /readyz; other paths go to next.
func (r *readiness) handler(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if reason := r.check(req.Context()); reason != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", reason)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if r.health != nil {
		mux.HandleFunc("/health", func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			_ = json.NewEncoder(w).Encode(r.health(req.Context()))
		})
	}
	mux.Handle("/", next)
	return mux
}

// withReadiness returns cfg (a public probes listener, metricsConfig) also
// serving r's /healthz and /readyz.
func withReadiness(cfg relayhttp.Config, r *readiness) relayhttp.Config {
	cfg.Handler = r.handler(cfg.Handler)
	return cfg
}

// shoreReadiness is the readiness of `relay shipsync shore`: its PostgreSQL
// and, when targetDSN is set, the shore business database, pinged through a
// small pool of its own (so a busy applier's pool does not make the probe
// fail). closeFn closes that pool.
func shoreReadiness(d *relaypgx.Driver, targetDSN string, log *slog.Logger) (r *readiness, closeFn func(), err error) {
	checks := []readyCheck{{name: "postgres", ping: d.Pool().Ping}}
	closeFn = func() {}
	if targetDSN != "" {
		t, err := apply.OpenTarget(targetDSN)
		if err != nil {
			return nil, nil, fmt.Errorf("--target %s: %w", dsn.Redact(targetDSN), dsn.Scrub(err, targetDSN))
		}
		t.DB().SetMaxOpenConns(2)
		checks = append(checks, readyCheck{name: "target", ping: t.DB().PingContext})
		closeFn = func() { _ = t.Close() }
	}
	return newReadiness(log, readyTimeoutDefault, checks...), closeFn, nil
}

// probeTimeoutDefault bounds `relay shipsync probe`.
const probeTimeoutDefault = 5 * time.Second

// runShipsyncProbe GETs a probe URL and fails unless it answers 2xx: the
// health check of a container whose image has no shell or curl.
func runShipsyncProbe(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync probe", "shipsync probe [--timeout 5s] http://127.0.0.1:PORT/readyz")
	timeout := fs.Duration("timeout", probeTimeoutDefault, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("shipsync probe: one URL expected, e.g. http://127.0.0.1:9464/readyz")
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("shipsync probe: %s is not an http(s) URL", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *timeout <= 0 {
		return errors.New("shipsync probe: --timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("shipsync probe: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("shipsync probe: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	msg := strings.TrimSpace(strings.ToValidUTF8(string(body), "?"))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("shipsync probe: HTTP %d %s", resp.StatusCode, relaytype.QuoteValue(msg))
	}
	fmt.Fprintln(env.Stdout, msg)
	return nil
}
