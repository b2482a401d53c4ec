package msgx_test

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/flight"
)

// paramTable is `relay msgx params` (msgx.WriteParams) for c: keys in
// order and each key's value as printed (`""` for an empty value).
func paramTable(t *testing.T, c *msgx.Config) (keys []string, vals map[string]string, text string) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, msgx.WriteParams(&buf, c))
	vals = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		require.GreaterOrEqual(t, len(f), 3, "key, value, meaning: %q", sc.Text())
		require.NotContains(t, vals, f[0], "key %s printed twice", f[0])
		keys = append(keys, f[0])
		vals[f[0]] = f[1]
	}
	require.NoError(t, sc.Err())
	return keys, vals, buf.String()
}

// setAll sets every printed value into c; `""` is how the table prints an
// empty value.
func setAll(t *testing.T, c *msgx.Config, keys []string, vals map[string]string) {
	t.Helper()
	for _, k := range keys {
		v := vals[k]
		if v == `""` {
			v = ""
		}
		require.NoError(t, c.Set(k, v), k)
	}
}

// nonDefault differs from Defaults() in every setting.
func nonDefault(t *testing.T) msgx.Config {
	t.Helper()
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	c := msgx.Defaults()
	c.Pipeline = "msgx2"
	c.ClaimBatch = 77
	c.MaxCommitDelay = 45 * time.Second
	c.PollInterval = 250 * time.Millisecond
	c.CutoverWatermark = "min"
	c.FIFOBatch = 8
	c.LateCheckWindow, c.LateCheckInterval, c.LateCheckLimit = 0, 10*time.Second, 50
	c.StateCacheFlights = 0
	c.MaxAttempts = 3
	c.Backoff = []time.Duration{1500 * time.Millisecond, 3 * time.Second}
	c.HandlerTimeout = 12 * time.Second
	c.IncludeDayBoundary = true
	c.IgnoreRules = []string{"LDM-*", "FLOP-VIPF"}
	c.BackfillBatch = 50
	c.BackfillMaxAttempts = 4
	c.BackfillDeadline = 2 * time.Hour
	c.MsgTopic, c.SchdTopic = "airport.msg", "airport.schd"
	c.MsgBatch, c.SchdFlushLimit = 10, 20
	c.EventRetention = 12 * time.Hour
	c.Flight = flight.Settings{AbsentField: flight.AbsentClear, AirportZone: paris, MessageZone: time.UTC, DayCut: 4 * time.Hour}
	c.SystemCode, c.AODBCode = "RMS2", "AODB2"
	c.RequestTimeout, c.ClockSkew = 3*time.Minute, 5*time.Second
	c.ArchiveAfter, c.SnapLogRetention = 48*time.Hour, 240*time.Hour
	c.FlightKeepDays, c.FlightQuiet = 3, 6*time.Hour
	c.HistoryRetention, c.RequestRetention = 2000*time.Hour, 100*time.Hour
	c.LifecycleEvery = 30 * time.Second
	require.NoError(t, c.Validate())
	return c
}

// TestConfigParamsRoundTrip checks that every PARAM key `relay msgx params`
// prints can be set back through Config.Set to the value printed: a
// configuration that differs from the defaults in every key survives
// print → Set → print unchanged, and so do the defaults.
func TestConfigParamsRoundTrip(t *testing.T) {
	t.Parallel()
	def := msgx.Defaults()
	defKeys, defVals, defText := paramTable(t, &def)
	want := nonDefault(t)
	keys, vals, text := paramTable(t, &want)
	require.Equal(t, defKeys, keys)
	for _, k := range keys {
		require.NotEqual(t, defVals[k], vals[k], "the test configuration must change %s", k)
	}

	got := msgx.Defaults()
	setAll(t, &got, keys, vals)
	_, _, gotText := paramTable(t, &got)
	require.Equal(t, text, gotText)
	require.NoError(t, got.Validate())
	require.Equal(t, "Europe/Paris", got.Flight.AirportLocation().String())
	require.Equal(t, []time.Duration{1500 * time.Millisecond, 3 * time.Second}, got.Backoff)

	back := nonDefault(t)
	setAll(t, &back, defKeys, defVals)
	_, _, backText := paramTable(t, &back)
	require.Equal(t, defText, backText)
	require.NoError(t, back.Validate())
}

