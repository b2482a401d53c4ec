package supplier_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/supplier"
)

func TestParseDist(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]supplier.Dist{
		"0":                   supplier.Fixed(0),
		"250ms":               supplier.Fixed(250 * time.Millisecond),
		"fixed:2s":            supplier.Fixed(2 * time.Second),
		"uniform:5ms..50ms":   supplier.Uniform(5*time.Millisecond, 50*time.Millisecond),
		"exp:20ms":            supplier.Exp(20*time.Millisecond, 0),
		"exp:20ms..1s":        supplier.Exp(20*time.Millisecond, time.Second),
		"exp:5ms+20ms..1s":    {Kind: supplier.DistExp, Min: 5 * time.Millisecond, Mean: 20 * time.Millisecond, Max: time.Second},
		"uniform: 1s .. 2s ":  supplier.Uniform(time.Second, 2*time.Second),
		"exp:1s+0s":           {Kind: supplier.DistExp, Min: time.Second},
		"fixed:1h0m0.000001s": supplier.Fixed(time.Hour + time.Microsecond),
	} {
		got, err := supplier.ParseDist(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
		again, err := supplier.ParseDist(got.String())
		require.NoError(t, err, got.String())
		require.Equal(t, got, again)
	}
	for in, msg := range map[string]string{
		"":                 "bad duration",
		"soon":             "bad duration",
		"uniform:5ms":      "want uniform:A..B",
		"uniform:2s..1s":   "max below min",
		"exp:1s+1s..500ms": "cap below min",
		"-1s":              "negative",
		"fixed:25h":        "over 24h",
		"gamma:1s":         "want D, fixed:D",
	} {
		_, err := supplier.ParseDist(in)
		require.ErrorContains(t, err, msg, in)
	}
}

// TestDistDraw: every draw is inside the bounds, and a seed repeats them.
func TestDistDraw(t *testing.T) {
	t.Parallel()
	for _, d := range []supplier.Dist{
		supplier.Fixed(3 * time.Millisecond),
		supplier.Uniform(time.Millisecond, 9*time.Millisecond),
		supplier.Exp(10*time.Millisecond, 40*time.Millisecond),
		{Kind: supplier.DistExp, Min: 2 * time.Millisecond, Mean: time.Millisecond},
	} {
		r1, r2 := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
		var sum time.Duration
		for range 2000 {
			x := d.Draw(r1)
			require.Equal(t, x, d.Draw(r2))
			require.GreaterOrEqual(t, x, d.Min, d.String())
			if d.Max > 0 {
				require.LessOrEqual(t, x, d.Max, d.String())
			}
			sum += x
		}
		if d.Kind == supplier.DistExp && d.Max == 0 {
			mean := sum / 2000
			require.InDelta(t, float64(d.Min+d.Mean), float64(mean), float64(d.Mean)/5, "mean of %s", d)
		}
	}
}

func TestParseWeights(t *testing.T) {
	t.Parallel()
	stats, err := supplier.ParseStats("DELIVRD=95, UNDELIV=3,EXPIRED, MA:0001=2")
	require.NoError(t, err)
	require.Equal(t, []supplier.Weighted[string]{{Value: "DELIVRD", Weight: 95}, {Value: "UNDELIV", Weight: 3},
		{Value: "EXPIRED", Weight: 1}, {Value: "MA:0001", Weight: 2}}, stats)
	results, err := supplier.ParseResults("13=3,10")
	require.NoError(t, err)
	require.Equal(t, []supplier.Weighted[uint32]{{Value: 13, Weight: 3}, {Value: 10, Weight: 1}}, results)
	for _, bad := range []string{"DELIVERED=1", "DELIVRD=x", "DELIVRD=-1", "A B=1"} {
		_, err := supplier.ParseStats(bad)
		require.Error(t, err, bad)
	}
	for _, bad := range []string{"0=1", "256", "x", "8=2000000"} {
		_, err := supplier.ParseResults(bad)
		require.Error(t, err, bad)
	}
}

// TestConfigValidate: New names the bad field and never quotes a secret.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := func() supplier.Config {
		return supplier.Config{Accounts: []supplier.Account{{SourceAddr: spBoth, Secret: "TOP-SECRET"}}}
	}
	for msg, mod := range map[string]func(*supplier.Config){
		"at least one account":       func(c *supplier.Config) { c.Accounts = nil },
		"SourceAddr \"12345\"":       func(c *supplier.Config) { c.Accounts[0].SourceAddr = "12345" },
		"listed twice":               func(c *supplier.Config) { c.Accounts = append(c.Accounts, c.Accounts[0]) },
		"Versions: 0x21":             func(c *supplier.Config) { c.Accounts[0].Versions = []cmpp.Version{0x21} },
		"Window -1 below 1":          func(c *supplier.Config) { c.Accounts[0].Window = -1 },
		"Rate -1 is negative":        func(c *supplier.Config) { c.Accounts[0].Rate = -1 },
		"ISMGCode 4194304":           func(c *supplier.Config) { c.ISMGCode = 1 << 22 },
		"Tries -2 below 1":           func(c *supplier.Config) { c.Tries = -2 },
		"FailRate 1.5 outside":       func(c *supplier.Config) { c.Behaviour.FailRate = 1.5 },
		"NoAnswerRate NaN":           func(c *supplier.Config) { c.Behaviour.NoAnswerRate = nanRate() },
		"FlowControlRate + FailRate": func(c *supplier.Config) { c.Behaviour.FailRate, c.Behaviour.FlowControlRate = 0.6, 0.6 },
		"Behaviour.Latency":          func(c *supplier.Config) { c.Behaviour.Latency = supplier.Uniform(time.Second, 0) },
		"Result 300 outside": func(c *supplier.Config) {
			c.Behaviour.ResultCodes = []supplier.Weighted[uint32]{{Value: 300, Weight: 1}}
		},
		"Stat \"TOOLONGSTAT\"": func(c *supplier.Config) {
			c.Behaviour.ReportStats = []supplier.Weighted[string]{{Value: "TOOLONGSTAT", Weight: 1}}
		},
		"weight -1": func(c *supplier.Config) {
			c.Behaviour.ReportStats = []supplier.Weighted[string]{{Value: "DELIVRD", Weight: -1}}
		},
		"DropEvery -1 is negative":     func(c *supplier.Config) { c.Behaviour.DropEvery = -1 },
		"MO.Text":                      func(c *supplier.Config) { c.Behaviour.MO.Text, c.Behaviour.MO.Fmt = "\xff", cmpp.FmtUCS2 },
		"WindowAction 9 unknown":       func(c *supplier.Config) { c.Behaviour.WindowAction = 9 },
		"Record.Sync 7 unknown":        func(c *supplier.Config) { c.Record.Sync = 7 },
		"LoginTimeout -1s is negative": func(c *supplier.Config) { c.LoginTimeout = -time.Second },
	} {
		cfg := ok()
		mod(&cfg)
		_, err := supplier.New(cfg)
		require.ErrorContains(t, err, msg, msg)
		require.NotContains(t, err.Error(), "TOP-SECRET")
	}
	require.NotContains(t, ok().Accounts[0].String(), "TOP-SECRET")
	srv, err := supplier.New(ok())
	require.NoError(t, err)
	require.Nil(t, srv.Addr())
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close())
	require.False(t, strings.Contains(supplier.Exp(time.Second, 0).String(), ".."))
}

func nanRate() float64 {
	zero := 0.0
	return zero / zero
}
