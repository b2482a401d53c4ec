package msgx_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/relayadmin"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaysink/relaykafka"
	"github.com/relayhq/relay/relaytype"
)

// TestLateRowIngestedByOperator: a CMINMSGS row whose transaction commits
// after its hole was released (later than max-commit-delay) is not enqueued
// by the intake — the design accepts that — but it is not lost silently:
// msgx's intake finds it, counts it (relay_intake_late_rows_total) and logs it
// once; the admin API lists it; only an explicit ingest enqueues it, and the
// pump then processes it like any message and its mark is written back.
func TestLateRowIngestedByOperator(t *testing.T) {
	b := setup(t)
	b.cfg.CutoverWatermark = "zero"
	b.cfg.MaxCommitDelay = 300 * time.Millisecond
	b.cfg.LateCheckInterval = 20 * time.Millisecond
	reg := prometheus.NewRegistry()
	logs := &logRecorder{}
	sink, err := relaykafka.New(relaykafka.Config{Brokers: b.cluster.ListenAddrs()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sink.Close(context.Background())) })
	svc, err := msgx.New(msgx.Options{Config: b.cfg, Store: b.store, Mailbox: b.mailbox, Sink: sink, Owner: t.Name(),
		Logger: slog.New(logs), Registerer: reg})
	require.NoError(t, err)
	b.run(t, svc)
	dttm := sisWall(b.cfg, time.Now())
	day1 := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

	// The AODB's transaction takes an id and stays open; a later row commits.
	tx, err := b.mailbox.BeginTx(b.ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(b.ctx, "INSERT INTO CMINMSGS (MSGCONTENT, RECEIVETIME) VALUES (?, ?)",
		string(encode(t, schd("DNLD", "8001", dttm, "", plan("L1", "CA601", day1)))), time.Now().UTC())
	require.NoError(t, err)
	lateID, err := res.LastInsertId()
	require.NoError(t, err)
	next := b.put(t, schd("DNLD", "8002", dttm, "", plan("L2", "CA602", day1)))
	require.Greater(t, next, lateID)

	// The hole ages out, the later row is processed; then the open
	// transaction commits: a late row.
	require.Equal(t, relaytype.StateSucceeded, b.terminal(t, next).State)
	require.NoError(t, tx.Commit())

	require.Eventually(t, func() bool { return lateMetric(t, reg) == 1 }, time.Minute, 20*time.Millisecond,
		"the late row is counted")
	_, err = b.store.GetExecutor().MessageGet(b.ctx, b.cfg.Pipeline, lateID)
	require.ErrorIs(t, err, relaytype.ErrNotFound, "never enqueued automatically")
	require.Empty(t, b.flights(t, "L1"))

	srv := httptest.NewServer(relayadmin.Handler(relayadmin.Deps{Driver: b.store, Queue: b.cfg.Pipeline,
		Engine: svc.Engine(), Intake: svc.Intake(), Ack: svc.AckWriter(),
		OutboxTargets: []string{msgx.TargetMsg, msgx.TargetSchd}, Active: svc.Active, Logger: quiet()}))
	t.Cleanup(srv.Close)
	var late relayadmin.LateRows
	adminCall(t, srv, http.MethodGet, "/admin/late", "", &late)
	require.Equal(t, 1, late.NotIngested)
	require.Len(t, late.Items, 1)
	require.Equal(t, lateID, late.Items[0].ID)
	require.False(t, late.Items[0].Ingested)

	var ing relayadmin.LateIngestResult
	adminCall(t, srv, http.MethodPost, "/admin/late/ingest", `{"ids":[`+strconv.FormatInt(lateID, 10)+`]}`, &ing)
	require.Equal(t, []relayintake.IngestLateResult{{ID: lateID, Outcome: relayintake.IngestOutcomeIngested, MessageID: lateID}}, ing.Items)

	m := b.terminal(t, lateID)
	require.Equal(t, relaytype.StateSucceeded, m.State, m.LastError)
	require.Equal(t, "CA601", b.flights(t, "L1")["L1"].FLNO, "processed like any message")
	require.Eventually(t, func() bool {
		var flag *string
		require.NoError(t, b.mailbox.QueryRowContext(b.ctx, "SELECT PROCFLAG FROM CMINMSGS WHERE ID = ?", lateID).Scan(&flag))
		return flag != nil && *flag == "SUCCEEDED"
	}, time.Minute, 20*time.Millisecond, "its mark is written back")

	require.Equal(t, 1.0, lateMetric(t, reg), "counted once")
	require.Equal(t, 1, logs.count("late row found"), "logged once")
}

// lateMetric reads relay_intake_late_rows_total (0 when not yet exported).
func lateMetric(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "relay_intake_late_rows_total" {
			continue
		}
		var v float64
		for _, m := range f.GetMetric() {
			v += m.GetCounter().GetValue()
		}
		return v
	}
	return 0
}

// adminCall sends one admin API request that must answer 200 and decodes
// the answer into out.
func adminCall(t *testing.T, srv *httptest.Server, method, path, body string, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s", method, path)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
}

// count returns how many records were logged whose message contains s.
func (r *logRecorder) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if strings.Contains(rec.Message, s) {
			n++
		}
	}
	return n
}
