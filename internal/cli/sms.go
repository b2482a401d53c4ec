package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// smsRoles are the roles of `relay sms`; a new role (the gateway, the
// callback processor…) is one line here.
func smsRoles() map[string]command {
	return map[string]command{
		"all":       {"every role of the send chain in one process: the API (127.0.0.1:8090), admission and routing, the command publisher, the gateway (channels from sms_channel) and the callback intake and completion (docs/sms/send.md)", runSmsRole("all", chainRoles{worker: true, publisher: true, gateway: true, callback: true}, true)},
		"callback":  {"stage D: read the gateway's results and status reports into the completion's event log and decide every attempt (retry once elsewhere, settle, complete, notify), on its own connection pool", runSmsRole("callback", chainRoles{callback: true}, false)},
		"publisher": {"stage C: publish the routed submit commands from the outbox to the gateway's command stream (and the customers' webhooks with --webhook-url)", runSmsRole("publisher", chainRoles{publisher: true}, false)},
		"worker":    {"stages A and B without the API: admit (rules, limits, billing freeze) and route what the API accepted into submit records and commands", runSmsRole("worker", chainRoles{worker: true}, false)},
		"api":       {"the send chain's HTTP API: signed POST /v1/messages into the sms-admit inbox (202 once durable; a resent client_msg_id answers its first message id) and GET /v1/messages/{id}; runs the admission stage — rules, limits, billing freeze — unless --no-stage (docs/sms/api.md)", runSmsAPI},
		"chaos":     {"the send chain's crash harness: every role (api, worker, publisher, gateway, callback) a child process, killed with SIGKILL in turn and at fault points and restarted while signed requests go through the API, suppliers dropping their connections (and with --restart-redis a Redis restart); then drained, stopped and reconciled — nothing lost, submitted twice or billed twice (exit 1 on any problem)", runSmsChaos},
		"crash":     {"the gateway's crash harness: a supplier and `relay sms gateway` children killed with SIGKILL at random moments and at fault points over N commands, then every submitId reconciled (exit 1 on any problem)", runSmsCrash},
		"demo":      {"the whole send chain on this machine for a newcomer: a scratch schema with the fixture, a simulated supplier per channel, every role in one process, N signed requests with a progress line, then a reconciliation (exit 1 on any problem)", runSmsDemo},
		"gateway":   {"consume submit commands from a Redis Stream, submit each once (durable dedupe by submitId in PostgreSQL) over per-channel CMPP pools, write results, reports and MO to streams; --demo N runs it against an in-process simulator", runSmsGateway},
		"load":      {"offer load tiers (5 … 2,000 requests/s) through the signed API to the whole chain on this machine (the demo's set-up), drain and reconcile after each tier, and print offered rate, client p50/p95/p99 and full supplier submits per second", runSmsLoad},
		"reconcile": {"check a drained send chain from its databases: no accepted message lost, ids unique, each submitId accepted by a supplier at most once and retries linked, inbox, outbox, work and streams drained, ledger identities, database health; prints a table and exits 1 when a check fails", runSmsReconcile},
		"seed-data": {"load a realistic tenancy fixture into PostgreSQL, idempotently: 3 carriers and their number segments, 6 supplier accounts, 2 enterprises with signatures, templates, blacklists, apps, routes, prices and balances (docs/sms/model.md)", runSmsSeedData},
		"supplier":  {"run a simulated carrier gateway (CMPP 2.0/3.0 ISMG) for tests: accounts, window, latency, failures, reports, MO, drops, a record of accepted Submits", runSmsSupplier},
	}
}

// runSms dispatches `relay sms <role>`.
func runSms(ctx context.Context, env *Env, args []string) error {
	return dispatchRoles(ctx, env, "sms", "docs/sms/cmpp.md", smsRoles(), args)
}

// dispatchRoles runs `relay <app> <role>`: the usage (roles listed, a
// pointer to docs) on stdout for no role or -h, on stderr with an error for
// an unknown one.
func dispatchRoles(ctx context.Context, env *Env, app, docs string, roles map[string]command, args []string) error {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: relay %s <role> [flags]\n\nroles:\n", app)
		listCommands(w, roles)
		fmt.Fprintf(w, "\nrun `relay %s <role> -h` for a role's flags (%s)\n", app, docs)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stdout)
		return nil
	}
	r, ok := roles[args[0]]
	if !ok {
		usage(env.Stderr)
		return fmt.Errorf("%s: unknown role %q", app, args[0])
	}
	return r.run(ctx, env, args[1:])
}

// accountFlags collects --account SP_ID:SECRET values (repeatable, each a
// comma-separated list).
type accountFlags []string

func (a *accountFlags) String() string { return fmt.Sprintf("%d accounts", len(*a)) }

func (a *accountFlags) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*a = append(*a, item)
		}
	}
	return nil
}

