package chaincrash

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/relayhq/relay/internal/app/sms/hookrecv"
)

// webhooks is the customers' callback receiver (hookrecv) and what the
// publisher role is told about it.
type webhooks struct {
	*hookrecv.Receiver
	args webhookArgs
}

// startWebhooks writes a signing secret to a file in dir and serves a
// receiver on loopback.
func startWebhooks(dir string) (*webhooks, error) {
	secret := fmt.Sprintf("chaos-hook-%016x", rand.Uint64())
	path := filepath.Join(dir, "webhook.secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("chaincrash: %w", err)
	}
	r, err := hookrecv.Start([]byte(secret), nil)
	if err != nil {
		return nil, err
	}
	return &webhooks{Receiver: r, args: webhookArgs{url: r.URL(), secretFile: path}}, nil
}

func (h *webhooks) counts() (distinct, total, bad int) { return h.Counts() }

func (h *webhooks) close() { h.Close() }
