package shore_test

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// TestReleaseThroughTheClient: the ship client's own transport and rule
// runtime against the real shore over mutual TLS. A release is fetched,
// validated whole and switched to, and the heartbeat makes it ACTIVE; the
// next one collides with a local rule of the node (the same table under
// another rule id), so the node refuses the whole set and keeps running
// version 1, the shore marks the release FAILED and offers version 1 again,
// which the node takes.
func TestReleaseThroughTheClient(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), nil)
	ctx := t.Context()
	s.addNode(t, "ship-1")

	cf, kf := pki.NodeFiles("node-ship-1")
	cert, err := tls.LoadX509KeyPair(filepath.Join(s.pki.Path, cf), filepath.Join(s.pki.Path, kf))
	require.NoError(t, err)
	tr, err := client.NewTransport(s.url, &tls.Config{RootCAs: s.caPool(t), Certificates: []tls.Certificate{cert},
		MinVersion: tls.VersionTLS12}, 30*time.Second)
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	st, err := client.OpenStore(ctx, filepath.Join(t.TempDir(), "client.db"), "g", s.clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	local, err := normalize.LoadRules(strings.NewReader(`{"rules": [{"id": "legacy", "version": 1, "direction": "UPLINK",
		"database": "archive", "table": "voyage", "key_columns": ["id"], "revisioned": false}]}`))
	require.NoError(t, err)
	rt, err := client.NewRuleRuntime(ctx, normalize.Config{NodeID: "ship-1", ConnectorID: "c"}, local, st, st)
	require.NoError(t, err)

	// follow is one heartbeat round of the client: report, and take a new
	// config when the answer names one.
	follow := func() {
		t.Helper()
		resp, err := tr.Heartbeat(ctx, &pb.Heartbeat{ProtocolVersion: "1.0", NodeId: "ship-1",
			ConfigVersion: rt.ConfigVersion(), ConfigRejection: rt.Rejection()})
		require.NoError(t, err)
		if resp.ConfigVersion != rt.ConfigVersion() && (rt.Rejection() == nil || rt.Rejection().ConfigVersion != resp.ConfigVersion) {
			nc, err := tr.Config(ctx)
			require.NoError(t, err)
			require.NoError(t, rt.Apply(ctx, nc))
		}
	}

	s.distribute(t, s.draft(t, 1, shipRule(1, "UPLINK"), "ship-1"))
	follow() // fetches config 2 and switches
	require.EqualValues(t, 2, rt.ConfigVersion())
	require.Equal(t, shore.ReleaseDistributing, s.state(t, 1))
	follow() // reports it
	require.Equal(t, shore.ReleaseActive, s.state(t, 1))

	// Version 2 selects archive.voyage, the table of the node's local rule
	// "legacy" (the shore cannot know the node's local rules).
	s.distribute(t, s.draft(t, 2, []byte(strings.ReplaceAll(string(shipRule(2, "UPLINK")), `"database": "ship"`,
		`"database": "archive"`)), "ship-1"))
	follow()
	require.EqualValues(t, 2, rt.ConfigVersion(), "the node keeps running config 2")
	require.NotNil(t, rt.Rejection())
	follow() // reports the refusal
	require.Equal(t, shore.ReleaseFailed, s.state(t, 2))
	require.Equal(t, shore.ReleaseActive, s.state(t, 1))
	rel, err := s.reg.Release(ctx, shore.RuleRef{ID: "voyage-log", Version: 2})
	require.NoError(t, err)
	require.Contains(t, rel.Failure, "another rule selects the same database.table")
	follow() // takes config 4 (version 1 again)
	require.EqualValues(t, 4, rt.ConfigVersion())
	require.Nil(t, rt.Rejection())
}
