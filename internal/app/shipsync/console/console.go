package console

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaytype"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("console/queries.sql", queriesSQL, "NodeList", "NodeCerts", "NodeRules", "NodeStreams",
	"ConflictCounts", "CaseVersion", "AuditSearch", "IdemClaim", "IdemGet", "IdemTakeOver", "IdemStore", "IdemRelease")

// Defaults of Config.
const (
	// OnlineWithinDefault: a node whose last heartbeat is older is shown
	// offline.
	OnlineWithinDefault = 2 * time.Minute
	// ThroughputWindowDefault is the window the nodes' receipt rate is
	// measured over.
	ThroughputWindowDefault = 5 * time.Minute
	// IdempotencyStaleDefault: a request that claimed its key and never
	// answered (its process died) may be taken over by a repeat after this
	// long.
	IdempotencyStaleDefault = 2 * time.Minute
)

// Config configures the API and console.
type Config struct {
	// Pool is the shore's PostgreSQL. Required.
	Pool *pgxpool.Pool
	// Target is the shore's business database: conflict detail reads the
	// shore's row now from it, and a manual decision is re-checked against
	// it. Required.
	Target *apply.Target
	// ShoreNode is the shore's node id (default arbiter.ShoreNodeDefault).
	ShoreNode string
	// Users are the API's tokens. Required.
	Users Users
	Clock relaytype.Clock
	// OnlineWithin, ThroughputWindow and IdempotencyStale: see their
	// defaults.
	OnlineWithin, ThroughputWindow, IdempotencyStale time.Duration
	// Logger; default discards. It never gets row values or whole keys.
	Logger *slog.Logger
}

// Console serves the API and the console. Safe for concurrent use.
type Console struct {
	cfg Config
	arb *arbiter.Arbiter
	reg *shore.Registry
	log *slog.Logger
	mux *http.ServeMux
}

