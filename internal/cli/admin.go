package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relayhq/relay/relayadmin"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaytype"
)

// adminUsage is the help of `relay admin`.
const adminUsage = `usage: relay admin <command> --addr HOST:PORT [flags]

commands:
  stats      counts per state, backlog, oldest unprocessed age, cursor, holes, outbox per target
  dead       DEAD messages with class, last error, attempts (--class, --after, --limit)
  abandoned  messages whose acknowledgement was abandoned (NOT acknowledged)
  dlq        DEAD outbox events (--target, --limit)
  holes      intake cursor and permanent holes (--limit)
  replay     move FAILED/DEAD messages back to PENDING (--class and/or --ids)
  reopen     reopen abandoned acknowledgements (--ids or --reason)
  late       rows found in released permanent holes: committed after the max commit delay (--limit)
  late-ingest  enqueue late rows as messages, explicitly (--ids)

--addr is the --admin-addr of a running 'relay serve' or 'relay msgx run';
the commands are a client of its /admin/ HTTP API. --token-file sends the
bearer token the instance was given with --admin-token-file; an https://
address takes --tls-ca, and --tls-cert/--tls-key when it wants a client
certificate. The read-only commands (stats, dead, abandoned, dlq,
holes, late) also work offline with --store URL --queue P, reading the store
directly. replay, reopen and late-ingest always need --addr: they must run
inside the running instance (its lifecycle gate, its intake) so they never
interleave with its acknowledgement write-back; a direct store write would
bypass it.

run 'relay admin <command> -h' for its flags`

