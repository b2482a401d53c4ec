package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayhttp"
)

// maxBody bounds one webhook body.
const maxBody = 64 << 10

// EnqueueAnswer is the body of a 202 (stored) or 200 (duplicate) answer to
// POST /events.
type EnqueueAnswer struct {
	// MessageID is the engine message holding the event: the new one, or for
	// a duplicate the one that first stored its event id.
	MessageID int64 `json:"message_id"`
	// Duplicate is true when the event id was already stored; nothing new was
	// stored.
	Duplicate bool `json:"duplicate"`
}

// newHandler serves the app's HTTP API:
//
//	POST /events        a webhook (application/json); 202 stored, 200 duplicate,
//	                    400 invalid, 413 above 64 KiB, 415 not JSON, 503 store
//	                    unavailable
//	GET  /orders/{id}   the order's current state; 404 when unknown
//	GET  /stats         the engine's and the dispatcher's progress
//
// An event is stored durably before the answer; a sender that got no answer
// sends the same event again and learns that it is a duplicate. It runs on a
// relayhttp listener (Host and cross-origin checks, timeouts, a connection
// limit).
func newHandler(app *App) http.Handler {
	mux := http.NewServeMux()
	events := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			relayhttp.WriteError(w, http.StatusRequestEntityTooLarge, "body larger than 64 KiB")
			return
		}
		ev, err := ParseEvent(body)
		if err != nil {
			relayhttp.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		res, err := app.Engine.Enqueue(r.Context(), &relay.EnqueueParams{Key: ev.OrderID, Identity: ev.EventID, Payload: body})
		if err != nil {
			relayhttp.WriteError(w, http.StatusServiceUnavailable, "the event could not be stored; send it again")
			return
		}
		status := http.StatusAccepted
		if res[0].Duplicate {
			status = http.StatusOK
		}
		writeJSON(w, status, EnqueueAnswer{MessageID: res[0].ID, Duplicate: res[0].Duplicate})
	}
	mux.Handle("POST /events", relayhttp.RequireContentType("application/json")(http.HandlerFunc(events)))
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		o := &Order{ID: r.PathValue("id")}
		err := app.store.Pool().QueryRow(r.Context(),
			`SELECT status, amount_cents, version, last_event_id FROM orders WHERE order_id = $1`, o.ID).
			Scan(&o.Status, &o.AmountCents, &o.Version, &o.LastEventID)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			relayhttp.WriteError(w, http.StatusNotFound, "no such order")
		case err != nil:
			relayhttp.WriteError(w, http.StatusServiceUnavailable, "store unavailable")
		default:
			writeJSON(w, http.StatusOK, o)
		}
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		es, err := app.Engine.Stats(r.Context())
		if err != nil {
			relayhttp.WriteError(w, http.StatusServiceUnavailable, "store unavailable")
			return
		}
		ds, err := app.Dispatcher.Stats(r.Context())
		if err != nil {
			relayhttp.WriteError(w, http.StatusServiceUnavailable, "store unavailable")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"messages": es, "events": ds})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
