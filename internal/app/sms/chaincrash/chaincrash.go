package chaincrash

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/load"
	"github.com/relayhq/relay/internal/app/sms/reconcile"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/internal/supervise"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("chaincrash/queries.sql", queriesSQL, "CountMessages", "SetAddress", "Progress",
	"Attempts", "MessageIDs", "SetWebhookTopics")

// The figures of a full run (`relay sms chaos` without flags).
const (
	// MessagesDefault is the number of requests sent.
	MessagesDefault = 6000
	// TPSDefault is the rate they are offered at.
	TPSDefault = 200
	// KillsDefault is the number of SIGKILLs at random moments, spread
	// over the roles in turn.
	KillsDefault = 20
	// DropsDefault is the number of times one supplier drops every
	// connection.
	DropsDefault = 8
	// FaultProbabilityDefault is the chance that passing an armed point
	// kills an armed life.
	FaultProbabilityDefault = 0.2
	// LongShareDefault is the share of three-segment messages.
	LongShareDefault = 0.1
	// InFlightDefault bounds the requests waiting for an answer.
	InFlightDefault = 64
	// DrainTimeoutDefault bounds the wait, after the last request, until
	// every message is decided and the chain is quiet.
	DrainTimeoutDefault = 2 * time.Minute
	// RedisAddrDefault is the Redis server of the streams.
	RedisAddrDefault = "127.0.0.1:6379"
)

// The children's timing: short, so that what a killed life leaves behind
// is taken over within seconds. The gateway settles a claim older than
// staleClaim UNKNOWN and takes over entries idle for minIdle; the
// completion takes over a work record whose lease passed, decides a
// segment without a result after resultDeadline and one without a report
// after reportDeadline (both UNKNOWN: never resent).
const (
	submitTimeout  = 2 * time.Second
	staleClaim     = 3 * time.Second
	minIdle        = 4 * time.Second
	claimInterval  = time.Second
	workLease      = 5 * time.Second
	resultDeadline = 15 * time.Second
	reportDeadline = 20 * time.Second
	stopTimeout    = 30 * time.Second
	settlePoll     = 500 * time.Millisecond
	settleTimeout  = 30 * time.Second
	apiStart       = 30 * time.Second
)

// Options shape one run.
type Options struct {
	// Binary is the relay executable every role runs as; required.
	Binary string
	// PostgresURL is a fresh PostgreSQL schema (a URL or keyword/value DSN
	// with its search_path); required. The harness migrates it and seeds
	// the fixture, and refuses a schema that holds messages.
	PostgresURL string
	// RedisAddr is the Redis server (RedisAddrDefault). The run's streams
	// have names of their own and are deleted at the end.
	RedisAddr string
	// Dir holds the channels' secret files and the suppliers' records;
	// required.
	Dir string
	// Messages is the number of requests (at least 1), sent at TPS (> 0)
	// with at most InFlight waiting (InFlightDefault when 0); LongShare of
	// them are three-segment messages (0: LongShareDefault; negative:
	// none).
	Messages  int
	TPS       float64
	InFlight  int
	LongShare float64
	// Kills is the number of SIGKILLs at random moments while the requests
	// go out, one role after another (api, worker, publisher, gateway,
	// callback). After every other kill of a role with fault points its
	// next life is armed at all of them with FaultProbability (0:
	// FaultProbabilityDefault).
	Kills            int
	FaultProbability float64
	// Drops is the number of times a supplier, picked at random, drops
	// every connection while the requests go out.
	Drops int
	// RestartRedis, when set, restarts the Redis server (losing what it
	// held) RedisRestarts times while the requests go out; the roles run
	// on (the gateway and the intake create their lost consumer groups
	// again).
	RestartRedis  func(ctx context.Context) error
	RedisRestarts int
	// DrainTimeout bounds the drain (DrainTimeoutDefault when 0).
	DrainTimeout time.Duration
	// Seed makes the plan repeatable: kill moments, roles' draws, the
	// suppliers' draws. Timing, and so the exact counts, still differ.
	Seed uint64
	// Out receives progress lines; nil: none.
	Out io.Writer
}