// parseAccounts turns SP_ID:SECRET items into accounts; errors never quote
// a secret.
func parseAccounts(items []string, versions []cmpp.Version, window, maxConns int, rate float64) ([]supplier.Account, error) {
	var out []supplier.Account
	for i, item := range items {
		id, secret, ok := strings.Cut(item, ":")
		if !ok || secret == "" {
			return nil, fmt.Errorf("--account #%d: want SP_ID:SECRET", i+1)
		}
		out = append(out, supplier.Account{SourceAddr: id, Secret: secret, Versions: versions,
			Window: window, MaxConns: maxConns, Rate: rate})
	}
	return out, nil
}

// parseVersions reads "2.0,3.0".
func parseVersions(s string) ([]cmpp.Version, error) {
	var out []cmpp.Version
	for _, v := range strings.Split(s, ",") {
		switch strings.TrimSpace(v) {
		case "2.0", "2":
			out = append(out, cmpp.V20)
		case "3.0", "3":
			out = append(out, cmpp.V30)
		default:
			return nil, fmt.Errorf("--versions: %s is not 2.0 or 3.0", relaytype.QuoteValue(v))
		}
	}
	return out, nil
}

func runSmsSupplier(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "sms supplier", "sms supplier --account SP_ID:SECRET[,…] [--listen ADDR] [--record FILE] [flags]")
	var accounts accountFlags
	if v := envOr("SMS_SUPPLIER_ACCOUNTS", ""); v != "" {
		_ = accounts.Set(v)
	}
	fs.Var(&accounts, "account", "an SP account SP_ID:SECRET (SP_ID: 6 digits); repeatable or comma-separated; env SMS_SUPPLIER_ACCOUNTS keeps secrets out of the process list")
	listen := fs.String("listen", "127.0.0.1:7890", "address to listen on (loopback by default; 7890 is the standard's long-connection port)")
	versions := fs.String("versions", "2.0,3.0", "CMPP versions every account may log in with")
	window := fs.Int("window", supplier.WindowDefault, "W: unanswered Submits allowed per connection")
	windowAction := fs.String("window-action", "flow-control", "a Submit past the window: flow-control (Result 8) or drop (the connection)")
	maxConns := fs.Int("max-conns", supplier.MaxConnsDefault, "logged-in connections per account")
	rate := fs.Float64("rate", 0, "Submits (destinations) per second per account, then Result 8; 0: no bound")
	latency := fs.String("latency", "0", "SubmitResp delay: D, uniform:A..B or exp:[MIN+]MEAN[..MAX]")
	reportDelay := fs.String("report-delay", "0", "status-report delay after the SubmitResp (same forms as --latency)")
	failRate := fs.Float64("fail-rate", 0, "share of Submits refused with a --results code")
	results := fs.String("results", "13", "failure Results and weights, CODE[=WEIGHT],…")
	flowRate := fs.Float64("flow-control-rate", 0, "share of Submits refused with Result 8")
	noAnswerRate := fs.Float64("no-answer-rate", 0, "share of accepted Submits never answered (still recorded and reported)")
	stats := fs.String("stats", "DELIVRD", "report Stat values and weights, STAT[=WEIGHT],… e.g. DELIVRD=95,UNDELIV=3,EXPIRED=2")
	beforeRate := fs.Float64("report-before-resp-rate", 0, "share of Submits whose reports come before their SubmitResp")
	dupRate := fs.Float64("duplicate-report-rate", 0, "share of reports sent twice")
	dropEvery := fs.Int("drop-every", 0, "drop the connection after every N-th accepted Submit, unanswered (0: never)")
	dropRate := fs.Float64("drop-rate", 0, "share of accepted Submits after which the connection is dropped")
	moEvery := fs.Duration("mo-every", 0, "send an MO to every logged-in account this often (0: never)")
	moText := fs.String("mo-text", supplier.MOTextDefault, "the MO text (long ones go in UDH parts)")
	moFrom := fs.String("mo-from", supplier.MOFromDefault, "the MO's sending handset")
	record := fs.String("record", "", "append every accepted Submit to this file (JSON lines; empty: no record)")
	recordSync := fs.String("record-sync", "write", "record durability before the SubmitResp: write (survives a process crash) or fsync (a machine crash too)")
	seed := fs.Uint64("seed", 1, "seed of every random draw (same seed and traffic, same decisions)")
	ismgCode := fs.Uint("ismg-code", supplier.ISMGCodeDefault, "ISMG code packed into every Msg_Id")
	keepalive := fs.Duration("keepalive", supplier.KeepaliveDefault, "C: send ActiveTest after this long idle (negative: never)")
	respTimeout := fs.Duration("response-timeout", supplier.ResponseTimeoutDefault, "T: wait this long for an ActiveTest or Deliver answer")
	tries := fs.Int("tries", supplier.TriesDefault, "N: ActiveTests before a drop, sends of a Deliver before it is given up")
	statsEvery := fs.Duration("stats-every", 10*time.Second, "print a stats line on stderr this often (0: only the final summary)")
	logLevel := fs.String("log-level", "warn", "log level (off, debug, info, warn, error)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sms supplier: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	if len(accounts) == 0 {
		return errors.New("sms supplier: at least one --account SP_ID:SECRET is required")
	}
	vs, err := parseVersions(*versions)
	if err != nil {
		return err
	}
	if *ismgCode > cmpp.MaxMsgIDGateway {
		return fmt.Errorf("--ismg-code %d over %d", *ismgCode, cmpp.MaxMsgIDGateway)
	}
	cfg := supplier.Config{ISMGCode: uint32(*ismgCode), Keepalive: *keepalive, ResponseTimeout: *respTimeout,
		Tries: *tries, Logger: log, Seed: *seed, Clock: relayclock.System{},
		Record: supplier.RecordConfig{Path: *record}}
	if cfg.Accounts, err = parseAccounts(accounts, vs, *window, *maxConns, *rate); err != nil {
		return err
	}
	b := &cfg.Behaviour
	b.FailRate, b.FlowControlRate, b.NoAnswerRate = *failRate, *flowRate, *noAnswerRate
	b.ReportBeforeRespRate, b.DuplicateReportRate, b.DropEvery, b.DropRate = *beforeRate, *dupRate, *dropEvery, *dropRate
	b.MO = supplier.MOConfig{Every: *moEvery, Text: *moText, From: *moFrom}
	if b.Latency, err = supplier.ParseDist(*latency); err != nil {
		return fmt.Errorf("--latency: %w", err)
	}
	if b.ReportDelay, err = supplier.ParseDist(*reportDelay); err != nil {
		return fmt.Errorf("--report-delay: %w", err)
	}
	if b.ResultCodes, err = supplier.ParseResults(*results); err != nil {
		return fmt.Errorf("--results: %w", err)
	}
	if b.ReportStats, err = supplier.ParseStats(*stats); err != nil {
		return fmt.Errorf("--stats: %w", err)
	}
	switch *windowAction {
	case "flow-control":
	case "drop":
		b.WindowAction = supplier.WindowDrop
	default:
		return fmt.Errorf("--window-action %s: want flow-control or drop", relaytype.QuoteValue(*windowAction))
	}
	switch *recordSync {
	case "write":
	case "fsync":
		cfg.Record.Sync = supplier.SyncFsync
	default:
		return fmt.Errorf("--record-sync %s: want write or fsync", relaytype.QuoteValue(*recordSync))
	}

	srv, err := supplier.New(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", *listen, err)
	}
	ids := make([]string, len(cfg.Accounts))
	for i, a := range cfg.Accounts {
		ids[i] = a.SourceAddr
	}
	fmt.Fprintf(env.Stderr, "sms supplier: listening on %s (accounts %s; versions %s; window %d; record %s; seed %d)\n",
		ln.Addr(), strings.Join(ids, ","), *versions, *window, cmp.Or(*record, "none"), *seed)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	err = supplierProgress(env.Stderr, cfg.Clock, *statsEvery, srv, served)
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	return err
}

