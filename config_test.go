package relay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

func okHandler() relay.Handler {
	return relay.HandlerFunc(func(context.Context, relay.Tx, *relay.Delivery) relay.Result { return relay.Succeeded() })
}

// New validates without I/O, so a nil-safe stand-in driver is enough here.
type nopDriver struct{ relaydriver.Driver }

// TestConfigValidation: start-up validation names the bad field; a backoff
// schedule with more levels than MaxAttempts-1 is rejected (seed 000 §9.1: a
// level that can never fire must not pass); a shorter one is accepted (its
// last level repeats).
func TestConfigValidation(t *testing.T) {
	t.Parallel()
	base := func() relay.Config { return relay.Config{Queue: "p", Handler: okHandler()} }
	cases := []struct {
		name  string
		mut   func(*relay.Config)
		field string // "" = valid
	}{
		{"defaults", func(*relay.Config) {}, ""},
		{"default backoff follows MaxAttempts", func(c *relay.Config) { c.MaxAttempts = 8 }, ""},
		{"exact levels", func(c *relay.Config) {
			c.MaxAttempts = 3
			c.Backoff = []time.Duration{time.Second, time.Minute}
		}, ""},
		{"one attempt, no levels", func(c *relay.Config) { c.MaxAttempts = 1; c.Backoff = []time.Duration{} }, ""},
		{"empty schedule takes the default", func(c *relay.Config) { c.MaxAttempts = 5; c.Backoff = []time.Duration{} }, ""},
		{"a level that never fires", func(c *relay.Config) {
			c.MaxAttempts = 3
			c.Backoff = []time.Duration{time.Second, time.Minute, time.Hour}
		}, "Backoff"},
		{"one attempt, one level", func(c *relay.Config) {
			c.MaxAttempts = 1
			c.Backoff = []time.Duration{time.Second}
		}, "Backoff"},
		{"a shorter schedule repeats its last level", func(c *relay.Config) {
			c.MaxAttempts = 5
			c.Backoff = []time.Duration{time.Second}
		}, ""},
		{"default MaxAttempts with a short schedule", func(c *relay.Config) {
			c.Backoff = []time.Duration{time.Second, time.Second}
		}, ""},
		{"negative level in a short schedule", func(c *relay.Config) {
			c.MaxAttempts = 5
			c.Backoff = []time.Duration{time.Second, -time.Second}
		}, "Backoff"},
		{"negative level", func(c *relay.Config) {
			c.MaxAttempts = 2
			c.Backoff = []time.Duration{-time.Second}
		}, "Backoff"},
		{"no queue", func(c *relay.Config) { c.Queue = "" }, "Queue"},
		{"no handler: a producer-only engine", func(c *relay.Config) { c.Handler = nil }, ""},
		{"negative attempts", func(c *relay.Config) { c.MaxAttempts = -1 }, "MaxAttempts"},
		{"bad mode", func(c *relay.Config) { c.Mode = 9 }, "Mode"},
		{"negative wake delay", func(c *relay.Config) { c.WakeDelay = -time.Millisecond }, "WakeDelay"},
		{"wake delay not shorter than the poll interval", func(c *relay.Config) { c.WakeDelay = time.Second }, "WakeDelay"},
		{"wake delay ok", func(c *relay.Config) { c.WakeDelay = 20 * time.Millisecond }, ""},
		{"ignore rule without subtype", func(c *relay.Config) { c.IgnoreRules = []string{"LDM"} }, "IgnoreRules"},
		{"ignore rule partial wildcard", func(c *relay.Config) { c.IgnoreRules = []string{"LDM-A*"} }, "IgnoreRules"},
		{"ignore rules ok", func(c *relay.Config) { c.IgnoreRules = []string{"LDM-*", "flop-abcd"} }, ""},
		{"unknown replay class", func(c *relay.Config) {
			c.ReplayableClasses = []relaytype.ErrorClass{"NOPE"}
		}, "ReplayableClasses"},
		{"exhausted as dead class", func(c *relay.Config) {
			c.DeadClasses = []relaytype.ErrorClass{relaytype.ClassExhausted}
		}, "DeadClasses"},
		{"lease shorter than handler timeout (renewed while the handler runs)", func(c *relay.Config) {
			c.Mode = relay.ModeUnordered
			c.LeaseDuration = time.Second
			c.HandlerTimeout = time.Minute
		}, ""},
		{"no lease", func(c *relay.Config) { c.Mode = relay.ModeUnordered; c.LeaseDuration = -time.Second }, "LeaseDuration"},
		{"claim mode defaults", func(c *relay.Config) { c.Mode = relay.ModePerKey }, ""},
		{"watermark outside FIFO", func(c *relay.Config) { c.Mode = relay.ModePerKey; c.Watermarked = true }, "Watermarked"},
		{"FIFO batch above the savepoint cap", func(c *relay.Config) { c.FIFOBatch = relay.FIFOBatchMax + 1 }, "FIFOBatch"},
		{"FIFO batch outside FIFO", func(c *relay.Config) { c.Mode = relay.ModeUnordered; c.FIFOBatch = 4 }, "FIFOBatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.mut(&cfg)
			e, err := relay.NewEngine(nopDriver{}, cfg)
			if tc.field == "" {
				require.NoError(t, err)
				require.NotNil(t, e)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), "Config."+tc.field)
		})
	}
}

