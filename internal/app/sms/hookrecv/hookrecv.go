// Package hookrecv is a customers' webhook receiver for the send chain's
// demo, load runs and crash harness: it verifies every delivery's signature
// (relaywebhook.Receiver) and counts the deliveries by event id, so a run can
// check one logical notification per completed message.
package hookrecv

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaysink/relaywebhook"
)

// Receiver serves on a loopback port.
type Receiver struct {
	srv *relayhttp.Server

	mu   sync.Mutex
	byID map[string]int
	bad  int
}

// Start serves a receiver for deliveries signed with secret on a free
// loopback port.
func Start(secret []byte, log *slog.Logger) (*Receiver, error) {
	rv, err := relaywebhook.NewReceiver(relaywebhook.ReceiverConfig{Secret: secret, MaxRemembered: 1 << 20})
	if err != nil {
		return nil, err
	}
	r := &Receiver{byID: map[string]int{}}
	r.srv, err = relayhttp.Listen(relayhttp.Config{Name: "webhook receiver", Addr: "127.0.0.1:0", Logger: log,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			ev, err := rv.Verify(req)
			r.mu.Lock()
			defer r.mu.Unlock()
			switch {
			case errors.Is(err, relaywebhook.ErrReplayed):
				// The same event with the same signed timestamp again: a
				// resend of one already counted.
				w.WriteHeader(http.StatusNoContent)
			case err != nil:
				r.bad++
				http.Error(w, "bad signature", http.StatusUnauthorized)
			default:
				r.byID[ev.ID]++
				w.WriteHeader(http.StatusNoContent)
			}
		})})
	if err != nil {
		return nil, err
	}
	go func() { _ = r.srv.Serve() }()
	return r, nil
}

// URL is the base URL to give the webhook sink (an app's topic is
// appended to it).
func (r *Receiver) URL() string { return r.srv.URL() + "/hooks" }

// Counts returns the distinct event ids delivered, the deliveries and the
// requests refused for their signature.
func (r *Receiver) Counts() (distinct, total, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.byID {
		total += n
	}
	return len(r.byID), total, r.bad
}

// Close stops serving.
func (r *Receiver) Close() { _ = r.srv.Shutdown(context.Background()) }