// TestConfigValidateNamesBadKey checks that Validate refuses bad values and
// names the PARAM key at fault.
func TestConfigValidateNamesBadKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ key, value, named string }{
		{"msgx.pipeline.name", "", ""},
		{"msgx.pipeline.claim-batch", "0", ""},
		{"msgx.pipeline.max-commit-delay", "0s", ""},
		{"msgx.pipeline.poll-interval", "0s", ""},
		{"msgx.pipeline.cutover-watermark", "zeor", ""},
		{"msgx.pipeline.cutover-watermark", "-1", ""},
		{"msgx.pipeline.cutover-watermark", `""`, ""},
		{"msgx.pipeline.fifo-batch", "0", ""},
		{"msgx.pipeline.fifo-batch", "1000000", ""},
		{"msgx.pipeline.state-cache-flights", "-1", ""},
		{"msgx.pipeline.max-attempts", "0", ""},
		{"msgx.pipeline.max-attempts", "3", "msgx.pipeline.backoff"}, // 4 levels for 3 attempts
		{"msgx.pipeline.backoff", "1s,2s,4s,8s,16s", ""},             // 5 levels for 5 attempts: the last never fires
		{"msgx.pipeline.backoff", "1s,-2s", ""},
		{"msgx.pipeline.backfill-batch", "0", ""},
		{"msgx.pipeline.backfill-deadline", "0s", ""},
		{"msgx.kafka.msg-topic", "msgx.schd", "msgx.kafka.msg-topic"},
		{"msgx.kafka.schd-topic", "", "schd-topic"},
		{"msgx.msg.batch", "0", ""},
		{"msgx.schd.flush-limit", "0", ""},
		{"msgx.request.system-code", "", ""},
		{"msgx.request.system-code", "R|S", ""},
		{"msgx.request.timeout", "0s", ""},
		{"msgx.lifecycle.flight-keep-days", "0", ""},
		{"msgx.lifecycle.every", "0s", ""},
		{"msgx.flight.absent-field", "drop", ""},
		{"msgx.flight.day-cut", "24h", ""},
	} {
		cfg := msgx.Defaults()
		require.NoError(t, cfg.Set(c.key, c.value), "%s=%s", c.key, c.value)
		err := cfg.Validate()
		require.Error(t, err, "%s=%q", c.key, c.value)
		named := c.named
		if named == "" {
			named = c.key
		}
		require.ErrorContains(t, err, named, "%s=%q", c.key, c.value)
	}
	// A shorter schedule is accepted: its last level repeats.
	for _, set := range [][2]string{{"msgx.pipeline.backoff", "1s,2s"}, {"msgx.pipeline.max-attempts", "10"}} {
		cfg := msgx.Defaults()
		require.NoError(t, cfg.Set(set[0], set[1]))
		require.NoError(t, cfg.Validate(), "%s=%s", set[0], set[1])
	}
	for _, mode := range []string{"", "min", "zero", "max", "0", "123456"} {
		cfg := msgx.Defaults()
		require.NoError(t, cfg.Set("msgx.pipeline.cutover-watermark", mode))
		require.NoError(t, cfg.Validate(), "cutover %q", mode)
	}
}

// TestConfigSetErrors checks that Set refuses an unknown key and values it
// cannot parse, naming the key, and leaves the setting as it was.
func TestConfigSetErrors(t *testing.T) {
	t.Parallel()
	cfg := nonDefault(t)
	err := cfg.Set("msgx.pipeline.claim_batch", "10")
	require.ErrorContains(t, err, `unknown setting "msgx.pipeline.claim_batch"`)
	for _, c := range []struct{ key, value string }{
		{"msgx.pipeline.claim-batch", "ten"},
		{"msgx.pipeline.max-commit-delay", "30"},
		{"msgx.pipeline.max-commit-delay", "-1s"},
		{"msgx.pipeline.backoff", "1s,soon"},
		{"msgx.identity.include-day-boundary", "maybe"},
		{"msgx.flight.airport-zone", "Mars/Olympus_Mons"},
		{"msgx.lifecycle.flight-keep-days", "7d"},
	} {
		err := cfg.Set(c.key, c.value)
		require.Error(t, err, "%s=%q", c.key, c.value)
		require.ErrorContains(t, err, c.key)
	}
	orig := nonDefault(t)
	_, want, _ := paramTable(t, &orig)
	_, got, _ := paramTable(t, &cfg)
	require.Equal(t, want, got, "refused values change nothing")
}

// TestSettingsDocListsEveryKey checks that docs/msgx/settings.md names every
// PARAM key.
func TestSettingsDocListsEveryKey(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../docs/msgx/settings.md")
	require.NoError(t, err)
	def := msgx.Defaults()
	keys, _, _ := paramTable(t, &def)
	for _, k := range keys {
		require.Contains(t, string(doc), "`"+k+"`", "docs/msgx/settings.md does not list %s", k)
	}
}
