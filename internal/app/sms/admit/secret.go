package admit

import (
	"context"
	"sync"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// SecretTTLDefault is APIConfig.SecretTTL's default.
const SecretTTLDefault = 5 * time.Second

// secretCacheMax bounds the keys remembered; past it the cache starts
// over (only keys of active apps are ever kept, so it is rarely reached).
const secretCacheMax = 10000

// secretCache remembers the app id and HMAC secret of API keys found
// active, for ttl, so a busy app's requests do not each read them. A key
// not found is never remembered: a wrong key costs a read every time, and
// an app made active is usable at once.
type secretCache struct {
	ttl   time.Duration
	clock relaytype.Clock
	load  func(ctx context.Context, key string) (int64, []byte, error)

	mu   sync.Mutex
	keys map[string]cachedSecret
}

type cachedSecret struct {
	app    int64
	secret []byte
	until  time.Time
}

func (c *secretCache) get(ctx context.Context, key string) (int64, []byte, error) {
	if c.ttl < 0 {
		return c.load(ctx, key)
	}
	now := c.clock.Now()
	c.mu.Lock()
	e, ok := c.keys[key]
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.app, e.secret, nil
	}
	app, secret, err := c.load(ctx, key)
	if err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	if c.keys == nil || len(c.keys) >= secretCacheMax {
		c.keys = map[string]cachedSecret{}
	}
	c.keys[key] = cachedSecret{app: app, secret: secret, until: now.Add(c.ttl)}
	c.mu.Unlock()
	return app, secret, nil
}
