package relayadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaytype"
)

// Request bounds.
const (
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes = 64 << 10
	// MaxIDs bounds the ids of one replay or reopen request.
	MaxIDs = 1000
)

// Deps is what Handler works with. Driver and Queue are required.
type Deps struct {
	// Driver is the queue's store. Required.
	Driver relaydriver.Driver
	// Queue is the queue shown and acted on. Required.
	Queue string
	// Engine is the running engine of Queue: replay goes through
	// Engine.Replay, inside its lifecycle gate. Nil: replay answers 409.
	Engine *relay.Engine
	// Ack is the queue's acknowledgement writer, for reopen (inside the
	// same gate). Optional: without it reopen answers 409.
	Ack *relay.AckWriter
	// Intake is the running watermark intake of Queue: ingesting late rows
	// goes through Intake.IngestLate. Nil: late ingest answers 409.
	Intake *relayintake.Intake
	// OutboxTargets are the outbox targets shown by stats and the DLQ.
	OutboxTargets []string
	// Active, when set, reports whether this instance currently runs the
	// queue (holds its exclusive lock). Mutations are refused with 503
	// while it reports false: they must run in the active instance's gate.
	Active func() bool
	// Clock measures ages. Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger records mutations (never payloads). Default slog.Default().
	Logger *slog.Logger
}