// The refusal of a too-long schedule says what is allowed, on Config and
// DispatcherConfig alike.
func TestBackoffTooLongMessage(t *testing.T) {
	t.Parallel()
	_, err := relay.NewEngine(nopDriver{}, relay.Config{Queue: "p", Handler: okHandler(), MaxAttempts: 2,
		Backoff: []time.Duration{time.Second, time.Minute}})
	require.ErrorContains(t, err, "relay: invalid Config.Backoff: 2 levels for MaxAttempts 2: at most MaxAttempts-1 = 1")
	_, err = relay.NewDispatcher(nopDriver{}, &recSink{}, relay.DispatcherConfig{Target: "t", MaxAttempts: 2,
		Backoff: []time.Duration{time.Second, time.Minute}})
	require.ErrorContains(t, err, "relay: invalid DispatcherConfig.Backoff: 2 levels for MaxAttempts 2: at most MaxAttempts-1 = 1")
	require.ErrorContains(t, err, "a shorter schedule repeats its last level")
}

// A schedule shorter than MaxAttempts-1 repeats its last level: with
// MaxAttempts 4 and [1s, 1m] a failing message waits 1s, 1m, 1m, and the
// fourth failure exhausts it.
func TestShortBackoffRepeatsLastLevel(t *testing.T) {
	t.Parallel()
	b := setupOn(t, openSQLite(t, true), relay.Config{MaxAttempts: 4, Backoff: []time.Duration{time.Second, time.Minute},
		Handler: relay.HandlerFunc(func(context.Context, relay.Tx, *relay.Delivery) relay.Result {
			return relay.Retry(relaytype.ClassInfra, errors.New("down"))
		})})
	b.enqueue(1)
	for i, wait := range []time.Duration{time.Second, time.Minute, time.Minute} {
		b.work()
		m := b.get(1)
		require.Equal(t, relaytype.StateFailed, m.State, "failure %d", i+1)
		require.Equal(t, i+1, m.Attempts)
		require.True(t, b.clock.Now().Add(wait).Equal(m.NextAttemptAt), "failure %d waits %s, got %s", i+1, wait, m.NextAttemptAt.Sub(b.clock.Now()))
		b.clock.Advance(wait)
	}
	b.work()
	require.Equal(t, relaytype.StateDead, b.state(1), "the fourth failure exhausts it")
}

func TestDoublingBackoffAndParseMode(t *testing.T) {
	t.Parallel()
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second},
		relay.DoublingBackoff(time.Second, 4))
	require.Empty(t, relay.DoublingBackoff(time.Second, 0))
	for _, m := range []relay.Mode{relay.ModeFIFO, relay.ModePerKey, relay.ModeUnordered} {
		got, err := relay.ParseMode(m.String())
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	_, err := relay.ParseMode("lifo")
	require.Error(t, err)
}

func TestClassify(t *testing.T) {
	t.Parallel()
	require.NoError(t, relay.Classify(relaytype.ClassMalformed, nil))
	err := relay.Classify(relaytype.ClassMalformed, context.Canceled)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, relaytype.ClassMalformed, relay.ClassOf(err, relaytype.ClassCodec))
	require.Equal(t, relaytype.ClassCodec, relay.ClassOf(context.Canceled, relaytype.ClassCodec))
}
