package relayadmin_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayadmin"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaytype"
)

// serveAdmin serves deps's admin API on a relayhttp listener (loopback) the
// way relay serve does, until the test ends.
func serveAdmin(t *testing.T, deps relayadmin.Deps, tok relayhttp.Token) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/admin/", relayadmin.Handler(deps))
	s, err := relayhttp.Listen(relayhttp.Config{Name: "admin", Addr: "127.0.0.1:0", Handler: mux, Token: tok,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	go func() { _ = s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s.URL()
}

// The attack of the hardening issue, replayed against the admin API on its
// listener: an anonymous cross-origin text/plain POST that used to replay a
// dead letter, a JSON one from a foreign origin, and a rebound Host are
// refused and move nothing; with a token configured, only a request that
// carries it gets through.
func TestAdminRefusesCrossSiteAndRebinding(t *testing.T) {
	t.Parallel()
	d := stores["sqlite"](t)
	f := newFixture(t, d)
	deps := relayadmin.Deps{Driver: d, Queue: queue, Engine: f.engine, OutboxTargets: []string{target},
		Clock: f.clock, Logger: slog.New(slog.DiscardHandler)}
	state := func(id int64) relaytype.State {
		m, err := d.GetExecutor().MessageGet(context.Background(), queue, id)
		require.NoError(t, err)
		return m.State
	}
	post := func(base, contentType string, header http.Header) (int, string) {
		req, err := http.NewRequest(http.MethodPost, base+"/admin/replay", strings.NewReader(`{"ids":[4]}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, buf.String()
	}
	evil := http.Header{"Origin": {"https://evil.example"}}

	base := serveAdmin(t, deps, nil)
	code, raw := post(base, "text/plain", evil)
	require.Equal(t, http.StatusForbidden, code, raw)
	code, raw = post(base, "application/json", evil)
	require.Equal(t, http.StatusForbidden, code, raw)
	code, raw = post(base, "text/plain", nil)
	require.Equal(t, http.StatusUnsupportedMediaType, code, "the API takes JSON bodies only: %s", raw)
	code, raw = post(base, "application/json", nil)
	require.Equal(t, http.StatusOK, code, "a same-machine client without Origin: %s", raw)
	require.Equal(t, relaytype.StatePending, state(4))

	req, err := http.NewRequest(http.MethodGet, base+"/admin/stats", nil)
	require.NoError(t, err)
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "DNS rebinding")

	const tok = "admin-token-0123456789"
	base = serveAdmin(t, deps, relayhttp.Token(tok))
	code, _ = callURL(t, base, http.MethodGet, "/admin/stats", "", nil, nil)
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = callURL(t, base, http.MethodPost, "/admin/replay", `{"ids":[3]}`, nil,
		http.Header{"Authorization": {"Bearer wrong-token-0123456789"}})
	require.Equal(t, http.StatusUnauthorized, code)
	require.Equal(t, relaytype.StateDead, state(3))
	var res relayadmin.ReplayResult
	code, raw = callURL(t, base, http.MethodPost, "/admin/replay", `{"ids":[3]}`, &res,
		http.Header{"Authorization": {"Bearer " + tok}})
	require.Equal(t, http.StatusOK, code, raw)
	require.Equal(t, 1, res.Replayed)
}

// A store error answers 500 with an error id, never the store's words
// (SQLSTATE, relation names); the log line with that id has them.
func TestStoreErrorsStayInTheLog(t *testing.T) {
	t.Parallel()
	d := testdb.PGDriver(t)
	f := newFixture(t, d)
	_, err := d.GetExecutor().Exec(context.Background(), "DROP TABLE relay_hole")
	require.NoError(t, err)
	var logs bytes.Buffer // the handler runs on the test's goroutine
	h := relayadmin.Handler(relayadmin.Deps{Driver: d, Queue: queue, Engine: f.engine, Clock: f.clock,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, path := range []string{"/admin/stats", "/admin/holes"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		raw := rec.Body.String()
		require.Equal(t, http.StatusInternalServerError, rec.Code, raw)
		require.Contains(t, raw, "error id")
		for _, secret := range []string{"SQLSTATE", "42P01", "relay_hole", "relation"} {
			require.NotContains(t, raw, secret, "%s: the store's words stay in the log", path)
		}
	}
	require.Contains(t, logs.String(), "SQLSTATE 42P01")
	require.Contains(t, logs.String(), "error_id=")
}

// A replay by ids reads their classes in one store call, not one per id.
func TestReplayByIDsReadsClassesOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, d relaydriver.Driver) {
		f := newFixture(t, d)
		counted := &countingDriver{Driver: d}
		srv := httptest.NewServer(relayadmin.Handler(relayadmin.Deps{Driver: counted, Queue: queue, Engine: f.engine,
			Clock: f.clock, Logger: slog.New(slog.DiscardHandler)}))
		t.Cleanup(srv.Close)
		ids := make([]string, relayadmin.MaxIDs)
		for i := range ids {
			ids[i] = fmt.Sprint(i + 3)
		}
		var res relayadmin.ReplayResult
		code, raw := call(t, srv, http.MethodPost, "/admin/replay", `{"ids":[`+strings.Join(ids, ",")+`]}`, &res)
		require.Equal(t, http.StatusOK, code, raw)
		require.Equal(t, []relaytype.ErrorClass{relaytype.ClassInfra, relaytype.ClassTimeout}, res.Classes)
		require.Equal(t, 5, res.Replayed, "3, 5, 6 DEAD(INFRA), 4 DEAD(TIMEOUT), 8 FAILED(INFRA)")
		require.Zero(t, counted.gets.Load(), "no read per id")
		require.Equal(t, int32(1), counted.classes.Load())
	})
}

// countingDriver counts the message reads the admin API does through it.
type countingDriver struct {
	relaydriver.Driver
	gets, classes atomic.Int32
}

func (d *countingDriver) GetExecutor() relaydriver.Executor {
	return countingExecutor{Executor: d.Driver.GetExecutor(), d: d}
}

type countingExecutor struct {
	relaydriver.Executor
	d *countingDriver
}

func (e countingExecutor) MessageGet(ctx context.Context, queue string, id int64) (*relaytype.Message, error) {
	e.d.gets.Add(1)
	return e.Executor.MessageGet(ctx, queue, id)
}

func (e countingExecutor) MessageClasses(ctx context.Context, p *relaydriver.MessageClassesParams) ([]relaytype.ErrorClass, error) {
	e.d.classes.Add(1)
	return e.Executor.MessageClasses(ctx, p)
}