// runAdmin is `relay admin`: a thin client of the admin HTTP API.
func runAdmin(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(env.Stdout, adminUsage)
		return nil
	}
	sub, args := args[0], args[1:]
	a := &adminCmd{env: env}
	fs := newFlags(env, "admin "+sub, "admin "+sub+" --addr HOST:PORT [flags]")
	fs.StringVar(&a.addr, "addr", envOr("RELAY_ADMIN_ADDR", ""), "the --admin-addr of a running instance (host:port, http://… or https://…); env RELAY_ADMIN_ADDR")
	fs.StringVar(&a.tokenFile, "token-file", envOr("RELAY_ADMIN_TOKEN_FILE", ""), "file holding the instance's admin bearer token; env RELAY_ADMIN_TOKEN_FILE")
	fs.StringVar(&a.tlsCA, "tls-ca", "", "PEM CA certificates that sign an https:// instance's certificate (default: the system's)")
	fs.StringVar(&a.tlsCert, "tls-cert", "", "PEM client certificate for an instance that requires one (with --tls-key)")
	fs.StringVar(&a.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.BoolVar(&a.json, "json", false, "print the raw JSON answer")
	fs.DurationVar(&a.timeout, "timeout", 30*time.Second, "bound of the whole request")
	var run func(ctx context.Context) error
	switch sub {
	case "stats", "dead", "abandoned", "dlq", "holes", "late":
		fs.StringVar(&a.store, "store", "", "read this store directly instead of --addr (offline, read-only)")
		fs.StringVar(&a.queue, "queue", "demo", "queue, with --store")
	}
	switch sub {
	case "stats":
		fs.StringVar(&a.targets, "targets", "", "outbox targets to count, comma-separated (with --store)")
		run = a.stats
	case "dead", "abandoned":
		fs.StringVar(&a.classes, "class", "", "only these error classes, comma-separated")
		fs.Int64Var(&a.after, "after", 0, "list ids after this one (the next_after of the previous page)")
		fs.IntVar(&a.limit, "limit", relayadmin.LimitDefault, fmt.Sprintf("page size (at most %d)", relayadmin.LimitMax))
		run = func(ctx context.Context) error { return a.messages(ctx, sub) }
	case "dlq":
		fs.StringVar(&a.targets, "target", "", "outbox target (default: the instance's targets; required with --store)")
		fs.IntVar(&a.limit, "limit", relayadmin.LimitDefault, fmt.Sprintf("events per target (at most %d)", relayadmin.LimitMax))
		run = a.dlq
	case "holes":
		fs.IntVar(&a.limit, "limit", relayadmin.LimitDefault, fmt.Sprintf("holes to list (at most %d)", relayadmin.LimitMax))
		run = a.holes
	case "late":
		fs.IntVar(&a.limit, "limit", relayadmin.LimitDefault, fmt.Sprintf("late rows to list (at most %d)", relayadmin.LimitMax))
		run = a.late
	case "late-ingest":
		fs.StringVar(&a.ids, "ids", "", "late row ids to enqueue, comma-separated (see 'relay admin late')")
		run = a.lateIngest
	case "replay":
		fs.StringVar(&a.classes, "class", "", "error classes to replay, comma-separated (each must be whitelisted)")
		fs.StringVar(&a.ids, "ids", "", "only these message ids, comma-separated (without --class: their own classes)")
		run = a.replay
	case "reopen":
		fs.StringVar(&a.ids, "ids", "", "message ids to reopen, comma-separated")
		fs.StringVar(&a.reason, "reason", "", "reopen every row abandoned for MISSING_ROW or TRANSIENT_DEADLINE")
		run = a.reopen
	default:
		fmt.Fprintln(env.Stderr, adminUsage)
		return fmt.Errorf("unknown admin command %q", sub)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("admin %s: unexpected arguments %q", sub, fs.Args())
	}
	switch {
	case a.addr != "" && a.store != "":
		return errors.New("give --addr or --store, not both")
	case a.addr == "" && a.store == "" && (sub == "replay" || sub == "reopen" || sub == "late-ingest"):
		return fmt.Errorf("admin %s needs --addr of the running instance: it runs inside the instance's lifecycle gate, never as a direct store write", sub)
	case a.addr == "" && a.store == "":
		return fmt.Errorf("admin %s: give --addr HOST:PORT, the --admin-addr of a running instance (or --store URL to read offline)", sub)
	}
	if a.addr != "" {
		if err := a.connect(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if a.store != "" {
		d, err := openStore(ctx, a.store)
		if err != nil {
			return err
		}
		defer d.Close()
		a.d = d
	}
	return run(ctx)
}

// adminCmd holds one admin command's flags.
type adminCmd struct {
	env                           *Env
	addr, store, queue            string
	tokenFile, tlsCA, tlsCert     string
	tlsKey                        string
	token                         relayhttp.Token // read from tokenFile
	client                        *http.Client    // for --addr
	json                          bool
	timeout                       time.Duration
	classes, ids, reason, targets string
	after                         int64
	limit                         int
	d                             relaydriver.Driver // offline store (with --store)
}

func (a *adminCmd) stats(ctx context.Context) error {
	var st relayadmin.Stats
	var err error
	if a.d != nil {
		var s *relayadmin.Stats
		s, err = relayadmin.ReadStats(ctx, a.d, a.queue, splitList(a.targets), relayclock.System{}.Now())
		if s != nil {
			st = *s
		}
	} else {
		err = a.get(ctx, "/admin/stats", nil, &st)
	}
	if err != nil || a.json {
		return a.printJSON(&st, err)
	}
	w := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "queue\t%s\n", st.Queue)
	for _, s := range []relaytype.State{relaytype.StatePending, relaytype.StateFailed, relaytype.StateSucceeded,
		relaytype.StateSkipped, relaytype.StateDead, relaytype.StateArchived} {
		fmt.Fprintf(w, "%s\t%d\n", s, st.Counts[s])
	}
	fmt.Fprintf(w, "backlog\t%d\n", st.Backlog)
	fmt.Fprintf(w, "oldest unprocessed\t%s\n", age(st.OldestUnprocessedSeconds, st.OldestUnprocessedEnqueuedAt != nil))
	if c := st.Cursor; c != nil {
		fmt.Fprintf(w, "watermark W\t%d\n", c.Watermark)
		fmt.Fprintf(w, "hole at W+1 waiting\t%s\n", age(c.HoleAgeSeconds, c.HoleSince != nil))
		seeded := "no"
		if c.Seeded {
			seeded = fmt.Sprintf("%s at %s", c.SeedMode, c.SeededAt.Format(time.RFC3339))
		}
		fmt.Fprintf(w, "seeded\t%s\n", seeded)
	} else {
		fmt.Fprintf(w, "watermark W\t(no cursor)\n")
	}
	fmt.Fprintf(w, "permanent holes\t%d\n", st.PermanentHoles)
	fmt.Fprintf(w, "late rows\t%d (%d not ingested)\n", st.LateRows, st.LateRowsNotIngested)
	for _, o := range st.Outbox {
		fmt.Fprintf(w, "outbox %s\tpending %d, sent %d, dead %d\n", o.Target, o.Pending, o.Sent, o.Dead)
	}
	return w.Flush()
}

func (a *adminCmd) messages(ctx context.Context, sub string) error {
	classes, err := parseClasses(a.classes)
	if err != nil {
		return err
	}
	var page relayadmin.MessagePage
	if a.d != nil {
		read := relayadmin.ReadDead
		if sub == "abandoned" {
			read = relayadmin.ReadAbandoned
		}
		var p *relayadmin.MessagePage
		p, err = read(ctx, a.d, a.queue, relayadmin.ListParams{Classes: classes, After: a.after, Limit: a.limit})
		if p != nil {
			page = *p
		}
	} else {
		q := url.Values{"after": {strconv.FormatInt(a.after, 10)}, "limit": {strconv.Itoa(a.limit)}}
		if len(classes) > 0 {
			q.Set("class", a.classes)
		}
		err = a.get(ctx, "/admin/"+sub, q, &page)
	}
	if err != nil || a.json {
		return a.printJSON(&page, err)
	}
	w := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	if sub == "abandoned" {
		fmt.Fprintln(w, "ID\tSTATE\tREASON\tACK ATTEMPTS\tABANDONED AT")
		for _, m := range page.Items {
			at := ""
			if m.AckAbandonedAt != nil {
				at = m.AckAbandonedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\n", m.ID, m.State, m.AckReason, m.AckAttempts, at)
		}
	} else {
		fmt.Fprintln(w, "ID\tCLASS\tATTEMPTS\tUPDATED AT\tLAST ERROR")
		for _, m := range page.Items {
			fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\n", m.ID, m.Class, m.Attempts, m.UpdatedAt.Format(time.RFC3339),
				oneLine(m.LastError, 120))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.env.Stdout, "%d listed", len(page.Items))
	if page.NextAfter != 0 {
		fmt.Fprintf(a.env.Stdout, "; more may follow: --after %d", page.NextAfter)
	}
	fmt.Fprintln(a.env.Stdout)
	return nil
}

func (a *adminCmd) dlq(ctx context.Context) error {
	var dlq relayadmin.DLQ
	var err error
	if a.d != nil {
		if a.targets == "" {
			return errors.New("admin dlq --store: --target is required (the store does not know the instance's targets)")
		}
		var d *relayadmin.DLQ
		d, err = relayadmin.ReadDLQ(ctx, a.d, splitList(a.targets), a.limit)
		if d != nil {
			dlq = *d
		}
	} else {
		q := url.Values{"limit": {strconv.Itoa(a.limit)}}
		if a.targets != "" {
			q.Set("target", a.targets)
		}
		err = a.get(ctx, "/admin/dlq", q, &dlq)
	}
	if err != nil || a.json {
		return a.printJSON(&dlq, err)
	}
	w := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TARGET\tKEY\tSEQ\tEVENT ID\tATTEMPTS\tUPDATED AT\tLAST ERROR")
	for _, e := range dlq.Items {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", e.Target, e.Key, e.Seq, e.EventID, e.Attempts,
			e.UpdatedAt.Format(time.RFC3339), oneLine(e.LastError, 120))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.env.Stdout, "%d dead events\n", len(dlq.Items))
	if dlq.Truncated {
		fmt.Fprintln(a.env.Stdout, "more dead events were left out to bound the answer; --target lists one target's")
	}
	return nil
}

func (a *adminCmd) holes(ctx context.Context) error {
	var hs relayadmin.Holes
	var err error
	if a.d != nil {
		var h *relayadmin.Holes
		h, err = relayadmin.ReadHoles(ctx, a.d, a.queue, a.limit, relayclock.System{}.Now())
		if h != nil {
			hs = *h
		}
	} else {
		err = a.get(ctx, "/admin/holes", url.Values{"limit": {strconv.Itoa(a.limit)}}, &hs)
	}
	if err != nil || a.json {
		return a.printJSON(&hs, err)
	}
	if c := hs.Cursor; c != nil {
		fmt.Fprintf(a.env.Stdout, "watermark W %d; hole at W+1 waiting %s\n", c.Watermark,
			age(c.HoleAgeSeconds, c.HoleSince != nil))
	} else {
		fmt.Fprintln(a.env.Stdout, "no cursor")
	}
	w := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tFIRST SEEN\tRELEASED")
	for _, h := range hs.Items {
		fmt.Fprintf(w, "%d\t%s\t%s\n", h.ID, h.FirstSeenAt.Format(time.RFC3339), h.ReleasedAt.Format(time.RFC3339))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.env.Stdout, "%d permanent holes (%d listed)\n", hs.Total, len(hs.Items))
	return nil
}

func (a *adminCmd) late(ctx context.Context) error {
	var lr relayadmin.LateRows
	var err error
	if a.d != nil {
		var l *relayadmin.LateRows
		l, err = relayadmin.ReadLate(ctx, a.d, a.queue, a.limit)
		if l != nil {
			lr = *l
		}
	} else {
		err = a.get(ctx, "/admin/late", url.Values{"limit": {strconv.Itoa(a.limit)}}, &lr)
	}
	if err != nil || a.json {
		return a.printJSON(&lr, err)
	}
	w := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tRELEASED\tFOUND\tINGESTED")
	for _, r := range lr.Items {
		ingested := "no"
		if r.IngestedAt != nil {
			ingested = fmt.Sprintf("%s as message %d", r.IngestedAt.Format(time.RFC3339), r.MessageID)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", r.ID, r.ReleasedAt.Format(time.RFC3339), r.FoundAt.Format(time.RFC3339), ingested)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.env.Stdout, "%d late rows, %d not ingested (%d listed); enqueue with 'relay admin late-ingest --ids'\n",
		lr.Total, lr.NotIngested, len(lr.Items))
	return nil
}

func (a *adminCmd) lateIngest(ctx context.Context) error {
	ids, err := parseIDs(a.ids)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return errors.New("admin late-ingest: give --ids")
	}
	var res relayadmin.LateIngestResult
	err = a.post(ctx, "/admin/late/ingest", &relayadmin.LateIngestRequest{IDs: ids}, &res)
	if err != nil || a.json {
		return a.printJSON(&res, err)
	}
	for _, it := range res.Items {
		fmt.Fprintf(a.env.Stdout, "%d: %s", it.ID, it.Outcome)
		if it.MessageID != 0 {
			fmt.Fprintf(a.env.Stdout, " (message %d)", it.MessageID)
		}
		fmt.Fprintln(a.env.Stdout)
	}
	return nil
}

func (a *adminCmd) replay(ctx context.Context) error {
	classes, err := parseClasses(a.classes)
	if err != nil {
		return err
	}
	ids, err := parseIDs(a.ids)
	if err != nil {
		return err
	}
	if len(classes) == 0 && len(ids) == 0 {
		return errors.New("admin replay: give --class and/or --ids")
	}
	var res relayadmin.ReplayResult
	err = a.post(ctx, "/admin/replay", &relayadmin.ReplayRequest{Classes: classes, IDs: ids}, &res)
	if err != nil || a.json {
		return a.printJSON(&res, err)
	}
	fmt.Fprintf(a.env.Stdout, "replayed %d (classes %v); they run again after what is already done: replay does not restore history order\n",
		res.Replayed, res.Classes)
	return nil
}

func (a *adminCmd) reopen(ctx context.Context) error {
	ids, err := parseIDs(a.ids)
	if err != nil {
		return err
	}
	if len(ids) == 0 && a.reason == "" {
		return errors.New("admin reopen: give --ids or --reason")
	}
	var res relayadmin.ReopenResult
	err = a.post(ctx, "/admin/reopen", &relayadmin.ReopenRequest{IDs: ids, Reason: a.reason}, &res)
	if err != nil || a.json {
		return a.printJSON(&res, err)
	}
	fmt.Fprintf(a.env.Stdout, "reopened %d abandoned acknowledgements (due at once)\n", res.Reopened)
	return nil
}

// get fetches path?q from --addr into out.
func (a *adminCmd) get(ctx context.Context, path string, q url.Values, out any) error {
	u := a.url(path)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	return a.do(req, out)
}

// post sends body as JSON to path on --addr and decodes the answer into out.
func (a *adminCmd) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url(path), bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return a.do(req, out)
}

