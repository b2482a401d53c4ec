package smscrash_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/smscrash"
	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
)

// buildRelay builds the relay binary the children run.
func buildRelay(t *testing.T) string {
	t.Helper()
	bin := testbin.Relay(t)
	return bin
}

// harnessCommands is the number of submitIds of TestGatewayCrashHarness:
// fewer than the 20,000 of the documented run (docs/sms/gateway.md), so
// that the test fits CI's time on two shared cores; `relay sms crash` runs
// the full size.
const harnessCommands = 6000

// TestGatewayCrashHarness is the gateway's acceptance run under crashes:
// real `relay sms gateway` children on the machine's Redis and PostgreSQL
// (the test fails when either is absent) against a real `relay sms
// supplier` child, killed 10 times at random moments and twice at each of
// the four fault points, restarted under their old consumer name or a new
// one, then drained; the reconciliation must find every submitId submitted
// at most once (exactly once when accepted), settled, with identical
// results equal to its row, and nothing pending.
func TestGatewayCrashHarness(t *testing.T) {
	bin := buildRelay(t)
	var log strings.Builder
	res, err := smscrash.Run(context.Background(), smscrash.Options{
		Binary: bin, PostgresURL: testdb.PGSchema(t), Dir: t.TempDir(),
		Commands: harnessCommands, Duplicates: harnessCommands / 50, Kills: 10, FaultLives: 2, Seed: 17, Out: &log,
	})
	if res != nil {
		res.Write(&log)
	}
	t.Log("\n" + log.String())
	require.NoError(t, err)
	require.True(t, res.OK(), "%v", res.Problems)
	require.Equal(t, 10+4*2+1, res.Lives)
	require.Equal(t, 10, res.Kills-res.FaultMisses)
	for _, p := range smscrash.Points {
		require.GreaterOrEqual(t, res.FaultKills[p], 1, "lives ended at %s", p)
	}
	require.Positive(t, res.SameConsumer, "restarts under the same consumer")
	require.Positive(t, res.NewConsumer, "restarts under a new consumer")
	require.Positive(t, res.Accepted)
	require.Positive(t, res.Rejected)
	require.Positive(t, res.UnknownSubmitted+res.UnknownNotSubmitted, "a kill leaves claims unsettled")
	require.Equal(t, harnessCommands, res.Accepted+res.Rejected+res.UnknownSubmitted+res.UnknownNotSubmitted)
	require.Equal(t, res.Accepted+res.UnknownSubmitted, res.RecordSubmits)
	require.GreaterOrEqual(t, res.Results, res.Entries)
	fmt.Fprintf(os.Stderr, "sms gateway crash harness: %d entries, %d kills + %d at fault points, %d accepted, %d unknown (%d submitted), %s\n",
		res.Entries, res.Kills, res.TotalFaultKills(), res.Accepted, res.UnknownSubmitted+res.UnknownNotSubmitted,
		res.UnknownSubmitted, res.Elapsed.Round(time.Millisecond))
}

// TestGatewayCrashHarnessRefusesUsedSchema: submitIds are numbered from 1 in
// every run, so a schema holding an earlier run's rows is refused up front,
// before any child starts.
func TestGatewayCrashHarnessRefusesUsedSchema(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.row(t, 1, gateway.StateAccepted, 101)
	_, err := smscrash.Run(t.Context(), smscrash.Options{Binary: "relay-not-started", PostgresURL: w.url,
		Dir: t.TempDir(), Commands: 1})
	require.ErrorContains(t, err, "needs a fresh schema")
}

