package relayadmin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayadmin"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

const (
	queue  = "adm"
	target = "sink:adm"
)

// stores opens a fresh migrated store per kind.
var stores = map[string]func(t *testing.T) relaydriver.Driver{
	"postgres": func(t *testing.T) relaydriver.Driver { return testdb.PGDriver(t) },
	"sqlite": func(t *testing.T) relaydriver.Driver {
		ctx := context.Background()
		d, err := relaysqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		_, err = relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
		require.NoError(t, err)
		return d
	},
}

func eachStore(t *testing.T, fn func(t *testing.T, d relaydriver.Driver)) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open(t))
		})
	}
}

// handler decides by payload: "ok" succeeds and appends one outbox event,
// "dead:<CLASS>" is DEAD with that class, "retry" fails with INFRA.
type handler struct{}

func (handler) Handle(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
	p := string(d.Message.Payload)
	switch {
	case p == "ok":
		if _, err := relay.AppendEventsTx(ctx, tx, &relay.OutboxEvent{ID: fmt.Sprintf("ev-%d", d.Message.ID),
			Target: target, Topic: "t", Key: fmt.Sprintf("k%d", d.Message.ID%2), Payload: []byte("secret-body")}); err != nil {
			return relay.Retry(relaytype.ClassInfra, err)
		}
		return relay.Succeeded()
	case strings.HasPrefix(p, "dead:"):
		return relay.Dead(relaytype.ErrorClass(strings.TrimPrefix(p, "dead:")), errors.New("failed as asked"))
	default:
		return relay.Retry(relaytype.ClassInfra, errors.New("try later"))
	}
}

// failingSink confirms nothing.
type failingSink struct{}

func (failingSink) Name() string { return "failing" }
func (failingSink) Publish(_ context.Context, evs []relaysink.Event) []error {
	errs := make([]error, len(evs))
	for i := range errs {
		errs[i] = errors.New("sink down")
	}
	return errs
}
func (failingSink) Close(context.Context) error { return nil }

// missingSource reports every row missing: acknowledgements are abandoned.
type missingSource struct{}

func (missingSource) Acknowledge(context.Context, int64, string, time.Time) (relaysource.AckOutcome, error) {
	return relaysource.AckMissingRow, nil
}

// fixture is a queue with, after setup:
//
//	1 ok, 2 dead:MALFORMED, 3 dead:INFRA, 4 dead:TIMEOUT, 5 dead:INFRA,
//	6 dead:INFRA, 7 ok, 8 retry (FAILED, the backlog)
//
// two DEAD outbox events (of 1 and 7), and abandoned acknowledgements
// (MISSING_ROW) on every terminal message.
type fixture struct {
	d      relaydriver.Driver
	clock  *relayclock.Fake
	engine *relay.Engine
	ack    *relay.AckWriter
}

func newFixture(t *testing.T, d relaydriver.Driver) *fixture {
	ctx := context.Background()
	clock := relayclock.NewFake(t0)
	log := slog.New(slog.DiscardHandler)
	e, err := relay.NewEngine(d, relay.Config{Queue: queue, Handler: handler{}, Clock: clock, Logger: log,
		AckIntent: true})
	require.NoError(t, err)
	payloads := []string{"ok", "dead:MALFORMED", "dead:INFRA", "dead:TIMEOUT", "dead:INFRA", "dead:INFRA", "ok", "retry"}
	ps := make([]*relay.EnqueueParams, len(payloads))
	for i, p := range payloads {
		ps[i] = &relay.EnqueueParams{ID: int64(i + 1), Payload: []byte(p)}
	}
	_, err = e.Enqueue(ctx, ps...)
	require.NoError(t, err)
	_, err = e.Work(ctx)
	require.NoError(t, err)

	disp, err := relay.NewDispatcher(d, failingSink{}, relay.DispatcherConfig{Target: target, MaxAttempts: 1,
		Clock: clock, Logger: log})
	require.NoError(t, err)
	_, err = disp.Work(ctx)
	require.NoError(t, err)

	ack, err := relay.NewAckWriter(d, missingSource{}, relay.AckConfig{Queue: queue, Gate: e.Gate(),
		R: time.Hour, Clock: clock, Logger: log})
	require.NoError(t, err)
	_, err = ack.Work(ctx)
	require.NoError(t, err)

	clock.Advance(90 * time.Second)
	return &fixture{d: d, clock: clock, engine: e, ack: ack}
}

