package chaincrash

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/relayhq/relay/relaysink/relaywebhook"
)

// webhooks is the customers' callback receiver: it verifies every
// delivery's signature and counts the deliveries by event id.
type webhooks struct {
	args webhookArgs
	srv  *http.Server

	mu   sync.Mutex
	byID map[string]int
	bad  int
}

// startWebhooks writes a signing secret to a file in dir and serves a
// receiver on loopback.
func startWebhooks(dir string) (*webhooks, error) {
	secret := fmt.Sprintf("chaos-hook-%016x", rand.Uint64())
	path := filepath.Join(dir, "webhook.secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("chaincrash: %w", err)
	}
	rv, err := relaywebhook.NewReceiver(relaywebhook.ReceiverConfig{Secret: []byte(secret), MaxRemembered: 1 << 20})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &webhooks{byID: map[string]int{}}
	h.args = webhookArgs{url: "http://" + ln.Addr().String() + "/hooks", secretFile: path}
	h.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := rv.Verify(r)
		h.mu.Lock()
		defer h.mu.Unlock()
		if errors.Is(err, relaywebhook.ErrReplayed) {
			// The same event with the same signed timestamp again: a
			// resend of one already counted.
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if err != nil {
			h.bad++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		h.byID[ev.ID]++
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

// counts returns the messages notified, the deliveries and the refused.
func (h *webhooks) counts() (distinct, total, bad int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.byID {
		total += n
	}
	return len(h.byID), total, h.bad
}

func (h *webhooks) close() { _ = h.srv.Close() }