// New returns the console of cfg.
func New(cfg Config) (*Console, error) {
	if cfg.Pool == nil || cfg.Target == nil || cfg.Clock == nil || len(cfg.Users) == 0 {
		return nil, errors.New("console: Pool, Target, Clock and Users are required")
	}
	cfg.ShoreNode = cmp.Or(cfg.ShoreNode, arbiter.ShoreNodeDefault)
	cfg.OnlineWithin = cmp.Or(cfg.OnlineWithin, OnlineWithinDefault)
	cfg.ThroughputWindow = cmp.Or(cfg.ThroughputWindow, ThroughputWindowDefault)
	cfg.IdempotencyStale = cmp.Or(cfg.IdempotencyStale, IdempotencyStaleDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	arb, err := arbiter.New(arbiter.Config{Pool: cfg.Pool, Target: cfg.Target, ShoreNode: cfg.ShoreNode,
		Instance: "console", Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, arb: arb, reg: shore.NewRegistry(cfg.Pool, cfg.Clock), log: cfg.Logger, mux: http.NewServeMux()}
	c.routes()
	return c, nil
}

// Handler returns the API and console handler, to be served on a protected
// relayhttp listener (with HandlerAuthenticates: the API checks the users'
// tokens itself).
func (c *Console) Handler() http.Handler { return c.mux }

// route is one API endpoint: the least role it needs, and whether it acts
// (an Idempotency-Key is required and its answer kept).
type route struct {
	role   string
	mutate bool
	h      func(ctx context.Context, r *http.Request, u User) (int, any)
}

// routes registers the endpoints.
func (c *Console) routes() {
	for pattern, rt := range map[string]route{
		"GET /api/v1/me":                                         {RoleViewer, false, c.me},
		"GET /api/v1/overview":                                   {RoleViewer, false, c.overview},
		"GET /api/v1/nodes":                                      {RoleViewer, false, c.nodes},
		"GET /api/v1/nodes/{id}":                                 {RoleViewer, false, c.node},
		"GET /api/v1/rules":                                      {RoleViewer, false, c.rules},
		"GET /api/v1/conflicts":                                  {RoleViewer, false, c.conflicts},
		"GET /api/v1/conflicts/{id}":                             {RoleViewer, false, c.conflict},
		"POST /api/v1/conflicts/{id}/decision":                   {RoleOperator, true, c.decide},
		"POST /api/v1/conflicts/{id}/cancellation":               {RoleOperator, true, c.cancel},
		"GET /api/v1/audit-events":                               {RoleViewer, false, c.audit},
		"POST /api/v1/rule-releases":                             {RoleAdmin, true, c.draft},
		"GET /api/v1/rule-releases":                              {RoleViewer, false, c.releases},
		"POST /api/v1/rule-releases/{rule}/{version}/transition": {RoleAdmin, true, c.transition},
		"POST /api/v1/rules/{rule}/rollback":                     {RoleAdmin, true, c.rollback},
		"GET /api/v1/backlogs":                                   {RoleViewer, false, c.backlogs},
		"POST /api/v1/expiry-approvals":                          {RoleAdmin, true, c.approveExpiry},
	} {
		c.mux.Handle(pattern, c.api(rt))
	}
	c.mux.HandleFunc("/api/", func(w http.ResponseWriter, _ *http.Request) {
		relayhttp.WriteError(w, http.StatusNotFound, "no such API resource (see /api/v1/…)")
	})
	c.web()
}

// traceRE is what a client's X-Request-Id must look like to be kept as
// the trace id.
var traceRE = regexp.MustCompile(`^[A-Za-z0-9._-]{8,64}$`)

// api wraps an endpoint: the trace id, the token and role, the
// Idempotency-Key of a write, and the JSON answer.
func (c *Console) api(rt route) http.Handler {
	jsonOnly := relayhttp.RequireContentType("application/json")
	return jsonOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		trace := r.Header.Get("X-Request-Id")
		if !traceRE.MatchString(trace) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			trace = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", trace)
		w.Header().Set("Cache-Control", "no-store")
		u, ok := c.cfg.Users.lookup(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="shipsync"`)
			relayhttp.WriteError(w, http.StatusUnauthorized, "missing or unknown bearer token")
			return
		}
		if !u.may(rt.role) {
			relayhttp.WriteError(w, http.StatusForbidden, "this needs role "+rt.role+" (you are "+u.Role+")")
			return
		}
		ctx := shore.WithTrace(r.Context(), trace)
		if !rt.mutate {
			status, body := rt.h(ctx, r, u)
			writeAnswer(w, status, body)
			return
		}
		c.mutation(ctx, w, r, u, rt.h)
	}))
}

// mutation runs a write under its Idempotency-Key: the first request with
// a key acts and its answer is kept; a repeat of the same request gets the
// kept answer (header Idempotent-Replayed: true); another request with the
// key gets 422, one while the first is still running 409.
func (c *Console) mutation(ctx context.Context, w http.ResponseWriter, r *http.Request, u User,
	h func(context.Context, *http.Request, User) (int, any)) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > 200 {
		relayhttp.WriteError(w, http.StatusBadRequest, "a write needs an Idempotency-Key header (1 to 200 characters, "+
			"e.g. a fresh UUID per intended change)")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		relayhttp.WriteError(w, http.StatusRequestEntityTooLarge, "the request body is too large or unreadable")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.New()
	for _, p := range [][]byte{[]byte(r.Method), {0}, []byte(r.URL.Path), {0}, body} {
		sum.Write(p)
	}
	hash := sum.Sum(nil)
	now := c.cfg.Clock.Now()
	claimed, err := c.claim(ctx, u.Actor, key, r, hash, now)
	if err != nil {
		relayhttp.WriteError(w, http.StatusInternalServerError, relayhttp.InternalError(ctx, c.log,
			"console: idempotency key", err, "trace_id", shore.TraceOf(ctx)))
		return
	}
	if !claimed {
		c.replay(ctx, w, u.Actor, key, r, hash)
		return
	}
	status, answer := h(ctx, r, u)
	out, err := json.Marshal(answer)
	if err != nil || status >= 500 {
		// Not kept: the same request may be tried again.
		if _, err := c.cfg.Pool.Exec(context.WithoutCancel(ctx), stmts["IdemRelease"], u.Actor, key); err != nil {
			c.log.ErrorContext(ctx, "console: release idempotency key", "error", relaytype.BoundText(err.Error(), 256))
		}
		writeAnswer(w, status, answer)
		return
	}
	if _, err := c.cfg.Pool.Exec(context.WithoutCancel(ctx), stmts["IdemStore"], u.Actor, key, status, out); err != nil {
		c.log.ErrorContext(ctx, "console: store idempotent answer", "error", relaytype.BoundText(err.Error(), 256))
	}
	writeRaw(w, status, out)
}

// claim claims (actor, key) for this request: false means another request
// holds it (replay says what to answer).
func (c *Console) claim(ctx context.Context, actor, key string, r *http.Request, hash []byte, now time.Time) (bool, error) {
	var ok bool
	err := c.cfg.Pool.QueryRow(ctx, stmts["IdemClaim"], actor, key, r.Method, r.URL.Path, hash, now).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		// Taken: by a request that died unanswered long ago, it is ours.
		err = c.cfg.Pool.QueryRow(ctx, stmts["IdemTakeOver"], actor, key, now.Add(-c.cfg.IdempotencyStale), now).Scan(&ok)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err == nil {
			var m, p string
			var h, b []byte
			var st int
			var at time.Time
			if err := c.cfg.Pool.QueryRow(ctx, stmts["IdemGet"], actor, key).Scan(&m, &p, &h, &st, &b, &at); err != nil {
				return false, err
			}
			return bytes.Equal(h, hash), nil
		}
	}
	return ok, err
}

// replay answers a request whose key is taken.
func (c *Console) replay(ctx context.Context, w http.ResponseWriter, actor, key string, r *http.Request, hash []byte) {
	var method, path string
	var h, body []byte
	var status int
	var at time.Time
	err := c.cfg.Pool.QueryRow(ctx, stmts["IdemGet"], actor, key).Scan(&method, &path, &h, &status, &body, &at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		relayhttp.WriteError(w, http.StatusConflict, "the request with this Idempotency-Key failed meanwhile; send it again")
	case err != nil:
		relayhttp.WriteError(w, http.StatusInternalServerError, relayhttp.InternalError(ctx, c.log,
			"console: idempotency key", err, "trace_id", shore.TraceOf(ctx)))
	case !bytes.Equal(h, hash):
		relayhttp.WriteError(w, http.StatusUnprocessableEntity, "this Idempotency-Key was used for another request ("+
			method+" "+relayhttp.Bound(path, 120)+" at "+at.UTC().Format(time.RFC3339)+"); use a new key for a new change")
	case status == 0:
		relayhttp.WriteError(w, http.StatusConflict, "the request with this Idempotency-Key is still being served; "+
			"ask again shortly")
	default:
		w.Header().Set("Idempotent-Replayed", "true")
		writeRaw(w, status, body)
	}
}

// apiError is an error answer's body.
type apiError struct {
	Error string `json:"error"`
}

// fail is an error answer.
func fail(status int, msg string) (int, any) { return status, apiError{Error: msg} }

// internal is the answer to a store or system error: a generic message
// with an error id, the detail (bounded) in the log.
func (c *Console) internal(ctx context.Context, what string, err error) (int, any) {
	return fail(http.StatusInternalServerError, relayhttp.InternalError(ctx, c.log, "console: "+what, err,
		"trace_id", shore.TraceOf(ctx)))
}

// writeAnswer writes body as JSON with status.
func writeAnswer(w http.ResponseWriter, status int, body any) {
	out, err := json.Marshal(body)
	if err != nil {
		relayhttp.WriteError(w, http.StatusInternalServerError, "could not encode the answer")
		return
	}
	writeRaw(w, status, out)
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}

// bodyWithReason decodes a write's body into req and trims *reason (its
// reason field), which must not be empty: what names the write in the
// answer ("a decision needs a reason"). nil: go on.
func bodyWithReason(r *http.Request, req any, reason *string, what string) *apiError {
	if err := readBody(r, req); err != nil {
		return &apiError{err.Error()}
	}
	if *reason = strings.TrimSpace(*reason); *reason == "" {
		return &apiError{what + " needs a reason"}
	}
	return nil
}

// readBody decodes the request's JSON body into v, refusing unknown
// fields; the error is a client's (400) message.
func readBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errors.New("the request body is too large")
		}
		return errors.New("the body is not the expected JSON object: " + relaytype.BoundText(err.Error(), 160))
	}
	if dec.More() {
		return errors.New("text after the JSON object")
	}
	return nil
}