// Handler returns the admin API of deps on /admin/…:
//
//	GET  /admin/stats                         counts, backlog, oldest age, cursor, holes, outbox
//	GET  /admin/dead?class=&after=&limit=     DEAD messages (id order, keyset pages)
//	GET  /admin/abandoned?after=&limit=       messages whose acknowledgement was abandoned
//	GET  /admin/dlq?target=&limit=            DEAD outbox events
//	GET  /admin/holes?limit=                  cursor and permanent holes
//	GET  /admin/late?limit=                   late rows found in released holes
//	POST /admin/replay  {"classes":[…],"ids":[…]}
//	POST /admin/reopen  {"ids":[…]} or {"reason":"MISSING_ROW"}
//	POST /admin/late/ingest  {"ids":[…]}     enqueue late rows (explicit only)
//
// Answers are JSON; errors are {"error": "…"} with 400 (bad request or a
// replay refused by the whitelist), 404 (unknown endpoint, or a DLQ target
// that is not one of OutboxTargets), 405, 409 (no engine or acknowledgement
// writer, or no intake for a late ingest), 415 (a POST body that is not application/json), 503 (instance not
// active, or the request's deadline passed) or 500. A 500 never carries the
// store's error text: it names an error id, and the log line with that id
// holds the detail. Mount it on a mux as mux.Handle("/admin/",
// relayadmin.Handler(deps)), on a listener of its own built with relayhttp
// (Host, origin and token checks, timeouts); it serves only those paths.
// Each request's ctx governs its store calls. The handler is safe for
// concurrent use; it does no I/O until a request arrives. Answers never carry
// a payload and are bounded: MaxResponseBytes per listing, relaytype.MaxErrorText
// bytes per text field of a row and per error.
func Handler(deps Deps) http.Handler {
	if deps.Clock == nil {
		deps.Clock = relayclock.System{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	h := &handler{Deps: deps}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/stats", h.stats)
	mux.HandleFunc("GET /admin/dead", h.dead)
	mux.HandleFunc("GET /admin/abandoned", h.abandoned)
	mux.HandleFunc("GET /admin/dlq", h.dlq)
	mux.HandleFunc("GET /admin/holes", h.holes)
	mux.HandleFunc("GET /admin/late", h.late)
	// A JSON body also keeps browsers out: a cross-origin page cannot send
	// one without a CORS preflight, which this API never grants.
	jsonBody := relayhttp.RequireContentType("application/json")
	mux.Handle("POST /admin/replay", jsonBody(http.HandlerFunc(h.replay)))
	mux.Handle("POST /admin/reopen", jsonBody(http.HandlerFunc(h.reopen)))
	mux.Handle("POST /admin/late/ingest", jsonBody(http.HandlerFunc(h.lateIngest)))
	return jsonMuxErrors(mux)
}

type handler struct{ Deps }

func (h *handler) stats(w http.ResponseWriter, r *http.Request) {
	st, err := ReadStats(r.Context(), h.Driver, h.Queue, h.OutboxTargets, h.Clock.Now())
	h.respond(w, r, st, err)
}

func (h *handler) dead(w http.ResponseWriter, r *http.Request) {
	p, err := listParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	page, err := ReadDead(r.Context(), h.Driver, h.Queue, p)
	h.respond(w, r, page, err)
}

func (h *handler) abandoned(w http.ResponseWriter, r *http.Request) {
	p, err := listParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	page, err := ReadAbandoned(r.Context(), h.Driver, h.Queue, p)
	h.respond(w, r, page, err)
}

func (h *handler) dlq(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", 0, LimitMax)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	targets := h.OutboxTargets
	if t := r.URL.Query().Get("target"); t != "" {
		// Only the instance's own targets: the store holds other apps'
		// outboxes too, which this API has no business showing.
		if !slices.Contains(h.OutboxTargets, t) {
			writeError(w, http.StatusNotFound, fmt.Errorf("target %s is not an outbox target of this instance (%s)",
				relaytype.QuoteValue(t), strings.Join(h.OutboxTargets, ", ")))
			return
		}
		targets = []string{t}
	}
	dlq, err := ReadDLQ(r.Context(), h.Driver, targets, int(limit))
	h.respond(w, r, dlq, err)
}

func (h *handler) holes(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", 0, LimitMax)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	hs, err := ReadHoles(r.Context(), h.Driver, h.Queue, int(limit), h.Clock.Now())
	h.respond(w, r, hs, err)
}

func (h *handler) late(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", 0, LimitMax)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	rows, err := ReadLate(r.Context(), h.Driver, h.Queue, int(limit))
	h.respond(w, r, rows, err)
}

// lateIngest enqueues late rows through the running intake: the operator's
// explicit action, never taken automatically.
func (h *handler) lateIngest(w http.ResponseWriter, r *http.Request) {
	var req LateIngestRequest
	if !h.mutation(w, r, &req, h.Intake == nil, "late ingest needs the running intake of the queue") {
		return
	}
	if len(req.IDs) == 0 || len(req.IDs) > MaxIDs {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%d ids; want 1..%d per request", len(req.IDs), MaxIDs))
		return
	}
	items, err := h.Intake.IngestLate(r.Context(), req.IDs)
	if err != nil {
		h.respond(w, r, nil, err)
		return
	}
	ingested := 0
	for _, it := range items {
		if it.Outcome == relayintake.IngestOutcomeIngested {
			ingested++
		}
	}
	h.Logger.InfoContext(r.Context(), "admin: late ingest", "queue", h.Queue, "ids", len(req.IDs),
		"ingested", ingested, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, &LateIngestResult{Items: items})
}

func (h *handler) replay(w http.ResponseWriter, r *http.Request) {
	var req ReplayRequest
	if !h.mutation(w, r, &req, h.Engine == nil, "replay needs the running engine of the queue") {
		return
	}
	if len(req.IDs) > MaxIDs {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%d ids; at most %d per request", len(req.IDs), MaxIDs))
		return
	}
	classes := req.Classes
	if len(classes) == 0 && len(req.IDs) > 0 {
		var err error
		if classes, err = h.Driver.GetExecutor().MessageClasses(r.Context(),
			&relaydriver.MessageClassesParams{Queue: h.Queue, IDs: req.IDs}); err != nil {
			h.respond(w, r, nil, err)
			return
		}
		if len(classes) == 0 {
			writeJSON(w, http.StatusOK, &ReplayResult{Classes: []relaytype.ErrorClass{}})
			return
		}
	}
	n, err := h.Engine.Replay(r.Context(), &relay.ReplayParams{Classes: classes, IDs: req.IDs})
	if errors.Is(err, relay.ErrReplayRefused) {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if err != nil {
		h.respond(w, r, nil, err)
		return
	}
	h.Logger.InfoContext(r.Context(), "admin: replay", "queue", h.Queue, "classes", classes,
		"ids", len(req.IDs), "replayed", n, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, &ReplayResult{Classes: classes, Replayed: n})
}

func (h *handler) reopen(w http.ResponseWriter, r *http.Request) {
	var req ReopenRequest
	if !h.mutation(w, r, &req, h.Ack == nil, "no acknowledgement writer is configured for this queue") {
		return
	}
	switch {
	case len(req.IDs) > MaxIDs:
		writeError(w, http.StatusBadRequest, fmt.Errorf("%d ids; at most %d per request", len(req.IDs), MaxIDs))
		return
	case len(req.IDs) == 0 && req.Reason == "":
		writeError(w, http.StatusBadRequest, errors.New(`give "ids" or "reason"`))
		return
	case req.Reason != "" && req.Reason != relaydriver.AckReasonMissingRow &&
		req.Reason != relaydriver.AckReasonTransientDeadline:
		writeError(w, http.StatusBadRequest, fmt.Errorf("reason %q: want %s or %s", req.Reason,
			relaydriver.AckReasonMissingRow, relaydriver.AckReasonTransientDeadline))
		return
	}
	n, err := h.Ack.Reopen(r.Context(), &relay.AckReopenParams{IDs: req.IDs, Reason: req.Reason})
	if err != nil {
		h.respond(w, r, nil, err)
		return
	}
	h.Logger.InfoContext(r.Context(), "admin: reopen", "queue", h.Queue, "ids", len(req.IDs),
		"reason", req.Reason, "reopened", n, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, &ReopenResult{Reopened: n})
}

// mutation checks that this instance may mutate (missing → 409 with why,
// inactive → 503) and decodes the bounded JSON body into dst. It reports
// whether the caller should go on.
func (h *handler) mutation(w http.ResponseWriter, r *http.Request, dst any, missing bool, why string) bool {
	if missing {
		writeError(w, http.StatusConflict, errors.New(why))
		return false
	}
	if h.Active != nil && !h.Active() {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf(
			"this instance does not hold queue %q's lock; send the request to the active instance", h.Queue))
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request body above %d bytes", MaxBodyBytes))
			return false
		}
		writeError(w, http.StatusBadRequest, fmt.Errorf("request body: %w", err))
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, errors.New("request body: more than one JSON value"))
		return false
	}
	return true
}