func (f *fixture) server(t *testing.T, withAck bool) *httptest.Server {
	deps := relayadmin.Deps{Driver: f.d, Queue: queue, Engine: f.engine, OutboxTargets: []string{target},
		Clock: f.clock, Logger: slog.New(slog.DiscardHandler)}
	if withAck {
		deps.Ack = f.ack
	}
	srv := httptest.NewServer(relayadmin.Handler(deps))
	t.Cleanup(srv.Close)
	return srv
}

// call does one request (a POST as application/json) and decodes the JSON
// answer into out (when not nil); it returns the status and the raw body.
func call(t *testing.T, srv *httptest.Server, method, path, body string, out any) (int, string) {
	t.Helper()
	return callURL(t, srv.URL, method, path, body, out, nil)
}

// callURL is call on the server at base, with extra headers.
func callURL(t *testing.T, base, method, path, body string, out any, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s %s: %s", method, path, raw)
	if out != nil && resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
	require.NotContains(t, string(raw), "secret-body", "never a payload")
	return resp.StatusCode, string(raw)
}

func deadIDs(p *relayadmin.MessagePage) []int64 {
	out := []int64{}
	for _, m := range p.Items {
		out = append(out, m.ID)
	}
	return out
}

func TestStats(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, d relaydriver.Driver) {
		ctx := context.Background()
		require.NoError(t, d.GetExecutor().CursorSeed(ctx, &relaydriver.CursorSeedParams{Queue: queue,
			Watermark: 0, Mode: "zero", Now: t0}))
		f := newFixture(t, d)
		holeSince := t0.Add(30 * time.Second)
		require.NoError(t, d.GetExecutor().CursorSave(ctx, &relaydriver.CursorSaveParams{Queue: queue,
			Watermark: 8, HoleSince: holeSince, Now: t0}))
		require.NoError(t, d.GetExecutor().HoleInsert(ctx, &relaytype.Hole{Queue: queue, ID: 9,
			FirstSeenAt: t0, ReleasedAt: t0.Add(time.Minute)}))
		srv := f.server(t, true)

		var st relayadmin.Stats
		code, raw := call(t, srv, http.MethodGet, "/admin/stats", "", &st)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, map[relaytype.State]int64{relaytype.StateSucceeded: 2, relaytype.StateDead: 5,
			relaytype.StateFailed: 1}, nonZero(st.Counts))
		require.Equal(t, int64(1), st.Backlog)
		require.InDelta(t, 90, st.OldestUnprocessedSeconds, 0.001, "age on the injected clock")
		require.Equal(t, int64(8), st.MaxID)
		require.NotNil(t, st.Cursor)
		require.Equal(t, int64(8), st.Cursor.Watermark)
		require.True(t, st.Cursor.Seeded)
		require.Equal(t, "zero", st.Cursor.SeedMode)
		require.NotNil(t, st.Cursor.HoleSince)
		require.True(t, holeSince.Equal(*st.Cursor.HoleSince))
		require.InDelta(t, 60, st.Cursor.HoleAgeSeconds, 0.001)
		require.Equal(t, 1, st.PermanentHoles)
		require.Equal(t, []relayadmin.OutboxTargetStats{{Target: target, Dead: 2}}, st.Outbox)

		var hs relayadmin.Holes
		code, raw = call(t, srv, http.MethodGet, "/admin/holes", "", &hs)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, 1, hs.Total)
		require.Equal(t, int64(9), hs.Items[0].ID)
		require.Equal(t, int64(8), hs.Cursor.Watermark)

		var dlq relayadmin.DLQ
		code, raw = call(t, srv, http.MethodGet, "/admin/dlq", "", &dlq)
		require.Equal(t, http.StatusOK, code, raw)
		require.Len(t, dlq.Items, 2)
		for _, ev := range dlq.Items {
			require.Equal(t, target, ev.Target)
			require.Equal(t, 1, ev.Attempts)
			require.Contains(t, ev.LastError, "sink down")
		}
		require.ElementsMatch(t, []string{"ev-1", "ev-7"}, []string{dlq.Items[0].EventID, dlq.Items[1].EventID})
		code, raw = call(t, srv, http.MethodGet, "/admin/dlq?target="+target, "", &dlq)
		require.Equal(t, http.StatusOK, code, raw)
		require.Len(t, dlq.Items, 2)
		// Another app's outbox in the same store is not this instance's to show.
		code, raw = call(t, srv, http.MethodGet, "/admin/dlq?target=other", "", nil)
		require.Equal(t, http.StatusNotFound, code, raw)
		require.Contains(t, raw, "not an outbox target of this instance")
	})
}

