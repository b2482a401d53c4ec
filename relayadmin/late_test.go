package relayadmin_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayadmin"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// A row that commits after its hole was released: the intake finds it and
// GET /admin/late lists it; nothing enqueues it until POST
// /admin/late/ingest, which enqueues it once, and the engine processes it.
func TestLateRows(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, d relaydriver.Driver) {
		ctx := context.Background()
		clock := relayclock.NewFake(t0)
		log := slog.New(slog.DiscardHandler)
		foreign, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "foreign.db"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = foreign.Close() })
		_, err = foreign.Exec(`CREATE TABLE SRC (ID INTEGER PRIMARY KEY, BODY BLOB)`)
		require.NoError(t, err)
		insert := func(ids ...int64) {
			for _, id := range ids {
				_, err := foreign.Exec(`INSERT INTO SRC (ID, BODY) VALUES (?, 'ok')`, id)
				require.NoError(t, err)
			}
		}
		src, err := relaysource.NewSQLTable(foreign, relaysource.SQLTableConfig{
			Dialect: relaysource.DialectSQLite, Table: "SRC", IDColumn: "ID", PayloadColumn: "BODY"})
		require.NoError(t, err)
		in, err := relayintake.New(d, src, relayintake.Config{Queue: queue, MaxCommitDelay: time.Minute,
			LateCheckInterval: time.Minute, Clock: clock, Logger: log})
		require.NoError(t, err)
		e, err := relay.NewEngine(d, relay.Config{Queue: queue, Handler: handler{}, Clock: clock, Logger: log})
		require.NoError(t, err)
		round := func() *relayintake.RoundResult {
			res, err := in.RunOnce(ctx)
			require.NoError(t, err)
			return res
		}

		_, err = in.Seed(ctx, relayintake.SeedZero)
		require.NoError(t, err)
		insert(1, 2, 4)
		round()
		clock.Advance(time.Minute)
		require.Equal(t, int64(3), round().ReleasedFirst)
		round()
		insert(3) // committed after its hole was released
		clock.Advance(time.Minute)
		require.Equal(t, 1, round().LateFound)

		active := true
		srv := httptest.NewServer(relayadmin.Handler(relayadmin.Deps{Driver: d, Queue: queue, Engine: e,
			Intake: in, Active: func() bool { return active }, Clock: clock, Logger: log}))
		t.Cleanup(srv.Close)

		var late relayadmin.LateRows
		code, body := call(t, srv, http.MethodGet, "/admin/late", "", &late)
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, 1, late.Total)
		require.Equal(t, 1, late.NotIngested)
		require.Len(t, late.Items, 1)
		require.Equal(t, int64(3), late.Items[0].ID)
		require.False(t, late.Items[0].Ingested)
		require.Nil(t, late.Items[0].IngestedAt)
		require.True(t, late.Items[0].FoundAt.Equal(t0.Add(2*time.Minute)), "found at %v", late.Items[0].FoundAt)

		var st relayadmin.Stats
		code, body = call(t, srv, http.MethodGet, "/admin/stats", "", &st)
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, 1, st.PermanentHoles)
		require.Equal(t, 1, st.LateRows)
		require.Equal(t, 1, st.LateRowsNotIngested)

		_, err = d.GetExecutor().MessageGet(ctx, queue, 3)
		require.ErrorIs(t, err, relaytype.ErrNotFound, "never enqueued automatically")

		code, body = call(t, srv, http.MethodPost, "/admin/late/ingest", `{"ids":[]}`, nil)
		require.Equal(t, http.StatusBadRequest, code, body)
		active = false
		code, body = call(t, srv, http.MethodPost, "/admin/late/ingest", `{"ids":[3]}`, nil)
		require.Equal(t, http.StatusServiceUnavailable, code, body, "only the active instance ingests")
		active = true

		var res relayadmin.LateIngestResult
		code, body = call(t, srv, http.MethodPost, "/admin/late/ingest", `{"ids":[3]}`, &res)
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, []relayintake.IngestLateResult{{ID: 3, Outcome: relayintake.IngestOutcomeIngested, MessageID: 3}}, res.Items)
		_, err = e.Work(ctx)
		require.NoError(t, err)
		m, err := d.GetExecutor().MessageGet(ctx, queue, 3)
		require.NoError(t, err)
		require.Equal(t, relaytype.StateSucceeded, m.State, "processed by the engine")
		require.Equal(t, []byte("ok"), m.Payload)

		code, body = call(t, srv, http.MethodPost, "/admin/late/ingest", `{"ids":[3]}`, &res)
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, []relayintake.IngestLateResult{{ID: 3, Outcome: relayintake.IngestOutcomeAlready, MessageID: 3}}, res.Items)
		stats, err := d.GetExecutor().MessageStats(ctx, queue)
		require.NoError(t, err)
		var total int64
		for _, n := range stats.Counts {
			total += n
		}
		require.Equal(t, int64(4), total, "messages 1 to 4: the second ingest added none")

		code, body = call(t, srv, http.MethodGet, "/admin/late", "", &late)
		require.Equal(t, http.StatusOK, code, body)
		require.Zero(t, late.NotIngested)
		require.True(t, late.Items[0].Ingested)
		require.Equal(t, int64(3), late.Items[0].MessageID)

		noIntake := httptest.NewServer(relayadmin.Handler(relayadmin.Deps{Driver: d, Queue: queue, Clock: clock, Logger: log}))
		t.Cleanup(noIntake.Close)
		code, body = call(t, noIntake, http.MethodPost, "/admin/late/ingest", `{"ids":[3]}`, nil)
		require.Equal(t, http.StatusConflict, code, body)
	})
}
