package msgxcrash_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/msgxcrash"
	"github.com/relayhq/relay/internal/app/msgx/simulate"
	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver"
)

// TestMsgxCrashHarness is the msgx acceptance run under crashes: a simulated
// AODB day is written into a real MariaDB mailbox while a real `relay msgx
// run` child is killed 20 times (random SIGKILLs and engine fault points);
// a last child drains, and the flight state, both Kafka topics and every
// mailbox mark must equal the simulator's model.
func TestMsgxCrashHarness(t *testing.T) {
	bin := testbin.Relay(t)
	storeURL := testdb.PGSchema(t)
	store := testdb.PGDriverAt(t, storeURL)
	mailbox, dsn := testdb.MariaDBWithDSN(t)

	var log strings.Builder
	res, err := msgxcrash.Run(context.Background(), msgxcrash.Options{
		Binary: bin, StoreURL: storeURL, Store: store, MailboxDSN: dsn, Mailbox: mailbox,
		Kills: 20, Sim: simulate.Options{Flights: 200, Seed: 5, LateBy: 200 * time.Millisecond}, Rate: 60,
		Seed: 13, FaultProbability: 0.03, Out: &log,
	})
	t.Log("\n" + log.String())
	require.NoError(t, err)
	require.Equal(t, 20, res.Kills)
	require.True(t, res.Report.OK(), "%v", res.Report.Problems)
	fmt.Fprintf(os.Stderr, "msgx crash harness: %d kills (%d at fault points), %d mailbox rows, %d flights verified\n",
		res.Kills, res.FaultKills, res.Report.MailboxRows, res.Report.Flights)
}

// TestMsgxCrashHarnessRefusesUsedStore: msgx's flight state is one per schema,
// so a run on a store an earlier run used is refused up front with the reason,
// not at the cutover seeding of its first child.
func TestMsgxCrashHarnessRefusesUsedStore(t *testing.T) {
	t.Parallel()
	storeURL := testdb.PGSchema(t)
	store := testdb.PGDriverAt(t, storeURL)
	cfg, err := msgxcrash.Config()
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, store.GetExecutor().CursorSeed(ctx, &relaydriver.CursorSeedParams{
		Queue: cfg.Pipeline, Mode: "zero", Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}))
	_, err = msgxcrash.Run(ctx, msgxcrash.Options{Binary: "relay-not-started", StoreURL: storeURL, Store: store, Kills: 1})
	require.ErrorContains(t, err, "needs a fresh schema and a fresh mailbox database")
}