func nonZero(m map[relaytype.State]int64) map[relaytype.State]int64 {
	out := map[relaytype.State]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func TestDeadListFilteredAndPaginated(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, d relaydriver.Driver) {
		srv := newFixture(t, d).server(t, true)
		var page relayadmin.MessagePage
		code, raw := call(t, srv, http.MethodGet, "/admin/dead", "", &page)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, []int64{2, 3, 4, 5, 6}, deadIDs(&page))
		require.Zero(t, page.NextAfter, "not a full page")
		m := page.Items[0]
		require.Equal(t, relaytype.ClassMalformed, m.Class)
		require.Equal(t, relaytype.StateDead, m.State)
		require.Contains(t, m.LastError, "failed as asked")
		require.True(t, t0.Equal(m.UpdatedAt))

		code, raw = call(t, srv, http.MethodGet, "/admin/dead?class=INFRA&limit=2", "", &page)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, []int64{3, 5}, deadIDs(&page))
		require.Equal(t, int64(5), page.NextAfter)
		code, raw = call(t, srv, http.MethodGet, fmt.Sprintf("/admin/dead?class=INFRA&limit=2&after=%d", page.NextAfter), "", &page)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, []int64{6}, deadIDs(&page))
		code, raw = call(t, srv, http.MethodGet, "/admin/dead?class=infra,timeout", "", &page)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, []int64{3, 4, 5, 6}, deadIDs(&page))

		code, raw = call(t, srv, http.MethodGet, "/admin/dead?class=NOPE", "", nil)
		require.Equal(t, http.StatusBadRequest, code)
		require.Contains(t, raw, "unknown error class")
		code, _ = call(t, srv, http.MethodGet, "/admin/dead?limit=100000", "", nil)
		require.Equal(t, http.StatusBadRequest, code)
		code, _ = call(t, srv, http.MethodGet, "/admin/dead?after=-1", "", nil)
		require.Equal(t, http.StatusBadRequest, code)
		code, _ = call(t, srv, http.MethodGet, "/admin/nope", "", nil)
		require.Equal(t, http.StatusNotFound, code)
		code, _ = call(t, srv, http.MethodPost, "/admin/dead", "", nil)
		require.Equal(t, http.StatusMethodNotAllowed, code)
	})
}

func TestReplay(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, d relaydriver.Driver) {
		f := newFixture(t, d)
		srv := f.server(t, true)
		ctx := context.Background()
		state := func(id int64) relaytype.State {
			m, err := d.GetExecutor().MessageGet(ctx, queue, id)
			require.NoError(t, err)
			return m.State
		}

		code, raw := call(t, srv, http.MethodPost, "/admin/replay", `{"classes":["MALFORMED"]}`, nil)
		require.Equal(t, http.StatusBadRequest, code, raw)
		require.Contains(t, raw, "replay refused")
		require.Contains(t, raw, `class \"MALFORMED\" is not replayable`)
		require.Equal(t, relaytype.StateDead, state(2))
		code, raw = call(t, srv, http.MethodPost, "/admin/replay", `{"ids":[2]}`, nil)
		require.Equal(t, http.StatusBadRequest, code, "by id, the message's own class is checked: %s", raw)
		require.Equal(t, relaytype.StateDead, state(2))

		var res relayadmin.ReplayResult
		code, raw = call(t, srv, http.MethodPost, "/admin/replay", `{"ids":[4]}`, &res)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, 1, res.Replayed)
		require.Equal(t, []relaytype.ErrorClass{relaytype.ClassTimeout}, res.Classes)
		require.Equal(t, relaytype.StatePending, state(4))

		code, raw = call(t, srv, http.MethodPost, "/admin/replay", `{"classes":["INFRA"],"ids":[3,5]}`, &res)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, 2, res.Replayed)
		require.Equal(t, relaytype.StateDead, state(6), "only the ids given")
		code, raw = call(t, srv, http.MethodPost, "/admin/replay", `{"classes":["INFRA"]}`, &res)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, 2, res.Replayed, "6 DEAD(INFRA) and 8 FAILED(INFRA)")
		for _, id := range []int64{3, 4, 5, 6, 8} {
			require.Equal(t, relaytype.StatePending, state(id), "message %d", id)
		}
		require.Equal(t, relaytype.StateSucceeded, state(1))

		for _, bad := range []string{``, `{`, `{"classes":["INFRA"]} {}`, `{"nope":1}`, `{"classes":[]}`} {
			code, raw = call(t, srv, http.MethodPost, "/admin/replay", bad, nil)
			require.Equal(t, http.StatusBadRequest, code, "body %q: %s", bad, raw)
		}
		code, _ = call(t, srv, http.MethodPost, "/admin/replay", `{"ids":[`+strings.Repeat("1,", 40000)+`1]}`, nil)
		require.Equal(t, http.StatusRequestEntityTooLarge, code)

		srv2 := httptest.NewServer(relayadmin.Handler(relayadmin.Deps{Driver: d, Queue: queue, Engine: f.engine,
			Active: func() bool { return false }, Logger: slog.New(slog.DiscardHandler)}))
		defer srv2.Close()
		code, raw = call(t, srv2, http.MethodPost, "/admin/replay", `{"classes":["INFRA"]}`, nil)
		require.Equal(t, http.StatusServiceUnavailable, code, raw)
	})
}

