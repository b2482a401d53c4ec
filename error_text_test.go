package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaytype"
)

// TestErrorTextBounded: a decoder error, a handler error, a skip reason and a
// panic value of 2 MiB each (as a decoder quoting its input would make them)
// reach neither the store nor the logs in full: each is at most
// relaytype.MaxErrorText bytes in the row and in every log attribute.
func TestErrorTextBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("payload ", 2<<20/8)
	eachStore(t, func(t *testing.T, s store) {
		b := setup(t, s, relay.Config{
			Mode: relay.ModeUnordered, Workers: 1,
			Handler: decoding{
				decode: func(m *relaytype.Message) (*relay.Decoded, error) {
					if m.ID == 1 {
						return nil, relay.Classify(relaytype.ClassMalformed, errors.New(long))
					}
					return nil, nil
				},
				handle: func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
					switch d.Message.ID {
					case 2:
						return relay.Retry(relaytype.ClassInfra, fmt.Errorf("sink said: %s", long))
					case 3:
						return relay.Skip(long)
					case 4:
						return relay.Dead(relaytype.ClassProtocol, errors.New(long))
					}
					panic(long)
				},
			},
		})
		b.enqueue(1, 2, 3, 4, 5)
		require.Equal(t, 5, b.work())
		for id := int64(1); id <= 5; id++ {
			m := b.get(id)
			require.Contains(t, m.LastError, "payload payload", "id %d", id)
			require.LessOrEqual(t, len(m.LastError), relaytype.MaxErrorText, "id %d: stored error text", id)
		}
		logged := 0
		for _, r := range b.logs.all() {
			for k, v := range r.attrs {
				if k == "stack" {
					continue // the goroutine's stack, not input
				}
				text := fmt.Sprint(v)
				require.LessOrEqual(t, len(text), relaytype.MaxErrorText, "log %q attribute %q", r.msg, k)
				if strings.Contains(text, "payload payload") {
					logged++
				}
			}
		}
		require.GreaterOrEqual(t, logged, 5, "every failure is logged, bounded")
	})
}
