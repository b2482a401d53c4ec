package msgx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaytype"
)

// SendResult is the JSON answer of POST /cminmsgs/send.
type SendResult struct {
	// ID is the CMINMSGS id the message was written under.
	ID int64 `json:"id"`
	// Enqueued reports whether the store registration succeeded too. When false
	// the message is still durable in the mailbox and intake registers it
	// (seed 000 §4.4); the client must not resend.
	Enqueued bool `json:"enqueued"`
	// Error describes a failure (status ≥ 400), or why Enqueued is false.
	Error string `json:"error,omitempty"`
}

// SendHandler is the compatibility entry POST /cminmsgs/send (seed 000
// §4.4): the body is one raw SIS XML message. It is written to the shared
// mailbox first, then registered in the store directly. The two steps are not
// one transaction: if the registration fails the row is still in the mailbox
// and intake picks it up. A registered row lies above the watermark, so the
// pump takes it only once intake has caught up with every smaller id — order
// is kept, at the cost of that delay (intake must be running). A client that
// retries after a failure may write the message twice; the business identity
// makes the second a SKIPPED duplicate.
//
// Before the pipeline's watermark is seeded (seed 000 §4.3) the row is only
// written to the mailbox (enqueued false): a registered message would make
// the seeding refuse, and intake registers the row once seeded — unless the
// cutover mode skips it as existing stock, as it does every row written
// before the cutover (max, or a mailbox id at or above the row's).
//
// Answers: 202 with {"id", "enqueued"} once the mailbox write committed; 400
// when the message can never be written, whatever the retries — an empty
// body, a body that is not UTF-8 (the only encoding SIS messages and the
// mailbox column take), or one the mailbox column refuses (MySQL 1366: a
// character it cannot store; 1406: too long), each with its reason; 413
// above sisxml.MaxSize; 405 for anything but POST; 415 for a Content-Type
// other than application/xml or text/xml; 503 when the mailbox write failed
// for a passing reason (nothing was written; retry). Error texts never carry
// the database's words: a 503 names an error id the log line shares. Serve it
// on a relayhttp listener (Host, origin and token checks, timeouts).
func (s *Service) SendHandler() http.Handler {
	return relayhttp.RequireContentType("application/xml", "text/xml")(http.HandlerFunc(s.send))
}

// send serves one POST /cminmsgs/send (see SendHandler).
func (s *Service) send(w http.ResponseWriter, r *http.Request) {
	reply := func(code int, res SendResult) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(res)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(http.StatusMethodNotAllowed, SendResult{Error: "use POST with the raw SIS XML message as the body"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, sisxml.MaxSize))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		reply(http.StatusRequestEntityTooLarge, SendResult{Error: "message larger than 1 MiB"})
		return
	case err != nil:
		reply(http.StatusBadRequest, SendResult{Error: "read body: " + err.Error()})
		return
	case len(body) == 0:
		reply(http.StatusBadRequest, SendResult{Error: "empty body: want one raw SIS XML message"})
		return
	case !utf8.Valid(body):
		reply(http.StatusBadRequest, SendResult{Error: fmt.Sprintf(
			"body is not valid UTF-8 (first bad byte at offset %d): SIS messages and the mailbox are UTF-8",
			firstInvalidUTF8(body))})
		return
	}
	ctx := r.Context()
	now := s.o.Clock.Now()
	res, err := s.o.Mailbox.ExecContext(ctx, mailboxQueries["InboxInsert"], string(body), now.UTC())
	var id int64
	if err == nil {
		id, err = res.LastInsertId()
	}
	if reason, permanent := mailboxRefusal(err); permanent {
		s.o.Logger.InfoContext(ctx, "msgx: /cminmsgs/send: mailbox refused the message", "reason", reason,
			"bytes", len(body))
		reply(http.StatusBadRequest, SendResult{Error: reason})
		return
	}
	if err != nil {
		msg := relayhttp.InternalError(ctx, s.o.Logger, "msgx: /cminmsgs/send: mailbox write failed", err)
		reply(http.StatusServiceUnavailable, SendResult{Error: "mailbox write failed; nothing was written, retry: " + msg})
		return
	}
	// seed 000 §4.3: a pipeline that already holds messages is never seeded,
	// so registering one before cutover seeding would leave the pipeline
	// without a watermark for good. Until it is seeded, leave the row to
	// intake (the §4.4 path of a failed registration).
	if _, err := s.o.Store.GetExecutor().CursorGet(ctx, s.cfg.Pipeline); err != nil {
		why := "registered by intake later: "
		if errors.Is(err, relaytype.ErrNotFound) {
			why += "the watermark is not seeded yet"
		} else {
			s.o.Logger.WarnContext(ctx, "msgx: /cminmsgs/send: watermark read failed; intake will register the row",
				"id", id, "error", relaytype.ErrorText(err))
			why += "the watermark could not be read"
		}
		reply(http.StatusAccepted, SendResult{ID: id, Error: why})
		return
	}
	if _, err := s.engine.Enqueue(ctx, &relay.EnqueueParams{ID: id, Payload: body, ReceivedAt: now}); err != nil {
		s.o.Logger.WarnContext(ctx, "msgx: /cminmsgs/send: registration failed; intake will register the row",
			"id", id, "error", relaytype.ErrorText(err))
		reply(http.StatusAccepted, SendResult{ID: id, Error: "registered by intake later: the store registration failed"})
		return
	}
	reply(http.StatusAccepted, SendResult{ID: id, Enqueued: true})
}

// MySQL error numbers the mailbox insert maps to 400: the message can never
// be stored, so a retry would fail alike.
const (
	// mysqlIncorrectString is ER_TRUNCATED_WRONG_VALUE_FOR_FIELD ("Incorrect
	// string value"): a character the column's character set cannot hold.
	mysqlIncorrectString = 1366
	// mysqlDataTooLong is ER_DATA_TOO_LONG: longer than the column.
	mysqlDataTooLong = 1406
)

// mailboxRefusal reports whether err is the mailbox refusing this message
// for good, and why in words fit for the client (no table or column names).
func mailboxRefusal(err error) (reason string, permanent bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return "", false
	}
	switch me.Number {
	case mysqlIncorrectString:
		return "the message holds a character the mailbox column cannot store (MySQL error 1366)", true
	case mysqlDataTooLong:
		return "the message is longer than the mailbox column allows (MySQL error 1406)", true
	}
	return "", false
}

// firstInvalidUTF8 returns the offset of the first byte of b that does not
// start a valid UTF-8 sequence (len(b) when there is none).
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}
