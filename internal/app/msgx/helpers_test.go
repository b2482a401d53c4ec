package msgx_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relaysink/relaykafka"
	"github.com/relayhq/relay/relaytype"
)

// Helpers shared by the focused integration tests (resp_guard_test.go,
// refd_test.go, requester_test.go, protocol_test.go, send_test.go,
// lifecycle_test.go). They drive the real Service through CMINMSGS and read
// the outcome back from the stores.

// sisWall is instant t as a SIS wall clock (YYYYMMDDhhmmss of the message
// zone, held in time.UTC), the way AODB writes DTTM and SODT.
func sisWall(cfg msgx.Config, t time.Time) time.Time {
	l := t.In(cfg.Flight.MessageLocation())
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}

// aodb is an envelope from AODB to us.
func aodb(seqn, typ, styp string, dttm time.Time) sisxml.Meta {
	return sisxml.Meta{SNDR: "AODB", RCVR: "RMS", SEQN: seqn, DTTM: dttm, TYPE: typ, STYP: styp}
}

// schd is a SCHD package (DNLD or RESP); rqsq "" leaves RQSQ absent.
func schd(styp, seqn string, dttm time.Time, rqsq string, flights ...sisxml.Flight) *sisxml.Message {
	s := &sisxml.Schedule{Subtype: styp, Flights: flights}
	if rqsq != "" {
		s.RQSQ = sisxml.Val(rqsq)
	}
	return &sisxml.Message{Meta: aodb(seqn, "SCHD", styp, dttm), Kind: sisxml.KindSchd, Schd: s}
}

// plan is a daily-plan record: FLID, FLNO, ADID D and SODT (a SIS wall clock).
func plan(flid, flno string, sodt time.Time) sisxml.Flight {
	return sisxml.Flight{FLID: flid, FLNO: sisxml.Val(flno), ADID: sisxml.Val("D"), SODT: sisxml.Val(sodt)}
}

// shared is plan for a shared flight of master maid.
func shared(flid, flno string, sodt time.Time, maid string) sisxml.Flight {
	f := plan(flid, flno, sodt)
	f.MAID, f.CSOP, f.CSFT = sisxml.Val(maid), sisxml.Val("MU"), sisxml.Val(flno)
	return f
}

// flopBase is a FLOP-BASE changing flid's FLNO.
func flopBase(seqn string, dttm time.Time, flid, flno string) *sisxml.Message {
	return &sisxml.Message{Meta: aodb(seqn, "FLOP", "BASE", dttm), Kind: sisxml.KindFlop,
		Flop: &sisxml.FlightOp{Subtype: "BASE", Flight: sisxml.Flight{FLID: flid, FLNO: sisxml.Val(flno)}}}
}

// fdel is the business deletion of flid.
func fdel(seqn string, dttm time.Time, flid string) *sisxml.Message {
	return &sisxml.Message{Meta: aodb(seqn, "FDEL", "DELE", dttm), Kind: sisxml.KindFdel,
		Fdel: &sisxml.FlightDelete{FLID: flid}}
}

// encode is sisxml.Encode that must succeed.
func encode(t *testing.T, m *sisxml.Message) []byte {
	t.Helper()
	raw, err := sisxml.Encode(m)
	require.NoError(t, err)
	return raw
}

// put writes m, encoded, as the next CMINMSGS row (as AODB does) and returns its id.
func (b *bundle) put(t *testing.T, m *sisxml.Message) int64 {
	t.Helper()
	return b.putRaw(t, string(encode(t, m)))
}

// putRaw writes raw as the next CMINMSGS row and returns its id.
func (b *bundle) putRaw(t *testing.T, raw string) int64 {
	t.Helper()
	res, err := b.mailbox.ExecContext(b.ctx, "INSERT INTO CMINMSGS (MSGCONTENT, RECEIVETIME) VALUES (?, ?)",
		raw, time.Now().UTC())
	require.NoError(t, err)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	return id
}

// startFromZero starts a service on an empty mailbox seeded at zero and
// returns the bundle and a DTTM of now.
func startFromZero(t *testing.T) (*bundle, time.Time) {
	t.Helper()
	b := setup(t)
	b.cfg.CutoverWatermark = "zero"
	b.start(t)
	return b, sisWall(b.cfg, time.Now())
}

