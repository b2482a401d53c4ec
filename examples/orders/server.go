package main

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay"
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

// newServer serves the app's HTTP API:
//
//	POST /events        a webhook (application/json); 202 stored, 200 duplicate,
//	                    400 invalid, 415 not JSON, 503 store unavailable
//	GET  /orders/{id}   the order's current state; 404 when unknown
//	GET  /stats         the engine's and the dispatcher's progress
//
// An event is stored durably before the answer; a sender that got no answer
// sends the same event again and learns that it is a duplicate.
func newServer(app *App) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /events", func(w http.ResponseWriter, r *http.Request) {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, "body larger than 64 KiB")
			return
		}
		ev, err := ParseEvent(body)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		res, err := app.Engine.Enqueue(r.Context(), &relay.EnqueueParams{Key: ev.OrderID, Identity: ev.EventID, Payload: body})
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "the event could not be stored; send it again")
			return
		}
		status := http.StatusAccepted
		if res[0].Duplicate {
			status = http.StatusOK
		}
		writeJSON(w, status, EnqueueAnswer{MessageID: res[0].ID, Duplicate: res[0].Duplicate})
	})
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		o := &Order{ID: r.PathValue("id")}
		err := app.store.Pool().QueryRow(r.Context(),
			`SELECT status, amount_cents, version, last_event_id FROM orders WHERE order_id = $1`, o.ID).
			Scan(&o.Status, &o.AmountCents, &o.Version, &o.LastEventID)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			writeError(w, http.StatusNotFound, "no such order")
		case err != nil:
			writeError(w, http.StatusServiceUnavailable, "store unavailable")
		default:
			writeJSON(w, http.StatusOK, o)
		}
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		es, err := app.Engine.Stats(r.Context())
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "store unavailable")
			return
		}
		ds, err := app.Dispatcher.Stats(r.Context())
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "store unavailable")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"messages": es, "events": ds})
	})
	return &http.Server{
		Handler:           loopbackHost(http.NewCrossOriginProtection().Handler(mux)),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
}

// loopbackHost refuses requests whose Host is not a loopback name: a page
// that rebinds its own DNS name to 127.0.0.1 cannot reach the API.
func loopbackHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !isLoopback(host) {
			writeError(w, http.StatusMisdirectedRequest, "Host must be a loopback address")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopback reports whether host is "localhost" or a loopback IP address.
func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
