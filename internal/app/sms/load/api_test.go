package load_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/complete"
	"github.com/relayhq/relay/internal/app/sms/load"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
)

// TestRunAgainstAPI offers 100/s for 1 s to the real API (admit.NewAPI on
// the demo fixture, served over HTTP) and admits what it accepted with the
// real admission stage: every request is accepted and every message
// admitted — the mix passes the fixture's rules, limits and blacklists —
// one segment for template messages, three for the long ones.
func TestRunAgainstAPI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := testdb.PGDriver(t)
	clock := relayclock.System{}
	_, err := relaymigrate.Up(ctx, d, clock, tenancy.MigrationLines()...)
	require.NoError(t, err)
	var creds load.Credentials
	_, err = tenancy.Seed(ctx, d.Pool(), tenancy.DemoFixture(func(n string) string { return "file:/x/" + n }),
		tenancy.SeedOpts{Clock: clock, NewApp: func(c tenancy.AppCredentials) error {
			if c.Enterprise == "yuntong" && c.App == "otp" {
				creds = load.Credentials{APIKey: c.APIKey, HMACSecret: c.HMACSecret}
			}
			return nil
		}})
	require.NoError(t, err)
	work, err := complete.NewWorkStore(d.Pool(), clock)
	require.NoError(t, err)
	stage, err := admit.NewStage(admit.StageConfig{Driver: d, Clock: clock, Work: work})
	require.NoError(t, err)
	engine, err := relay.NewEngine(d, admit.EngineConfig(stage, "", clock, nil))
	require.NoError(t, err)
	api, err := admit.NewAPI(admit.APIConfig{Driver: d, Engine: engine, Clock: clock})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	since := clock.Now().Add(-time.Second)
	res, err := load.Run(ctx, load.Config{URL: srv.URL, Credentials: creds, TPS: 100, Duration: time.Second, Clock: clock})
	require.NoError(t, err)
	t.Log(res)
	require.Equal(t, 100, res.Sent+res.Dropped)
	require.Equal(t, res.Sent, res.Accepted, res.Errors)
	for {
		n, err := engine.Work(ctx)
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	var admitted, long, short, refused int
	require.NoError(t, d.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'admitted'),
		count(*) FILTER (WHERE segments = 3), count(*) FILTER (WHERE segments = 1), count(*) FILTER (WHERE state = 'refused')
		FROM sms_message WHERE accepted_at >= $1`, since).Scan(&admitted, &long, &short, &refused))
	require.Equal(t, 0, refused)
	require.Equal(t, res.Accepted, admitted)
	require.Equal(t, res.Long, long)
	require.Equal(t, res.Accepted-res.Long, short)
}