// world is a reconciliation test's state: a migrated schema, streams of its
// own and a record file.
type world struct {
	url    string
	db     *pgxpool.Pool
	rdb    *redis.Client
	check  smscrash.Check
	record strings.Builder
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := t.Context()
	w := &world{url: testdb.PGSchema(t)}
	d := testdb.PGDriverAt(t, w.url)
	_, err := relaymigrate.Up(ctx, d, relayclock.System{}, gateway.MigrationLine())
	require.NoError(t, err)
	w.db = d.Pool()
	w.rdb = redis.NewClient(&redis.Options{Addr: smscrash.RedisAddrDefault, DisableIdentity: true})
	t.Cleanup(func() { _ = w.rdb.Close() })
	require.NoError(t, w.rdb.Ping(ctx).Err(), "Redis at %s must be running", smscrash.RedisAddrDefault)
	p := "test:smscrash:" + strings.ReplaceAll(t.Name(), "/", ":") + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	w.check = smscrash.Check{DB: w.db, Redis: w.rdb, CommandStream: p + "submit", ResultStream: p + "result",
		Group: p + "gateway", Record: filepath.Join(t.TempDir(), "record.jsonl")}
	t.Cleanup(func() { _ = w.rdb.Del(context.Background(), w.check.CommandStream, w.check.ResultStream).Err() })
	w.record.WriteString(`{"k":"boot","boot":1,"at":"2026-12-02T00:00:00Z"}` + "\n")
	return w
}

func (w *world) row(t *testing.T, id uint64, state gateway.State, msgID uint64) {
	t.Helper()
	m := ""
	if msgID != 0 {
		m = strconv.FormatUint(msgID, 10)
	}
	_, err := w.db.Exec(t.Context(), `INSERT INTO gateway_submit (submit_id, channel, state, msg_id, result, claimed_by, claimed_at)
		VALUES ($1::text::numeric, 'cm', $2, nullif($3, '')::numeric, $4, 'gw-1', now())`,
		strconv.FormatUint(id, 10), string(state), m, resultText(state))
	require.NoError(t, err)
}

func resultText(s gateway.State) string {
	switch s {
	case gateway.StateAccepted:
		return "0"
	case gateway.StateRejected:
		return "13 destination"
	}
	return "outcome unknown"
}

func (w *world) submitted(key string, msgID uint64) {
	fmt.Fprintf(&w.record, `{"k":"submit","boot":1,"key":%q,"msg_id":"%d"}`+"\n", key, msgID)
}

func (w *world) result(t *testing.T, id uint64, state gateway.State, msgID uint64) {
	t.Helper()
	r := gateway.Result{EventID: gateway.SubmitEventID(id), SubmitID: id, Channel: "cm", State: state, MsgID: msgID,
		Result: resultText(state)}
	require.NoError(t, w.rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: w.check.ResultStream, Values: r.Values()}).Err())
}

func (w *world) reconcile(t *testing.T) *smscrash.Report {
	t.Helper()
	require.NoError(t, os.WriteFile(w.check.Record, []byte(w.record.String()), 0o644))
	rep, err := smscrash.Reconcile(t.Context(), w.check)
	require.NoError(t, err)
	return rep
}