func TestReopen(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, d relaydriver.Driver) {
		f := newFixture(t, d)
		ctx := context.Background()

		code, raw := call(t, f.server(t, false), http.MethodPost, "/admin/reopen", `{"ids":[1]}`, nil)
		require.Equal(t, http.StatusConflict, code, raw)
		require.Contains(t, raw, "no acknowledgement writer")

		srv := f.server(t, true)
		var page relayadmin.MessagePage
		code, raw = call(t, srv, http.MethodGet, "/admin/abandoned", "", &page)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7}, deadIDs(&page))
		require.Equal(t, relaydriver.AckReasonMissingRow, page.Items[0].AckReason)

		var res relayadmin.ReopenResult
		code, raw = call(t, srv, http.MethodPost, "/admin/reopen", `{"ids":[1,2]}`, &res)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, 2, res.Reopened)
		m, err := d.GetExecutor().MessageGet(ctx, queue, 1)
		require.NoError(t, err)
		require.True(t, m.AckAbandonedAt.IsZero())
		require.True(t, m.AckAt.IsZero(), "reopened is not acknowledged")
		require.True(t, f.clock.Now().Equal(m.AckNextAt), "due at once on the clock")

		code, raw = call(t, srv, http.MethodPost, "/admin/reopen", `{"reason":"MISSING_ROW"}`, &res)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, 5, res.Reopened)
		code, raw = call(t, srv, http.MethodGet, "/admin/abandoned", "", &page)
		require.Equal(t, http.StatusOK, code, raw)
		require.Empty(t, page.Items)

		code, _ = call(t, srv, http.MethodPost, "/admin/reopen", `{"reason":"WHATEVER"}`, nil)
		require.Equal(t, http.StatusBadRequest, code)
		code, _ = call(t, srv, http.MethodPost, "/admin/reopen", `{}`, nil)
		require.Equal(t, http.StatusBadRequest, code)
	})
}

// The read functions serve the CLI's offline mode; a queue without a
// cursor shows none.
func TestReadWithoutCursor(t *testing.T) {
	t.Parallel()
	d := stores["sqlite"](t)
	st, err := relayadmin.ReadStats(context.Background(), d, "empty", nil, t0)
	require.NoError(t, err)
	require.Nil(t, st.Cursor)
	require.Zero(t, st.Backlog)
	require.Nil(t, st.OldestUnprocessedEnqueuedAt)
	var buf bytes.Buffer
	require.NoError(t, json.NewEncoder(&buf).Encode(st))
	require.Contains(t, buf.String(), `"cursor":null`)
}

// TestStatsCountsLatestTargets: a latest-state target (one row per key, as
// msgx's KAFKA:schd) is counted like an outbox target, sent rows included.
func TestStatsCountsLatestTargets(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, d relaydriver.Driver) {
		ctx := context.Background()
		ex := d.GetExecutor()
		const latest = "KAFKA:latest-stats"
		var sent relaydriver.LatestRef
		for i, key := range []string{"a", "b", "c"} {
			res, err := ex.LatestUpsert(ctx, &relaydriver.LatestUpsertParams{Target: latest, Topic: "t", Key: key,
				Version: 1, Type: relaydriver.OutboxUpsert, Payload: []byte("{}"), Now: t0})
			require.NoError(t, err)
			require.True(t, res.Accepted)
			if i == 0 {
				sent = relaydriver.LatestRef{Key: key, Generation: res.Generation}
			}
		}
		n, err := ex.LatestMarkSent(ctx, &relaydriver.LatestMarkSentParams{Target: latest,
			Rows: []relaydriver.LatestRef{sent}, Now: t0})
		require.NoError(t, err)
		require.Equal(t, 1, n)

		st, err := relayadmin.ReadStats(ctx, d, queue, []string{latest}, t0)
		require.NoError(t, err)
		require.Equal(t, []relayadmin.OutboxTargetStats{{Target: latest, Pending: 2, Sent: 1}}, st.Outbox)
	})
}