func (a *adminCmd) url(path string) string {
	base := strings.TrimRight(a.addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return base + path
}

// connect reads the token file and builds the HTTP client of --addr.
func (a *adminCmd) connect() error {
	if a.tokenFile != "" {
		tok, err := readTokenFile("--token-file", a.tokenFile, nil)
		if err != nil {
			return err
		}
		a.token = tok
	}
	if a.tlsCert == "" && a.tlsKey == "" && a.tlsCA == "" {
		a.client = http.DefaultClient
		return nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.tlsCA != "" {
		pool, err := certPool(a.tlsCA)
		if err != nil {
			return fmt.Errorf("--tls-ca: %w", err)
		}
		c.RootCAs = pool
	}
	if a.tlsCert != "" || a.tlsKey != "" {
		cert, err := tls.LoadX509KeyPair(a.tlsCert, a.tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	a.client = &http.Client{Transport: &http.Transport{TLSClientConfig: c, Proxy: http.ProxyFromEnvironment}}
	return nil
}

// do runs req (with the bearer token, if any) and decodes a 200 answer into
// out; any other status is an error carrying the server's message.
func (a *adminCmd) do(req *http.Request, out any) error {
	if len(a.token) > 0 {
		req.Header.Set("Authorization", "Bearer "+string(a.token))
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("admin API %s: %w", req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("admin API %s: read answer: %w", req.URL.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		var e relayadmin.Error
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			return fmt.Errorf("admin API %s %s: %s: %s", req.Method, req.URL.Path, resp.Status, e.Error)
		}
		return fmt.Errorf("admin API %s %s: %s", req.Method, req.URL.Path, resp.Status)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("admin API %s %s: decode answer: %w", req.Method, req.URL.Path, err)
	}
	return nil
}

// printJSON prints v as indented JSON unless err is set, which it returns.
func (a *adminCmd) printJSON(v any, err error) error {
	if err != nil {
		return err
	}
	enc := json.NewEncoder(a.env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func parseClasses(s string) ([]relaytype.ErrorClass, error) {
	var out []relaytype.ErrorClass
	for _, p := range splitList(s) {
		c, err := relaytype.ParseErrorClass(strings.ToUpper(p))
		if err != nil {
			return nil, fmt.Errorf("--class: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

func parseIDs(s string) ([]int64, error) {
	var out []int64
	for _, p := range splitList(s) {
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("--ids: %q is not a message id", p)
		}
		out = append(out, id)
	}
	return out, nil
}

// age renders seconds as a rounded duration, or "-" when there is nothing.
func age(seconds float64, some bool) string {
	if !some {
		return "-"
	}
	return (time.Duration(seconds * float64(time.Second))).Round(time.Second).String()
}

// oneLine flattens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