// TestReconcile: a clean run passes, and each rule of the reconciliation
// catches its own breach (so the harness cannot pass by checking nothing).
func TestReconcile(t *testing.T) {
	t.Parallel()
	t.Run("clean", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		ctx := t.Context()
		w.check.Commands, w.check.Entries = 3, 4
		w.row(t, 1, gateway.StateAccepted, 101)
		w.row(t, 2, gateway.StateRejected, 0)
		w.row(t, 3, gateway.StateUnknown, 0)
		w.submitted("1", 101)
		w.result(t, 1, gateway.StateAccepted, 101)
		w.result(t, 2, gateway.StateRejected, 0)
		w.result(t, 3, gateway.StateUnknown, 0)
		w.result(t, 1, gateway.StateAccepted, 101)
		for _, id := range []uint64{1, 2, 3, 1} {
			require.NoError(t, w.rdb.XAdd(ctx, &redis.XAddArgs{Stream: w.check.CommandStream,
				Values: map[string]any{"submit_id": strconv.FormatUint(id, 10)}}).Err())
		}
		consumeAll(t, w, true)
		rep := w.reconcile(t)
		require.True(t, rep.OK(), "%v", rep.Problems)
		require.Equal(t, 1, rep.Accepted)
		require.Equal(t, 1, rep.Rejected)
		require.Equal(t, 1, rep.UnknownNotSubmitted)
		require.Equal(t, 4, rep.Results)
		require.Equal(t, 1, rep.ReEmitted)
	})
	t.Run("breaches", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		ctx := t.Context()
		w.check.Commands, w.check.Entries = 7, 9 // one entry "lost"
		w.row(t, 1, gateway.StateAccepted, 101)  // clean
		w.submitted("1", 101)
		w.result(t, 1, gateway.StateAccepted, 101)
		w.row(t, 2, gateway.StateAccepted, 102) // submitted twice; its result disagrees with the row
		w.submitted("2", 102)
		w.submitted("2", 202)
		w.result(t, 2, gateway.StateRejected, 0)
		w.row(t, 3, gateway.StateClaimed, 0) // never settled, no result
		w.row(t, 4, gateway.StateUnknown, 0) // submitted once (fine), copies of its result differ
		w.submitted("4", 104)
		w.result(t, 4, gateway.StateUnknown, 0)
		w.result(t, 4, gateway.StateAccepted, 104)
		w.row(t, 5, gateway.StateRejected, 0) // rejected, yet in the record
		w.submitted("5", 105)
		w.result(t, 5, gateway.StateRejected, 0)
		w.result(t, 6, gateway.StateAccepted, 106) // no row
		w.row(t, 7, gateway.StateAccepted, 107)    // another Msg_Id in the record
		w.submitted("7", 777)
		w.result(t, 7, gateway.StateAccepted, 107)
		w.row(t, 8, gateway.StateAccepted, 108) // never pushed
		w.submitted("99", 199)                  // never pushed
		for id := uint64(1); id <= 7; id++ {
			require.NoError(t, w.rdb.XAdd(ctx, &redis.XAddArgs{Stream: w.check.CommandStream,
				Values: map[string]any{"submit_id": strconv.FormatUint(id, 10)}}).Err())
		}
		consumeAll(t, w, false) // 7 pending
		require.NoError(t, w.rdb.XAdd(ctx, &redis.XAddArgs{Stream: w.check.CommandStream,
			Values: map[string]any{"submit_id": "9"}}).Err()) // 8 entries, the last undelivered
		rep := w.reconcile(t)
		require.ElementsMatch(t, []string{
			"gateway_submit holds submitId 8, never pushed",
			"submitId 3: left CLAIMED",
			"submitId 6: no gateway_submit row",
			`the supplier's record holds a Submit with key "99", never pushed`,
			"submitId 2: submitted more than once",
			"submitId 2: ACCEPTED, in the supplier's record 2 times",
			"submitId 5: REJECTED, in the supplier's record 1 times",
			"submitId 7: ACCEPTED with Msg_Id 107, the supplier's record says 777",
			"event submit:4: copies differ: {EventID:submit:4 SubmitID:4 Channel:cm State:UNKNOWN MsgID:0 Result:outcome unknown}, " +
				"then {EventID:submit:4 SubmitID:4 Channel:cm State:ACCEPTED MsgID:104 Result:0}",
			`submitId 2: result REJECTED msg_id 0 "13 destination", row ACCEPTED msg_id 102 "0"`,
			"submitId 3: no result",
			"the command stream holds 8 entries, 9 were pushed",
			"7 command entries pending (delivered, never acked)",
			"1 command entries never delivered to the group",
		}, rep.Problems)
		require.Equal(t, 1, rep.UnknownSubmitted)
	})
}

// consumeAll reads every entry of the command stream in the check's group,
// and acks them when ack.
func consumeAll(t *testing.T, w *world, ack bool) {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, w.rdb.XGroupCreateMkStream(ctx, w.check.CommandStream, w.check.Group, "0").Err())
	res, err := w.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: w.check.Group, Consumer: "c",
		Streams: []string{w.check.CommandStream, ">"}, Count: 100, Block: -1}).Result()
	require.NoError(t, err)
	for _, m := range res[0].Messages {
		if ack {
			require.NoError(t, w.rdb.XAck(ctx, w.check.CommandStream, w.check.Group, m.ID).Err())
		}
	}
}