// supplierProgress prints a stats line every `every` on clock (none when 0)
// until Serve returns on served, then the final summary; it returns Serve's
// error.
func supplierProgress(w io.Writer, clock relaytype.Clock, every time.Duration, srv *supplier.Server, served <-chan error) error {
	began := clock.Now()
	for {
		var tick <-chan time.Time
		if every > 0 {
			tick = clock.After(every)
		}
		select {
		case <-tick:
			fmt.Fprintf(w, "sms supplier: %s\n", supplierStatsLine(srv.Stats()))
		case err := <-served:
			fmt.Fprintf(w, "sms supplier: stopped after %s: %s\n", clock.Now().Sub(began).Round(time.Millisecond),
				supplierStatsLine(srv.Stats()))
			return err
		}
	}
}

// supplierStatsLine is one line of counters.
func supplierStatsLine(st supplier.Stats) string {
	return fmt.Sprintf("conns=%d logins=%d login_failures=%d submits=%d accepted=%d refused=%d flow_control=%d "+
		"window_violations=%d no_answer=%d drops=%d reports=%d reports_before_resp=%d duplicate_reports=%d mos=%d "+
		"deliver_resends=%d held=%d",
		st.Connections, st.Logins, st.LoginFailures, st.SubmitsReceived, st.SubmitsAccepted, st.SubmitsRefused,
		st.FlowControlled, st.WindowViolations, st.NoAnswers, st.Drops, st.ReportsSent, st.ReportsBeforeResp,
		st.DuplicateReports, st.MOsSent, st.DeliverResends, st.DeliversHeld)
}