func (o Options) withDefaults() Options {
	o.RedisAddr = cmp.Or(o.RedisAddr, RedisAddrDefault)
	o.InFlight = cmp.Or(o.InFlight, InFlightDefault)
	o.FaultProbability = cmp.Or(o.FaultProbability, FaultProbabilityDefault)
	o.DrainTimeout = cmp.Or(o.DrainTimeout, DrainTimeoutDefault)
	switch {
	case o.LongShare == 0:
		o.LongShare = LongShareDefault
	case o.LongShare < 0:
		o.LongShare = 0
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.Binary == "", o.PostgresURL == "", o.Dir == "":
		return errors.New("chaincrash: Binary, PostgresURL and Dir are required")
	case o.Messages < 1, o.TPS <= 0, o.InFlight < 0:
		return fmt.Errorf("chaincrash: Messages %d and TPS %g must be positive, InFlight %d not negative", o.Messages, o.TPS, o.InFlight)
	case o.Kills < 0, o.Drops < 0, o.RedisRestarts < 0:
		return fmt.Errorf("chaincrash: Kills %d, Drops %d, RedisRestarts %d must not be negative", o.Kills, o.Drops, o.RedisRestarts)
	case o.RedisRestarts > 0 && o.RestartRedis == nil:
		return errors.New("chaincrash: RedisRestarts needs RestartRedis")
	case o.FaultProbability < 0 || o.FaultProbability > 1:
		return fmt.Errorf("chaincrash: FaultProbability %g: want 0 to 1", o.FaultProbability)
	case o.LongShare > 1:
		return fmt.Errorf("chaincrash: LongShare %g is over 1", o.LongShare)
	}
	return nil
}

// Result is what a run did and what the reconciliation found.
type Result struct {
	// Streams is the prefix of the run's stream names.
	Streams string
	// Send is the client's side.
	Send SendStats
	// Roles are the roles' counters by role name.
	Roles map[string]supervise.RoleStats
	// Drops counts the supplier drop events, DroppedConns the connections
	// they closed; RedisRestarts the Redis restarts.
	Drops, DroppedConns, RedisRestarts int
	// Messages are the sms_message rows; Completed, Refused their final
	// states; Attempts and Retries the sms_attempt rows; Delivered, Failed,
	// Unknown the numbers' outcomes.
	Messages, Completed, Refused, Attempts, Retries, Delivered, Failed, Unknown int64
	// Submits are the Submits the suppliers accepted (their records).
	Submits int
	// Webhooks counts the messages notified (distinct event ids verified
	// by the receiver), WebhookDeliveries the deliveries (at least once:
	// a publisher killed after a send and before its mark sends again),
	// WebhookBad those whose signature did not verify.
	Webhooks, WebhookDeliveries, WebhookBad int
	// Drain is the time from the last answer until every message was
	// decided and the chain quiet.
	Drain time.Duration
	// Problems are what the harness itself found wrong: roles that exited
	// on their own or did not stop cleanly, answers that disagree with the
	// database.
	Problems []string
	// Report is the reconciliation; nil when the run stopped before it.
	Report *reconcile.Report
	// Elapsed is the wall time of the run.
	Elapsed time.Duration
}

// OK reports whether the run found no problem.
func (r *Result) OK() bool { return len(r.Problems) == 0 && r.Report != nil && r.Report.OK() }

// Kills is the number of SIGKILLs the harness sent, FaultDeaths the lives
// a fault point ended.
func (r *Result) Kills() (kills, faultDeaths int) {
	for _, s := range r.Roles {
		kills += s.Kills
		for _, n := range s.Faults {
			faultDeaths += n
		}
	}
	return kills, faultDeaths
}