// listParams reads class (repeatable or comma-separated), after and limit.
func listParams(r *http.Request) (ListParams, error) {
	var p ListParams
	for _, v := range r.URL.Query()["class"] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			c, err := relaytype.ParseErrorClass(strings.ToUpper(s))
			if err != nil {
				return p, err
			}
			p.Classes = append(p.Classes, c)
		}
	}
	after, err := intParam(r, "after", 0, -1)
	if err != nil {
		return p, err
	}
	limit, err := intParam(r, "limit", 0, LimitMax)
	if err != nil {
		return p, err
	}
	p.After, p.Limit = after, int(limit)
	return p, nil
}

// intParam reads a non-negative integer query parameter (def when absent) at
// most maxV (maxV < 0: unbounded).
func intParam(r *http.Request, name string, def, maxV int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%s=%q: want a non-negative integer", name, s)
	}
	if maxV >= 0 && v > maxV {
		return 0, fmt.Errorf("%s=%d: at most %d", name, v, maxV)
	}
	return v, nil
}

// respond writes v, or err: a 503 when the request was canceled or ran out
// of time, else a 500. Neither carries err's text, which may hold the store's
// words (SQLSTATE codes, table names): it is logged under an error id the
// answer names (relayhttp.InternalError).
func (h *handler) respond(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, v)
		return
	}
	status := http.StatusInternalServerError
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		status = http.StatusServiceUnavailable
	}
	msg := relayhttp.InternalError(r.Context(), h.Logger, "admin: "+r.Method+" "+r.URL.Path+" failed", err,
		"queue", h.Queue, "status", status)
	writeError(w, status, errors.New(msg))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, &Error{Error: relaytype.ErrorText(err)})
}

// jsonMuxErrors turns the mux's plain-text 404 and 405 into JSON errors.
func jsonMuxErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&jsonStatus{ResponseWriter: w, method: r.Method, path: r.URL.Path}, r)
	})
}

// jsonStatus rewrites a 404 or 405 written by the mux (not by a handler,
// whose answers are already JSON) as a JSON error body.
type jsonStatus struct {
	http.ResponseWriter
	method, path string
	swallow      bool
}

func (j *jsonStatus) WriteHeader(status int) {
	if (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) &&
		j.Header().Get("Content-Type") != "application/json" {
		j.swallow = true
		msg := fmt.Sprintf("no admin endpoint %s %s", j.method, j.path)
		if status == http.StatusMethodNotAllowed {
			msg = fmt.Sprintf("method %s not allowed on %s (allowed: %s)", j.method, j.path, j.Header().Get("Allow"))
		}
		j.Header().Set("Content-Type", "application/json")
		j.ResponseWriter.WriteHeader(status)
		_ = json.NewEncoder(j.ResponseWriter).Encode(&Error{Error: msg})
		return
	}
	j.ResponseWriter.WriteHeader(status)
}

// Write drops the mux's plain-text body after a rewritten status.
func (j *jsonStatus) Write(b []byte) (int, error) {
	if j.swallow {
		return len(b), nil
	}
	return j.ResponseWriter.Write(b)
}
