package msgx_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relaytype"
)

// post sends body to the handler and decodes the JSON answer.
func post(t *testing.T, srv *httptest.Server, method string, body []byte) (int, http.Header, msgx.SendResult) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+"/cminmsgs/send", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/xml")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var res msgx.SendResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
	return resp.StatusCode, resp.Header, res
}

// TestSendHandler checks POST /cminmsgs/send (seed 000 §4.4): before cutover
// seeding the message is only written to CMINMSGS (intake registers it once
// seeded); afterwards it is written and registered in the store at once,
// above the watermark, and the pump does not take it while a smaller mailbox
// id is still an uncommitted hole, then processes both in id order once the
// hole commits; a client's resend is a SKIPPED duplicate; bad requests are
// refused and write nothing; a body of exactly 1 MiB is accepted.
func TestSendHandler(t *testing.T) {
	b := setup(t)
	b.cfg.CutoverWatermark = "zero"
	b.cfg.MaxCommitDelay = 5 * time.Minute // the hole below must not age out during the test
	logs := &logRecorder{}
	svc := b.newService(t, slog.New(logs))
	srv := httptest.NewServer(svc.SendHandler())
	t.Cleanup(srv.Close)
	dttm := sisWall(b.cfg, time.Now())
	sodt := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

	// Before cutover seeding: 202 and in the mailbox verbatim, but not
	// registered — a registered message would make the seeding refuse and
	// leave the pipeline without a watermark (seed 000 §4.3).
	first := encode(t, schd("DNLD", "4001", dttm, "", plan("H1", "AA100", sodt)))
	code, _, res := post(t, srv, http.MethodPost, first)
	require.Equal(t, http.StatusAccepted, code, res.Error)
	require.Positive(t, res.ID)
	require.False(t, res.Enqueued)
	require.Contains(t, res.Error, "not seeded")
	firstID := res.ID
	var content string
	require.NoError(t, b.mailbox.QueryRowContext(b.ctx, "SELECT MSGCONTENT FROM CMINMSGS WHERE ID = ?", firstID).Scan(&content))
	require.Equal(t, string(first), content)
	_, err := b.store.GetExecutor().MessageGet(b.ctx, b.cfg.Pipeline, firstID)
	require.ErrorIs(t, err, relaytype.ErrNotFound)

	// The instance starts, seeds "zero", and intake registers the row.
	b.run(t, svc)
	require.Equal(t, relaytype.StateSucceeded, b.terminal(t, firstID).State)

	// A smaller id held open by a writer that has not committed: a hole. The
	// next send is registered at once, above the watermark.
	tx, err := b.mailbox.BeginTx(b.ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	ins, err := tx.ExecContext(b.ctx, "INSERT INTO CMINMSGS (MSGCONTENT, RECEIVETIME) VALUES (?, ?)",
		string(encode(t, flopBase("4002", dttm, "H1", "BB200"))), time.Now().UTC())
	require.NoError(t, err)
	holeID, err := ins.LastInsertId()
	require.NoError(t, err)

	sent := encode(t, flopBase("4003", dttm, "H1", "CC300"))
	code, _, res = post(t, srv, http.MethodPost, sent)
	require.Equal(t, http.StatusAccepted, code, res.Error)
	require.True(t, res.Enqueued)
	require.Empty(t, res.Error)
	sentID := res.ID
	require.Greater(t, sentID, holeID)
	require.NoError(t, b.mailbox.QueryRowContext(b.ctx, "SELECT MSGCONTENT FROM CMINMSGS WHERE ID = ?", sentID).Scan(&content))
	require.Equal(t, string(sent), content)
	m := b.message(t, sentID)
	require.Equal(t, relaytype.StatePending, m.State, "registered directly by the entry")
	cur, err := b.store.GetExecutor().CursorGet(b.ctx, b.cfg.Pipeline)
	require.NoError(t, err)
	require.Less(t, cur.Watermark, sentID, "registered above the watermark")

	// Wait until intake has seen the hole and the pump has refused the head
	// above the watermark (seed 000 §5.1 step 2, logged once per watermark).
	require.Eventually(t, func() bool {
		cur, err := b.store.GetExecutor().CursorGet(b.ctx, b.cfg.Pipeline)
		require.NoError(t, err)
		return !cur.HoleSince.IsZero() && cur.Watermark == holeID-1 &&
			logs.seen("relay: FIFO head above the watermark not taken", "head_id", sentID)
	}, time.Minute, 10*time.Millisecond, "intake must see the hole at %d and the pump refuse head %d", holeID, sentID)
	require.Equal(t, relaytype.StatePending, b.message(t, sentID).State, "not processed before the watermark catches up")
	require.Equal(t, "AA100", b.flights(t, "H1")["H1"].FLNO)

	// The hole commits: both are processed, in mailbox id order.
	require.NoError(t, tx.Commit())
	require.Equal(t, relaytype.StateSucceeded, b.terminal(t, holeID).State)
	require.Equal(t, relaytype.StateSucceeded, b.terminal(t, sentID).State)
	h := b.flights(t, "H1")["H1"]
	require.Equal(t, "CC300", h.FLNO, "the smaller id was applied first")
	require.Equal(t, sentID, h.LastMsgID)
	require.Equal(t, int64(3), h.Version)

	// A client resend after a lost answer writes the mailbox again; the
	// business identity makes it a duplicate.
	code, _, res = post(t, srv, http.MethodPost, first)
	require.Equal(t, http.StatusAccepted, code)
	m = b.terminal(t, res.ID)
	require.Equal(t, relaytype.StateSkipped, m.State)
	require.Equal(t, "duplicate-of:"+strconv.FormatInt(firstID, 10), m.LastError)

	// Refusals write nothing.
	rows := b.mailboxCount(t, "CMINMSGS")
	code, _, res = post(t, srv, http.MethodPost, nil)
	require.Equal(t, http.StatusBadRequest, code)
	require.NotEmpty(t, res.Error)
	require.False(t, res.Enqueued)
	code, hdr, res := post(t, srv, http.MethodGet, nil)
	require.Equal(t, http.StatusMethodNotAllowed, code)
	require.Equal(t, http.MethodPost, hdr.Get("Allow"))
	require.NotEmpty(t, res.Error)
	code, _, res = post(t, srv, http.MethodPost, bytes.Repeat([]byte("x"), sisxml.MaxSize+1))
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.NotEmpty(t, res.Error)
	require.Equal(t, rows, b.mailboxCount(t, "CMINMSGS"))

	// Exactly MaxSize is not too large: it is written, and decoding judges it.
	code, _, res = post(t, srv, http.MethodPost, bytes.Repeat([]byte("x"), sisxml.MaxSize))
	require.Equal(t, http.StatusAccepted, code, res.Error)
	m = b.terminal(t, res.ID)
	require.Equal(t, relaytype.StateDead, m.State)
	require.Equal(t, relaytype.ClassMalformed, m.ErrorClass)
}

// TestSendHandlerPermanentRefusals checks that a message the mailbox can
// never hold is a 400 with the reason, not a 503 inviting a retry: a body
// that is not UTF-8, and the MySQL refusals 1366 (a character the column
// cannot store) and 1406 (too long) of a real MariaDB; that a passing
// failure is a 503 whose text has an error id but none of the database's
// words; and that only XML bodies are taken. Nothing is written by any.
func TestSendHandlerPermanentRefusals(t *testing.T) {
	b := setup(t)
	svc := b.newService(t, quiet())
	srv := httptest.NewServer(svc.SendHandler())
	t.Cleanup(srv.Close)
	rows := b.mailboxCount(t, "CMINMSGS")
	exec := func(stmt string) {
		t.Helper()
		_, err := b.mailbox.ExecContext(b.ctx, stmt)
		require.NoError(t, err)
	}

	code, _, res := post(t, srv, http.MethodPost, []byte("<SIS>caf\xe9 \xff</SIS>")) // Latin-1, not UTF-8
	require.Equal(t, http.StatusBadRequest, code, res.Error)
	require.Contains(t, res.Error, "not valid UTF-8")
	require.Contains(t, res.Error, "offset 8")

	// A column in a 3-byte character set cannot hold U+1F600.
	exec("ALTER TABLE CMINMSGS MODIFY MSGCONTENT MEDIUMTEXT CHARACTER SET utf8mb3 NULL")
	code, _, res = post(t, srv, http.MethodPost, []byte("<SIS>\U0001F600</SIS>"))
	require.Equal(t, http.StatusBadRequest, code, res.Error)
	require.Contains(t, res.Error, "1366")
	require.NotContains(t, res.Error, "MSGCONTENT", "no column names")

	// TEXT holds 65,535 bytes (strict mode: an error, not a truncation).
	exec("ALTER TABLE CMINMSGS MODIFY MSGCONTENT TEXT CHARACTER SET utf8mb4 NULL")
	code, _, res = post(t, srv, http.MethodPost, bytes.Repeat([]byte("x"), 70_000))
	require.Equal(t, http.StatusBadRequest, code, res.Error)
	require.Contains(t, res.Error, "1406")
	require.Equal(t, rows, b.mailboxCount(t, "CMINMSGS"), "nothing written")

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/cminmsgs/send", strings.NewReader("<SIS/>"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)

	// A missing table is a failure to retry later, told without its name.
	exec("RENAME TABLE CMINMSGS TO CMINMSGS_AWAY")
	code, _, res = post(t, srv, http.MethodPost, []byte("<SIS/>"))
	require.Equal(t, http.StatusServiceUnavailable, code, res.Error)
	require.Contains(t, res.Error, "retry")
	require.Contains(t, res.Error, "error id")
	for _, secret := range []string{"CMINMSGS", "1146", "relay_t_", "exist"} {
		require.NotContains(t, res.Error, secret)
	}
}