// Write prints the run's figures and the reconciliation.
func (r *Result) Write(w io.Writer) {
	s := r.Send
	fmt.Fprintf(w, "requests:  %d messages (%d long) in %s: %d posts, %d resends; %d accepted, %d answered as duplicates\n",
		s.Requests, s.Long, s.Window.Round(time.Millisecond), s.Posts, s.Resends, s.Accepted, s.Duplicates)
	kills, faults := r.Kills()
	fmt.Fprintf(w, "kills:     %d SIGKILLs, %d deaths at fault points\n", kills, faults)
	for _, name := range Roles {
		st, ok := r.Roles[name]
		if !ok {
			continue
		}
		var pts []string
		for _, p := range slices.Sorted(func(yield func(string) bool) {
			for k := range st.Faults {
				if !yield(k) {
					return
				}
			}
		}) {
			pts = append(pts, fmt.Sprintf("%s %d", p, st.Faults[p]))
		}
		fp := "none"
		if len(pts) > 0 {
			fp = strings.Join(pts, ", ")
		}
		fmt.Fprintf(w, "  %-9s %2d lives (%d armed), %2d SIGKILLs, fault points: %s\n", name, st.Lives, st.ArmedLives, st.Kills, fp)
	}
	fmt.Fprintf(w, "suppliers: %d drops closing %d connections; %d Submits accepted; Redis restarts: %d\n",
		r.Drops, r.DroppedConns, r.Submits, r.RedisRestarts)
	fmt.Fprintf(w, "messages:  %d (%d completed, %d refused); %d attempts, %d of them retries; numbers %d delivered, %d failed, %d unknown\n",
		r.Messages, r.Completed, r.Refused, r.Attempts, r.Retries, r.Delivered, r.Failed, r.Unknown)
	fmt.Fprintf(w, "webhooks:  %d messages notified in %d deliveries, %d refused signatures\n", r.Webhooks,
		r.WebhookDeliveries, r.WebhookBad)
	fmt.Fprintf(w, "drain:     %s after the last answer\n", r.Drain.Round(time.Millisecond))
	if r.Report != nil {
		fmt.Fprintln(w)
		_ = r.Report.Write(w)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
	fmt.Fprintf(w, "wall time: %s\n", r.Elapsed.Round(time.Millisecond))
}

// names are a run's streams.
type names struct{ prefix, commands, results, reports string }

func newNames(tag string) names {
	p := "sms:chaos:" + tag + ":"
	return names{prefix: p, commands: p + "submit", results: p + "result", reports: p + "report"}
}

func (n names) all() []string { return []string{n.commands, n.results, n.reports} }

// Run carries out one run: the fixture in the schema, a simulated supplier
// per channel in this process, every role as a child process, the requests
// through the API while roles are killed in turn (some lives armed at
// fault points), suppliers drop their connections and (optionally) Redis
// restarts; then a clean life of every role until every message is decided
// and the chain is quiet, a clean stop, and the reconciliation. It returns
// an error when the run could not be carried out or found a problem (then
// with the Result). ctx governs the whole run; its end kills the children.
func Run(ctx context.Context, o Options) (*Result, error) {
	began := time.Now()
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0xc4a05))
	tag := fmt.Sprintf("%012x", rand.Uint64()>>16) // not from Seed: reruns must not meet
	appName := "relay-chaos-" + tag
	pgURL, err := dsn.WithParam(o.PostgresURL, "application_name", appName)
	if err != nil {
		return nil, fmt.Errorf("chaincrash: postgres: %w", err)
	}
	d, err := relaypgx.Open(ctx, pgURL)
	if err != nil {
		return nil, fmt.Errorf("chaincrash: postgres %s: %w", dsn.Redact(pgURL), dsn.Scrub(err, pgURL))
	}
	defer d.Close()
	db := d.Pool()
	lines := append([]relaymigrate.Line{relaymigrate.EngineLineOf(d)}, tenancy.MigrationLines()...)
	if _, err := relaymigrate.Up(ctx, d, relayclock.System{}, append(lines, gateway.MigrationLine())...); err != nil {
		return nil, err
	}
	var used int64
	if err := db.QueryRow(ctx, stmts["CountMessages"]).Scan(&used); err != nil {
		return nil, fmt.Errorf("chaincrash: count messages: %w", err)
	}
	if used > 0 {
		return nil, fmt.Errorf("chaincrash: the schema already holds %d messages (an earlier run?): a run needs a fresh schema", used)
	}
	rdb := redis.NewClient(&redis.Options{Addr: o.RedisAddr, DisableIdentity: true})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("chaincrash: redis %s: %w", o.RedisAddr, err)
	}
	n := newNames(tag)
	defer rdb.Del(context.WithoutCancel(ctx), n.all()...)

	creds, err := seed(ctx, db, o.Dir)
	if err != nil {
		return nil, err
	}
	sups, err := startSuppliers(ctx, db, o.Dir, rng.Uint64())
	if err != nil {
		return nil, err
	}
	defer sups.close()

	hooks, err := startWebhooks(o.Dir)
	if err != nil {
		return nil, err
	}
	defer hooks.close()
	if _, err := db.Exec(ctx, stmts["SetWebhookTopics"]); err != nil {
		return nil, fmt.Errorf("chaincrash: webhook topics: %w", err)
	}
	apiAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	res := &Result{Streams: n.prefix, Roles: map[string]supervise.RoleStats{}}
	var outMu sync.Mutex // the roles, the plans and the progress all write lines
	out := func(format string, a ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(o.Out, "%6.1fs "+format+"\n", append([]any{time.Since(began).Seconds()}, a...)...)
	}
	roles := map[string]*supervise.Role{}
	for _, name := range Roles {
		roles[name] = supervise.NewRole(name, o.Binary, roleArgs(name, pgURL, o.RedisAddr, apiAddr, n, hooks.args), nil,
			RolePoints[name], rng.Uint64(), out)
	}
	defer func() {
		for _, r := range roles {
			r.Abort()
		}
	}()
	fmt.Fprintf(o.Out, "send chain crash harness: %d requests at %g/s to the API on %s; %d SIGKILLs over %s in turn "+
		"(every other restart armed at its fault points, p=%g); %d supplier drops; %d Redis restarts; streams %s*\n",
		o.Messages, o.TPS, apiAddr, o.Kills, strings.Join(Roles, ", "), o.FaultProbability, o.Drops, o.RedisRestarts, n.prefix)
	for _, name := range Roles {
		if err := roles[name].Start(); err != nil {
			return nil, err
		}
	}

	// The requests, and the chaos while they go out, once the API answers.
	if err := waitHTTP(ctx, "http://"+apiAddr+"/v1/messages/0", apiStart); err != nil {
		return nil, fmt.Errorf("chaincrash: the API: %w", err)
	}
	out("the API answers; sending")
	snd := newSender("http://"+apiAddr, creds, "chaos-"+tag+"-", o.LongShare)
	window := time.Duration(float64(o.Messages) / o.TPS * float64(time.Second))
	progress := func() string { return progressLine(ctx, db, snd) }
	chaosCtx, stopChaos := context.WithCancel(ctx)
	var chaos sync.WaitGroup
	var chaosMu sync.Mutex
	killSeed, dropSeed, redisSeed := rng.Uint64(), rng.Uint64(), rng.Uint64()
	chaos.Go(func() {
		killPlan(chaosCtx, o, killSeed, window, roles, progress, out)
	})
	chaos.Go(func() {
		d, c := dropPlan(chaosCtx, o.Drops, dropSeed, window, sups, out)
		chaosMu.Lock()
		res.Drops, res.DroppedConns = d, c
		chaosMu.Unlock()
	})
	if o.RedisRestarts > 0 {
		chaos.Go(func() {
			k := redisPlan(chaosCtx, o, redisSeed, window, out)
			chaosMu.Lock()
			res.RedisRestarts = k
			chaosMu.Unlock()
		})
	}
	sendBegan := time.Now()
	ticker := time.NewTicker(2 * time.Second)
	sent := make(chan struct{})
	go func() {
		snd.run(ctx, o.Messages, o.TPS, o.InFlight)
		close(sent)
	}()
