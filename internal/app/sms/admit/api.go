package admit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of APIConfig.
const (
	// MaxSkewDefault is how far a request's timestamp may be from the API's
	// clock, either way.
	MaxSkewDefault = 5 * time.Minute
	// MaxBodyDefault bounds a POST body (100 numbers and a long content fit
	// many times over).
	MaxBodyDefault = 64 << 10
)

// APIConfig configures NewAPI.
type APIConfig struct {
	// Driver is the PostgreSQL store of the engine and of the sms tables.
	// Required.
	Driver *relaypgx.Driver
	// Engine is the engine of Queue on Driver; the API only enqueues into
	// it (a producer-only engine will do). Required.
	Engine *relay.Engine
	// Clock judges request timestamps and stamps accepted_at. Required
	// (relayclock.System in production; a fake one in tests).
	Clock relaytype.Clock
	// MaxSkew: see MaxSkewDefault.
	MaxSkew time.Duration
	// MaxBody: see MaxBodyDefault.
	MaxBody int64
	// Logger records store errors (never a body, number or secret).
	// Default slog.Default().
	Logger *slog.Logger
	// AcceptBatch is the most requests one accept transaction commits
	// together (default AcceptBatchDefault); AcceptConcurrency how many
	// accept transactions may be open at once (default
	// AcceptConcurrencyDefault). 1 and 1 commit every request alone.
	AcceptBatch, AcceptConcurrency int
	// SecretTTL is how long an app's key and HMAC secret are reused from
	// memory before they are read again (default SecretTTLDefault; negative:
	// read on every request). A suspended app or enterprise is refused by
	// the API at most this long after the change, and by the admission
	// stage, which checks both again, at once.
	SecretTTL time.Duration
}

// api serves the HTTP API.
type api struct {
	cfg     APIConfig
	log     *slog.Logger
	group   grouper
	secrets secretCache
}

// SendAnswer is the body of a 202 (accepted) or 200 (duplicate) answer to
// POST /v1/messages.
type SendAnswer struct {
	// MessageID names the message: the new one, or for a duplicate the one
	// that first took the client message id.
	MessageID int64 `json:"message_id"`
	// Duplicate is true when the client message id was taken already;
	// nothing new was accepted.
	Duplicate bool `json:"duplicate"`
}

// Recipient is one number of a message, as GET /v1/messages/{id} reports it.
type Recipient struct {
	// Number is as requested while accepted, normalised (11 digits) once
	// admitted.
	Number string `json:"number"`
	// Carrier, Segments, UnitLi and AmountLi are set once admitted.
	Carrier  string `json:"carrier,omitempty"`
	Segments int    `json:"segments,omitempty"`
	UnitLi   int64  `json:"unit_li,omitempty"`
	AmountLi int64  `json:"amount_li,omitempty"`
	// Outcome is delivered, failed or unknown once the message is
	// completed.
	Outcome string `json:"outcome,omitempty"`
	// Attempts are the supplier attempts for this number, first to last
	// (a retry goes through another channel).
	Attempts []AttemptAnswer `json:"attempts,omitempty"`
}

// AttemptAnswer is one supplier attempt for one number.
type AttemptAnswer struct {
	Attempt int    `json:"attempt"`
	Channel string `json:"channel"`
	// State is queued (in flight), delivered, failed or unknown; Detail
	// says why it ended so.
	State    string          `json:"state"`
	Detail   string          `json:"detail,omitempty"`
	Segments []SegmentAnswer `json:"segments"`
}

// SegmentAnswer is one segment's submit.
type SegmentAnswer struct {
	Segment  int    `json:"segment"`
	SubmitID uint64 `json:"submit_id"`
	// Result is the supplier's answer to the submit (ACCEPTED, REJECTED,
	// UNKNOWN) and Stat the status report's, as known so far.
	Result string `json:"result,omitempty"`
	Stat   string `json:"stat,omitempty"`
}

