package msgx

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaytype"
)

//go:embed mailbox.sql
var mailboxSQL string

var mailboxQueries = sqlfile.MustParse("msgx/mailbox.sql", mailboxSQL, "InboxInsert", "OutboxInsert", "OutboxFind",
	"InboxMarkCounts", "InboxMarks")

// Request types (REQ_TRACK.REQ_TYPE): REQT subtypes.
const (
	RequestSchd = "SCHD" // a day's plan, answered by SCHD-RESP
	RequestRefd = "REFD" // reference data, answered by REFD-RESP
)

// Requester registers outbound requests and sends them through COUTMSGS
// (seed 000 §7.2 G-REQ-TRACK): PENDING → SENT only after the COUTMSGS row is
// written, → DONE when the matching response is processed (in its
// transaction), → EXPIRED after the timeout. Registering a request expires an
// open one of the same (type, scope, sender). Safe for concurrent use.
type Requester struct {
	cfg     Config
	pool    *pgxpool.Pool
	mailbox *sql.DB
	clock   relaytype.Clock
	log     *slog.Logger
	seq     atomic.Uint32
}

// NewRequester returns a Requester over the msgx store and the mailbox.
func NewRequester(cfg Config, pool *pgxpool.Pool, mailbox *sql.DB, clock relaytype.Clock, log *slog.Logger) *Requester {
	return &Requester{cfg: cfg, pool: pool, mailbox: mailbox, clock: clock, log: log}
}

// Register records a PENDING request of typ (RequestSchd with scope = the
// operating day YYYYMMDD, RequestRefd with scope = the reference type). The
// next Pass sends it.
func (r *Requester) Register(ctx context.Context, typ, scope string) (*flightstore.Request, error) {
	switch {
	case typ == RequestSchd && (len(scope) != 8 || strings.Trim(scope, "0123456789") != "" || !isDay(scope)):
		return nil, fmt.Errorf("msgx: request SCHD: scope %q is not an operating day YYYYMMDD", scope)
	case typ == RequestRefd && (scope == "" || strings.Contains(scope, "|")):
		return nil, fmt.Errorf("msgx: request REFD: bad reference type %q", scope)
	case typ != RequestSchd && typ != RequestRefd:
		return nil, fmt.Errorf("msgx: unknown request type %q (want %s or %s)", typ, RequestSchd, RequestRefd)
	}
	now := r.clock.Now()
	// Only a request whose REQT can be written is registered: one that cannot
	// (a reference type with edge white space or a character XML cannot carry)
	// would stay PENDING and fail every Pass, and Pass stops at the first
	// failure — it would hold back every later request and all expiry.
	if _, err := r.encode(&flightstore.Request{Type: typ, Scope: scope, SEQN: "0"}, now); err != nil {
		return nil, fmt.Errorf("msgx: request %s: scope %q cannot be sent: %w", typ, scope, err)
	}
	// Our SEQN: send second plus a per-process counter; echoed back as RQSQ.
	seqn := fmt.Sprintf("%s%04d", now.UTC().Format("060102150405"), r.seq.Add(1)%10000)
	var out *flightstore.Request
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var err error
		out, err = flightstore.RequestRegister(ctx, tx, &flightstore.Request{Type: typ, Scope: scope,
			Sender: r.cfg.SystemCode, SEQN: seqn}, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("msgx: register request %s %s: %w", typ, scope, err)
	}
	return out, nil
}

// Pass sends every PENDING request and expires SENT requests older than the
// timeout. It reports how many were sent and expired. A request that cannot
// be sent does not hold up the others or the expiry: every failure is
// returned, joined, after the whole pass.
func (r *Requester) Pass(ctx context.Context) (sent, expired int, err error) {
	pending, err := flightstore.RequestPending(ctx, r.pool)
	if err != nil {
		return 0, 0, err
	}
	var errs []error
	for _, q := range pending {
		if err := r.send(ctx, q); err != nil {
			errs = append(errs, err)
			continue
		}
		sent++
	}
	now := r.clock.Now()
	expired, err = flightstore.RequestExpire(ctx, r.pool, now.Add(-r.cfg.RequestTimeout), now)
	return sent, expired, errors.Join(append(errs, err)...)
}

// send writes q's REQT to COUTMSGS and marks it SENT. A crash between the two
// leaves a PENDING request whose message is already in the mailbox: the next
// send finds that row by its SEQN and only marks it, instead of sending it
// twice (seed 000 §7.2: compensate, never resend unconditionally). When the
// answer was processed first — the pump recorded the send from the mailbox
// row and closed the request — there is nothing left to mark.
func (r *Requester) send(ctx context.Context, q *flightstore.Request) error {
	now := r.clock.Now()
	body, err := r.encode(q, now)
	if err != nil {
		return err
	}
	outID, _, found, err := r.FindSent(ctx, q)
	switch {
	case err != nil:
		return err
	case !found:
		res, err := r.mailbox.ExecContext(ctx, mailboxQueries["OutboxInsert"], string(body), now.UTC())
		if err != nil {
			return fmt.Errorf("msgx: request %d: write COUTMSGS: %w", q.ID, err)
		}
		if outID, err = res.LastInsertId(); err != nil {
			return fmt.Errorf("msgx: request %d: COUTMSGS id: %w", q.ID, err)
		}
	default:
		r.log.InfoContext(ctx, "msgx: request already in COUTMSGS, marking it sent", "request_id", q.ID, "coutmsgs_id", outID)
	}
	err = flightstore.RequestMarkSent(ctx, r.pool, q.ID, outID, now)
	if errors.Is(err, flightstore.ErrNoRequest) {
		r.log.InfoContext(ctx, "msgx: request no longer pending (answered or expired meanwhile)", "request_id", q.ID, "coutmsgs_id", outID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("msgx: request %d: mark sent: %w", q.ID, err)
	}
	return nil
}

// FindSent looks up the COUTMSGS row of q's REQT — written at or after the
// request was registered, carrying its SEQN — and returns its id and
// CREATETIME (written from the requester's clock, in UTC).
func (r *Requester) FindSent(ctx context.Context, q *flightstore.Request) (id int64, at time.Time, found bool, err error) {
	err = r.mailbox.QueryRowContext(ctx, mailboxQueries["OutboxFind"], q.CreatedAt.UTC().Add(-time.Minute),
		"%<SEQN>"+q.SEQN+"</SEQN>%").Scan(&id, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, time.Time{}, false, nil
	case err != nil:
		return 0, time.Time{}, false, fmt.Errorf("msgx: request %d: look up COUTMSGS: %w", q.ID, err)
	}
	return id, at, true, nil
}

// isDay reports whether s is a calendar date YYYYMMDD (the REQT encoder
// refuses any other ODAY).
func isDay(s string) bool {
	_, err := time.Parse("20060102", s)
	return err == nil
}

func (r *Requester) encode(q *flightstore.Request, now time.Time) ([]byte, error) {
	local := now.In(r.cfg.Flight.MessageLocation())
	m := &sisxml.Message{
		Meta: sisxml.Meta{SNDR: r.cfg.SystemCode, RCVR: r.cfg.AODBCode, SEQN: q.SEQN, TYPE: "REQT", STYP: q.Type,
			DTTM: time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), 0, time.UTC)},
		Kind:    sisxml.KindRequest,
		Request: &sisxml.Request{Subtype: q.Type},
	}
	if q.Type == RequestSchd {
		m.Request.ODAY = sisxml.Val(q.Scope)
	} else {
		m.Request.RTYP = sisxml.Val(q.Scope)
	}
	return sisxml.Encode(m)
}