sending:
	for {
		select {
		case <-sent:
			break sending
		case <-ticker.C:
			out("%s", progress())
		}
	}
	ticker.Stop()
	res.Send = SendStats{Requests: o.Messages, Long: int(snd.long.Load()), Posts: snd.posts.Load(), Resends: snd.resends.Load(),
		Accepted: snd.accepted.Load(), Duplicates: snd.duplicates.Load(), Window: time.Since(sendBegan)}
	stopChaos()
	chaos.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out("every request answered: %s", progress())

	// A clean life of every role until the chain is drained and quiet.
	for _, name := range Roles {
		if r := roles[name]; r.Armed() {
			what, err := r.Kill("")
			if err != nil {
				return nil, err
			}
			out("  %-9s SIGKILL %s: the last life runs clean", name, what)
		}
	}
	drainBegan := time.Now()
	if _, err := load.Drain(ctx, db, time.Time{}, relayclock.System{}, o.DrainTimeout, nil); err != nil {
		return nil, fmt.Errorf("chaincrash: %w (%s)", err, progress())
	}
	out("every message decided: %s", progress())
	// Every role's sessions are named under appName (their --postgres
	// carries it), so the health check sees them while they run: the last
	// settling reconciliation's, kept — the final one runs with every role
	// stopped.
	recOpts := reconcile.Options{Redis: rdb, Streams: n.all(), ApplicationName: appName}
	live, err := settle(ctx, db, recOpts)
	if err != nil {
		return nil, err
	}
	if h := live.Check(reconcile.CheckHealth); h != nil {
		out("db-health while every role ran: %s", strings.Join(h.Figures, "; "))
		for _, f := range h.Failures {
			res.Problems = append(res.Problems, "db-health while every role ran: "+f)
		}
	}
	res.Drain = time.Since(drainBegan)
	for _, name := range Roles {
		if err := roles[name].Stop(stopTimeout); err != nil {
			res.Problems = append(res.Problems, err.Error())
		}
	}
	for _, name := range Roles {
		st := roles[name].Stats()
		res.Roles[name] = st
		res.Problems = append(res.Problems, st.OwnExits...)
	}
	records, submits, err := sups.stop()
	if err != nil {
		return nil, err
	}
	res.Submits = submits
	out("every role stopped cleanly; reconciling")

	recOpts.SupplierRecords = records
	rep, err := reconcile.Run(ctx, db, recOpts)
	if err != nil {
		return nil, err
	}
	res.Report = rep
	if err := figures(ctx, db, res); err != nil {
		return nil, err
	}
	res.Problems = append(res.Problems, snd.problems...)
	if err := checkAnswers(ctx, db, snd, o.Messages); err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	res.Webhooks, res.WebhookDeliveries, res.WebhookBad = hooks.counts()
	if int64(res.Webhooks) != res.Completed || res.WebhookBad != 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("webhooks: %d messages notified for %d completed, %d refused signatures",
			res.Webhooks, res.Completed, res.WebhookBad))
	}
	res.Elapsed = time.Since(began)
	if !res.OK() {
		return res, fmt.Errorf("chaincrash: %d problems, reconciliation failed checks: %v", len(res.Problems), rep.Failed())
	}
	return res, nil
}