// MessageAnswer is the body of GET /v1/messages/{id}.
type MessageAnswer struct {
	MessageID   int64  `json:"message_id"`
	ClientMsgID string `json:"client_msg_id"`
	// State is accepted (in the inbox, not decided yet), admitted (rules
	// passed, limits counted, price frozen, attempts under way), refused or
	// completed (every number has its outcome and is settled).
	State string `json:"state"`
	// Reason is a rules.Reason when refused; Status is the HTTP status that
	// reason stands for (403, 422, 429, 402, 503) and Detail says why,
	// never quoting a number or the content.
	Reason string `json:"reason,omitempty"`
	Status int    `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Segments is the number of SMS segments of the text (each number gets
	// all of them); AmountLi the total frozen, in li (0.001 CNY).
	Segments    int         `json:"segments,omitempty"`
	AmountLi    int64       `json:"amount_li,omitempty"`
	Recipients  []Recipient `json:"recipients"`
	AcceptedAt  time.Time   `json:"accepted_at"`
	DecidedAt   *time.Time  `json:"decided_at,omitempty"`
	CompletedAt *time.Time  `json:"completed_at,omitempty"`
}

// NewAPI returns the HTTP API's handler, to be served by relayhttp:
//
//	POST /v1/messages       a signed Request (application/json): 202 accepted,
//	                        200 duplicate, 400, 401, 413, 415, 503
//	GET  /v1/messages/{id}  a signed read of one of the app's messages: 200, 401, 404, 503
//
// Error bodies are {"reason": Code, "error": text}.
func NewAPI(cfg APIConfig) (http.Handler, error) {
	switch {
	case cfg.Driver == nil:
		return nil, errors.New("admit: APIConfig.Driver is nil")
	case cfg.Engine == nil:
		return nil, errors.New("admit: APIConfig.Engine is nil")
	case cfg.Clock == nil:
		return nil, errors.New("admit: APIConfig.Clock is nil")
	case cfg.MaxSkew < 0 || cfg.MaxBody < 0:
		return nil, errors.New("admit: APIConfig.MaxSkew or MaxBody is negative")
	}
	cfg.MaxSkew = cmp.Or(cfg.MaxSkew, MaxSkewDefault)
	cfg.MaxBody = cmp.Or(cfg.MaxBody, MaxBodyDefault)
	if cfg.AcceptBatch < 0 || cfg.AcceptConcurrency < 0 {
		return nil, errors.New("admit: APIConfig.AcceptBatch or AcceptConcurrency is negative")
	}
	cfg.AcceptBatch = cmp.Or(cfg.AcceptBatch, AcceptBatchDefault)
	cfg.AcceptConcurrency = cmp.Or(cfg.AcceptConcurrency, AcceptConcurrencyDefault)
	cfg.SecretTTL = cmp.Or(cfg.SecretTTL, SecretTTLDefault)
	a := &api{cfg: cfg, log: cfg.Logger}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.group = grouper{batch: cfg.AcceptBatch, max: cfg.AcceptConcurrency, commit: a.commitAccepts}
	a.secrets = secretCache{ttl: cfg.SecretTTL, clock: cfg.Clock, load: func(ctx context.Context, key string) (int64, []byte, error) {
		return tenancy.AppSecret(ctx, cfg.Driver.Pool(), key)
	}}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/messages", relayhttp.RequireContentType("application/json")(http.HandlerFunc(a.send)))
	mux.HandleFunc("GET /v1/messages/{id}", a.get)
	return mux, nil
}

func writeCode(w http.ResponseWriter, e *RequestError) {
	writeJSON(w, e.Code.Status(), map[string]string{"reason": string(e.Code), "error": e.Detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// authenticate checks the signature headers of r over body and returns the
// app's id.
func (a *api) authenticate(ctx context.Context, r *http.Request, body []byte) (int64, *RequestError) {
	key, ts, sig := r.Header.Get(HeaderKey), r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature)
	if key == "" || ts == "" || sig == "" {
		return 0, bad(CodeUnauthenticated, "headers %s, %s and %s are required", HeaderKey, HeaderTimestamp, HeaderSignature)
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return 0, bad(CodeUnauthenticated, "%s must be Unix seconds", HeaderTimestamp)
	}
	now := a.cfg.Clock.Now()
	if d := now.Sub(time.Unix(unix, 0)); d > a.cfg.MaxSkew || d < -a.cfg.MaxSkew {
		return 0, bad(CodeStaleTimestamp, "the timestamp is %s from the server's clock, more than %s",
			d.Round(time.Second), a.cfg.MaxSkew)
	}
	app, secret, err := a.secrets.get(ctx, key)
	if errors.Is(err, relaytype.ErrNotFound) {
		return 0, bad(CodeUnauthenticated, "no active app has this API key")
	}
	if err != nil {
		return 0, bad(CodeUnavailable, "%s", relayhttp.InternalError(ctx, a.log, "sms api: app secret", err))
	}
	if !verify(secret, r.Method, r.URL.EscapedPath(), ts, body, sig) {
		return 0, bad(CodeBadSignature, "the signature does not match the request")
	}
	return app, nil
}

// send is POST /v1/messages.
func (a *api) send(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeCode(w, bad(CodeTooLarge, "the body is over %d bytes", a.cfg.MaxBody))
			return
		}
		writeCode(w, bad(CodeMalformedJSON, "the body could not be read"))
		return
	}
	app, rerr := a.authenticate(ctx, r, body)
	if rerr != nil {
		writeCode(w, rerr)
		return
	}
	req, err := ParseRequest(body)
	if err != nil {
		var re *RequestError
		if !errors.As(err, &re) {
			re = bad(CodeMalformedJSON, "the body is not a JSON request object")
		}
		writeCode(w, re)
		return
	}
	res, err := a.accept(ctx, app, req)
	if err != nil {
		writeCode(w, bad(CodeUnavailable, "%s; nothing was accepted, send the same request again",
			relayhttp.InternalError(ctx, a.log, "sms api: accept", err, "app_id", app)))
		return
	}
	status := http.StatusAccepted
	if res.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, SendAnswer{MessageID: res.ID, Duplicate: res.Duplicate})
}

// Identity is the engine identity of app's client message id in Queue.
func Identity(app int64, clientMsgID string) string {
	return "sms:" + strconv.FormatInt(app, 10) + ":" + clientMsgID
}

// payload is the engine message's payload: the request and its app. The
// inbox row is what the stage decides on; the payload keeps the request as
// received with the engine message.
type payload struct {
	AppID int64 `json:"app_id"`
	*Request
}

// accept enqueues req and writes its inbox row in one transaction, which
// it may share with concurrent requests (grouper), and returns after the
// commit.
func (a *api) accept(ctx context.Context, app int64, req *Request) (relay.EnqueueResult, error) {
	body, err := json.Marshal(payload{AppID: app, Request: req})
	if err != nil {
		return relay.EnqueueResult{}, err
	}
	params, err := json.Marshal(req.Params)
	if err != nil {
		return relay.EnqueueResult{}, err
	}
	return a.group.accept(ctx, &pendingAccept{app: app, req: req, body: body, params: params})
}

// getExec runs GET's statements planned at each execution (an unnamed
// statement), not from a plan cached per connection: PostgreSQL switches a
// prepared statement to a generic plan after a few executions, and one
// made while the tables were small scans them for every GET until an
// ANALYZE replaces it (TestGetPlansFollowTheTables). A GET is rare beside
// the send path, so planning each one costs little.
const getExec = pgx.QueryExecModeExec

// get is GET /v1/messages/{id}.
func (a *api) get(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	app, rerr := a.authenticate(ctx, r, nil)
	if rerr != nil {
		writeCode(w, rerr)
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		writeCode(w, bad(CodeNotFound, "no such message"))
		return
	}
	var m MessageAnswer
	var numbers, carriers, outcomes []string
	var units []int64
	err = a.cfg.Driver.Pool().QueryRow(ctx, stmts["MessageGet"], getExec, id, app).Scan(&m.MessageID, &m.ClientMsgID, &numbers,
		&carriers, &m.Segments, &units, &m.AmountLi, &m.State, &m.Reason, &m.Detail, &m.AcceptedAt, &m.DecidedAt,
		&outcomes, &m.CompletedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		writeCode(w, bad(CodeNotFound, "no such message"))
		return
	}
	if err != nil {
		writeCode(w, bad(CodeUnavailable, "%s", relayhttp.InternalError(ctx, a.log, "sms api: get", err, "app_id", app)))
		return
	}
	if m.Reason != "" {
		m.Status = rules.Reason(m.Reason).Status()
	}
	m.Recipients = make([]Recipient, len(numbers))
	for i, n := range numbers {
		rc := Recipient{Number: n}
		if i < len(carriers) && i < len(units) {
			rc.Carrier, rc.Segments, rc.UnitLi, rc.AmountLi = carriers[i], m.Segments, units[i], units[i]*int64(m.Segments)
		}
		if i < len(outcomes) {
			rc.Outcome = outcomes[i]
		}
		m.Recipients[i] = rc
	}
	if err := a.attempts(ctx, &m); err != nil {
		writeCode(w, bad(CodeUnavailable, "%s", relayhttp.InternalError(ctx, a.log, "sms api: get attempts", err, "app_id", app)))
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// attempts adds m's attempts and their segments to its recipients.
func (a *api) attempts(ctx context.Context, m *MessageAnswer) error {
	rows, err := a.cfg.Driver.Pool().Query(ctx, stmts["MessageAttempts"], getExec, m.MessageID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var recip, no, pk int
		var channel, state, detail, result, stat string
		var sid int64
		if err := rows.Scan(&recip, &no, &channel, &state, &detail, &pk, &sid, &result, &stat); err != nil {
			return err
		}
		if recip < 0 || recip >= len(m.Recipients) {
			continue
		}
		rc := &m.Recipients[recip]
		if n := len(rc.Attempts); n == 0 || rc.Attempts[n-1].Attempt != no {
			rc.Attempts = append(rc.Attempts, AttemptAnswer{Attempt: no, Channel: channel, State: state, Detail: detail})
		}
		at := &rc.Attempts[len(rc.Attempts)-1]
		at.Segments = append(at.Segments, SegmentAnswer{Segment: pk, SubmitID: uint64(sid), Result: result, Stat: stat})
	}
	return rows.Err()
}