// message returns PROC_STATE row id of the pipeline.
func (b *bundle) message(t *testing.T, id int64) *relaytype.Message {
	t.Helper()
	m, err := b.store.GetExecutor().MessageGet(b.ctx, b.cfg.Pipeline, id)
	require.NoError(t, err)
	return m
}

// terminal waits until message id is SUCCEEDED, SKIPPED or DEAD and returns it.
func (b *bundle) terminal(t *testing.T, id int64) *relaytype.Message {
	t.Helper()
	var m *relaytype.Message
	require.Eventually(t, func() bool {
		var err error
		m, err = b.store.GetExecutor().MessageGet(b.ctx, b.cfg.Pipeline, id)
		if err != nil {
			require.ErrorIs(t, err, relaytype.ErrNotFound)
			return false
		}
		return slices.Contains([]relaytype.State{relaytype.StateSucceeded, relaytype.StateSkipped, relaytype.StateDead}, m.State)
	}, time.Minute, 20*time.Millisecond, "message %d never reached a terminal state", id)
	return m
}

// flights loads the current states of flids (absent ones are missing from the map).
func (b *bundle) flights(t *testing.T, flids ...string) map[string]*flight.State {
	t.Helper()
	got, err := flightstore.Load(b.ctx, b.store.Pool(), flids, false)
	require.NoError(t, err)
	return got
}

// count runs a SELECT count(*) … on the msgx store.
func (b *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, query, args...).Scan(&n))
	return n
}

// xmin returns the PostgreSQL xmin of the one row query selects (query must
// select xmin::text): the id of the transaction that last wrote the row, so
// equal values prove two rows were written by one transaction.
func (b *bundle) xmin(t *testing.T, query string, args ...any) string {
	t.Helper()
	var x string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, query, args...).Scan(&x), query)
	return x
}

// reqRow is one REQ_TRACK row as stored.
type reqRow struct {
	State    string
	OutboxID *int64
	SentAt   *time.Time
	DoneAt   *time.Time
}

// request reads REQ_TRACK row id; ok is false when the row is gone.
func (b *bundle) request(t *testing.T, id int64) (r reqRow, ok bool) {
	t.Helper()
	err := b.store.Pool().QueryRow(b.ctx, "SELECT state, outbox_id, sent_at, done_at FROM req_track WHERE id = $1", id).
		Scan(&r.State, &r.OutboxID, &r.SentAt, &r.DoneAt)
	if err == pgx.ErrNoRows {
		return r, false
	}
	require.NoError(t, err)
	return r, true
}

// outboxContent returns COUTMSGS row id's MSGCONTENT.
func (b *bundle) outboxContent(t *testing.T, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, b.mailbox.QueryRowContext(b.ctx, "SELECT MSGCONTENT FROM COUTMSGS WHERE ID = ?", id).Scan(&s))
	return s
}

// mailboxCount counts the rows of a mailbox table (CMINMSGS or COUTMSGS).
func (b *bundle) mailboxCount(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, b.mailbox.QueryRowContext(b.ctx, "SELECT COUNT(*) FROM "+table).Scan(&n))
	return n
}

// newService builds a Service logging into log, without running it.
func (b *bundle) newService(t *testing.T, log *slog.Logger) *msgx.Service {
	t.Helper()
	sink, err := relaykafka.New(relaykafka.Config{Brokers: b.cluster.ListenAddrs()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sink.Close(context.Background())) })
	svc, err := msgx.New(msgx.Options{Config: b.cfg, Store: b.store, Mailbox: b.mailbox, Sink: sink, Owner: t.Name(),
		Logger: log})
	require.NoError(t, err)
	return svc
}

// run runs svc until the test ends (or stop is called) and returns stop.
func (b *bundle) run(t *testing.T, svc *msgx.Service) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(stop)
	return stop
}

// quiet is a logger that drops everything (for components built by a test).
func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// logRecorder is a slog.Handler that keeps every record, for waiting on a
// log line as an observable signal. Safe for concurrent use.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}

func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// seen reports whether a record with message msg and an int attribute key = v was logged.
func (r *logRecorder) seen(msg, key string, v int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if rec.Message != msg {
			continue
		}
		found := false
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == key && a.Value.Kind() == slog.KindInt64 && a.Value.Int64() == v {
				found = true
				return false
			}
			return true
		})
		if found {
			return true
		}
	}
	return false
}