// webhookArgs are the publisher's webhook receiver and secret file.
type webhookArgs struct{ url, secretFile string }

// roleArgs are the command line of a role's every life: a fixed instance
// name (consumer name, lease owner) so that a restart takes up what its
// predecessor left, and the harness's short timings.
func roleArgs(name, pgURL, redisAddr, apiAddr string, n names, hook webhookArgs) []string {
	streams := []string{"--command-stream", n.commands, "--result-stream", n.results, "--report-stream", n.reports}
	deadlines := []string{"--result-deadline", resultDeadline.String(), "--report-deadline", reportDeadline.String()}
	common := []string{"--postgres", pgURL, "--redis", redisAddr, "--instance-id", "chaos-" + name, "--log-level", "error"}
	switch name {
	case RoleAPI:
		return []string{"sms", "api", "--postgres", pgURL, "--no-stage", "--api-addr", apiAddr}
	case RoleGateway:
		return append([]string{"sms", "gateway", "--channels-from-db", "--postgres", pgURL, "--redis", redisAddr,
			"--consumer", "chaos-gateway", "--submit-timeout", submitTimeout.String(), "--stale-claim", staleClaim.String(),
			"--min-idle", minIdle.String(), "--claim-interval", claimInterval.String(), "--log-level", "error"}, streams...)
	case RoleCallback:
		args := append([]string{"sms", name, "--work-lease", workLease.String()}, common...)
		return append(append(args, streams...), deadlines...)
	case RolePublisher:
		args := append([]string{"sms", name, "--webhook-url", hook.url, "--webhook-secret-file", hook.secretFile}, common...)
		return append(append(args, streams...), deadlines...)
	default: // worker
		args := append([]string{"sms", name}, common...)
		return append(append(args, streams...), deadlines...)
	}
}

// seed writes a secret file per channel and seeds the fixture; it returns
// the apps' credentials by "enterprise/app".
func seed(ctx context.Context, db *pgxpool.Pool, dir string) (map[string]tenancy.AppCredentials, error) {
	secretOf := func(name string) string { return filepath.Join(dir, "channel-"+name+".secret") }
	for _, name := range tenancy.DemoChannels {
		if err := os.WriteFile(secretOf(name), []byte(fmt.Sprintf("chaos-%016x\n", rand.Uint64())), 0o600); err != nil {
			return nil, fmt.Errorf("chaincrash: %w", err)
		}
	}
	creds := map[string]tenancy.AppCredentials{}
	if _, err := tenancy.Seed(ctx, db, tenancy.DemoFixture(func(name string) string { return "file:" + secretOf(name) }),
		tenancy.SeedOpts{Clock: relayclock.System{}, NewApp: func(c tenancy.AppCredentials) error {
			creds[c.Enterprise+"/"+c.App] = c
			return nil
		}}); err != nil {
		return nil, fmt.Errorf("chaincrash: seed: %w", err)
	}
	for _, app := range []string{appShort, appLong} {
		if _, ok := creds[app]; !ok {
			return nil, fmt.Errorf("chaincrash: the fixture has no app %s", app)
		}
	}
	return creds, nil
}

// suppliers are the simulated suppliers, one per channel.
type suppliers struct {
	names   []string
	srvs    []*supplier.Server
	records []string
	stopped bool
	cancel  context.CancelFunc
	served  sync.WaitGroup
}

// startSuppliers starts a simulated supplier per channel on loopback, each
// recording its accepted Submits to a file in dir, and points the
// channel's address at it. SubmitResps come after 1 to 5 ms, reports 5 to
// 100 ms later, 3% of them not delivered (retried through another
// channel).
func startSuppliers(ctx context.Context, db *pgxpool.Pool, dir string, seed uint64) (*suppliers, error) {
	snap, err := tenancy.Load(ctx, db, relayclock.System{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &suppliers{cancel: cancel}
	for i, ch := range snap.Data().Channels {
		path, ok := strings.CutPrefix(ch.SecretRef, "file:")
		if !ok {
			s.close()
			return nil, fmt.Errorf("chaincrash: channel %s: secret_ref is not a file", ch.Name)
		}
		secret, err := os.ReadFile(path)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("chaincrash: %w", err)
		}
		v := cmpp.V30
		if ch.CMPPVersion == "2.0" {
			v = cmpp.V20
		}
		record := filepath.Join(dir, "supplier-"+ch.Name+".jsonl")
		srv, err := supplier.New(supplier.Config{
			Accounts: []supplier.Account{{SourceAddr: ch.SPID, Secret: string(bytes.TrimSpace(secret)), Versions: []cmpp.Version{v}}},
			Behaviour: supplier.Behaviour{
				Latency:     supplier.Dist{Kind: supplier.DistUniform, Min: time.Millisecond, Max: 5 * time.Millisecond},
				ReportDelay: supplier.Dist{Kind: supplier.DistUniform, Min: 5 * time.Millisecond, Max: 100 * time.Millisecond},
				ReportStats: []supplier.Weighted[string]{{Value: "DELIVRD", Weight: 97}, {Value: "UNDELIV", Weight: 3}},
			},
			Record: supplier.RecordConfig{Path: record}, Seed: seed + uint64(i), Clock: relayclock.System{}})
		if err != nil {
			s.close()
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			_ = srv.Close()
			s.close()
			return nil, err
		}
		s.names, s.srvs, s.records = append(s.names, ch.Name), append(s.srvs, srv), append(s.records, record)
		s.served.Go(func() { _ = srv.Serve(ctx, ln) })
		if _, err := db.Exec(ctx, stmts["SetAddress"], ln.Addr().String(), ch.Name); err != nil {
			s.close()
			return nil, fmt.Errorf("chaincrash: channel %s address: %w", ch.Name, err)
		}
	}
	return s, nil
}

// stop closes every supplier (and its record) and returns the records and
// the Submits they hold.
func (s *suppliers) stop() (records []string, submits int, err error) {
	s.close()
	for _, path := range s.records {
		rec, err := supplier.ReadRecord(path)
		if err != nil {
			return nil, 0, err
		}
		submits += rec.Counts().Submits
	}
	return s.records, submits, nil
}

func (s *suppliers) close() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.cancel()
	for _, srv := range s.srvs {
		_ = srv.Close()
	}
	s.served.Wait()
}

// waitHTTP waits up to d until url answers (any status).
func waitHTTP(ctx context.Context, url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer after %s: %w", d, err)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// freeAddr is a loopback address with a free port (the API's, the same in
// every life).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// at returns the moments of k events spread over window: one in each of k
// equal slots, at a random place in the slot's middle half.
func at(k int, window time.Duration, r *rand.Rand) []time.Duration {
	out := make([]time.Duration, k)
	slot := window / time.Duration(max(k, 1))
	for i := range out {
		out[i] = time.Duration(i)*slot + slot/4 + time.Duration(r.Float64()*float64(slot/2))
	}
	return out
}

// sleepUntil waits until start+d; false when ctx ended first.
func sleepUntil(ctx context.Context, start time.Time, d time.Duration) bool {
	select {
	case <-time.After(time.Until(start.Add(d))):
		return true
	case <-ctx.Done():
		return false
	}
}

// killPlan kills the roles in turn at o.Kills random moments of window;
// after every other kill of a role with fault points its next life is
// armed.
func killPlan(ctx context.Context, o Options, seed uint64, window time.Duration, roles map[string]*supervise.Role,
	progress func() string, out func(string, ...any)) {
	r := rand.New(rand.NewPCG(seed, 1))
	start := time.Now()
	perRole := map[string]int{}
	for i, t := range at(o.Kills, window, r) {
		if !sleepUntil(ctx, start, t) {
			return
		}
		name := Roles[i%len(Roles)]
		ro := roles[name]
		arm := ""
		if perRole[name]%2 == 0 {
			arm = ro.ArmSpec(o.FaultProbability)
		}
		perRole[name]++
		what, err := ro.Kill(arm)
		next := "clean"
		if arm != "" {
			next = "armed at " + strings.Join(RolePoints[name], ", ")
		}
		if err != nil {
			out("  %-9s SIGKILL %s; restart failed: %v", name, what, err)
			continue
		}
		out("  %-9s SIGKILL %s; next life %s · %s", name, what, next, progress())
	}
}

// dropPlan makes a random supplier drop every connection at k random
// moments of window; it returns the drops and the connections closed.
func dropPlan(ctx context.Context, k int, seed uint64, window time.Duration, s *suppliers, out func(string, ...any)) (int, int) {
	r := rand.New(rand.NewPCG(seed, 2))
	start := time.Now()
	drops, conns := 0, 0
	for _, t := range at(k, window, r) {
		if !sleepUntil(ctx, start, t) {
			break
		}
		i := r.IntN(len(s.srvs))
		c := s.srvs[i].DropConns()
		drops++
		conns += c
		out("  supplier %s dropped %d connections", s.names[i], c)
	}
	return drops, conns
}

// redisPlan restarts Redis at o.RedisRestarts random moments of window.
// The roles are left running: the gateway and the callback's intake
// create their lost consumer groups again, the publisher's stream writes
// reconnect.
func redisPlan(ctx context.Context, o Options, seed uint64, window time.Duration, out func(string, ...any)) int {
	r := rand.New(rand.NewPCG(seed, 3))
	start := time.Now()
	k := 0
	for _, t := range at(o.RedisRestarts, window, r) {
		if !sleepUntil(ctx, start, t) {
			break
		}
		if err := o.RestartRedis(ctx); err != nil {
			out("  redis restart failed: %v", err)
			continue
		}
		k++
		out("  redis restarted: its streams and consumer groups are gone")
	}
	return k
}

// progressLine is one line of the run's state.
func progressLine(ctx context.Context, db *pgxpool.Pool, s *sender) string {
	var total, admitted, completed, refused, submits int64
	if err := db.QueryRow(ctx, stmts["Progress"]).Scan(&total, &admitted, &completed, &refused, &submits); err != nil {
		return "progress: " + err.Error()
	}
	return fmt.Sprintf("answered %d (%d resends) · messages %d: admitted %d, completed %d, refused %d · submits %d",
		s.accepted.Load()+s.duplicates.Load(), s.resends.Load(), total, admitted, completed, refused, submits)
}

// settle waits until a reconciliation without the supplier records passes:
// the outbox, the completion work and the streams are quiet too.
func settle(ctx context.Context, db *pgxpool.Pool, opts reconcile.Options) (*reconcile.Report, error) {
	deadline := time.Now().Add(settleTimeout)
	for {
		rep, err := reconcile.Run(ctx, db, opts)
		if err != nil {
			return nil, err
		}
		if rep.OK() || time.Now().After(deadline) {
			return rep, nil // the final reconciliation tells what is wrong
		}
		select {
		case <-time.After(settlePoll):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// figures reads the run's counts from the database.
func figures(ctx context.Context, db *pgxpool.Pool, res *Result) error {
	var admitted, submits int64
	if err := db.QueryRow(ctx, stmts["Progress"]).Scan(&res.Messages, &admitted, &res.Completed, &res.Refused, &submits); err != nil {
		return fmt.Errorf("chaincrash: figures: %w", err)
	}
	if err := db.QueryRow(ctx, stmts["Attempts"]).Scan(&res.Attempts, &res.Retries, &res.Delivered, &res.Failed, &res.Unknown); err != nil {
		return fmt.Errorf("chaincrash: figures: %w", err)
	}
	return nil
}

// checkAnswers compares the API's answers with the database: one message
// per request, and the message id each answer named is that message's.
func checkAnswers(ctx context.Context, db *pgxpool.Pool, s *sender, n int) error {
	rows, err := db.Query(ctx, stmts["MessageIDs"], s.idPrefix)
	if err != nil {
		return fmt.Errorf("chaincrash: message ids: %w", err)
	}
	defer rows.Close()
	byClient := map[string]int64{}
	for rows.Next() {
		var client string
		var id int64
		if err := rows.Scan(&client, &id); err != nil {
			return fmt.Errorf("chaincrash: message ids: %w", err)
		}
		byClient[client] = id
	}
	if err := rows.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var bad []string
	for i := range n {
		c := s.clientID(i)
		id, ok := byClient[c]
		a, answered := s.answered[c]
		switch {
		case !ok:
			bad = append(bad, c+": no message")
		case !answered:
			bad = append(bad, c+": never answered")
		case a != id:
			bad = append(bad, fmt.Sprintf("%s: answered %d, the message is %d", c, a, id))
		}
	}
	if len(byClient) != n {
		bad = append(bad, fmt.Sprintf("%d messages for %d requests", len(byClient), n))
	}
	if len(bad) > 0 {
		return fmt.Errorf("chaincrash: %d answers disagree with the database: %s", len(bad), strings.Join(bad[:min(len(bad), 5)], "; "))
	}
	return nil
}

// String names the figures in one line (for a test's log).
func (r *Result) String() string {
	kills, faults := r.Kills()
	return "chaos: " + strconv.Itoa(kills) + " kills, " + strconv.Itoa(faults) + " fault deaths, " +
		strconv.FormatInt(r.Messages, 10) + " messages, " + strconv.FormatInt(r.Attempts, 10) + " attempts, " +
		strconv.FormatInt(r.Retries, 10) + " retries, " + r.Elapsed.Round(time.Millisecond).String()
}
