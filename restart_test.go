package relay_test

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// A restarted instance with a stable Config.InstanceID releases its dead
// predecessor's leases at Start and processes those messages at once; a
// second live engine with the same InstanceID is refused at Start.

// twoProcesses opens two drivers on one fresh migrated store, as two
// processes would, and returns kill, which does to the first one's store
// side what kill -9 of its process does: on PostgreSQL the server ends its
// sessions (their advisory locks and open transactions go at once); on
// SQLite nothing happens — its lock lease stays until it expires.
func twoProcesses(t *testing.T, s store) (first, second relaydriver.Driver, kill func()) {
	t.Helper()
	ctx := context.Background()
	if s.name == "postgres" {
		dsn := testdb.PGSchema(t)
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		app := "relay-first-" + u.Query().Get("search_path")
		q := u.Query()
		q.Set("application_name", app)
		u.RawQuery = q.Encode()
		first, second = testdb.PGDriverAt(t, u.String()), testdb.PGDriverAt(t, dsn)
		return first, second, func() {
			_, err := second.GetExecutor().Exec(ctx,
				"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app)
			require.NoError(t, err)
			// pg_terminate_backend only signals: wait until the sessions are
			// gone (and their advisory locks with them), as after a real kill.
			// A restart that tried the lock before that would wait on its
			// fake clock, which never moves here.
			require.Eventually(t, func() bool {
				var n int
				require.NoError(t, second.GetExecutor().QueryRow(ctx,
					"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n))
				return n == 0
			}, 20*time.Second, 5*time.Millisecond)
		}
	}
	path := filepath.Join(t.TempDir(), "relay.db")
	open := func() relaydriver.Driver {
		d, err := relaysqlite.Open(ctx, path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	first, second = open(), open()
	_, err := relaymigrate.Up(ctx, first, relayclock.System{}, relaymigrate.EngineLineOf(first))
	require.NoError(t, err)
	return first, second, func() {}
}

// hangingDecoder is batchHandler whose Decode — which runs after the claim,
// outside any transaction — reports each message on entered and blocks until
// hang is closed: an instance that is killed there holds leases and nothing
// else.
type hangingDecoder struct {
	relay.HandlerFunc
	entered chan<- int64
	hang    <-chan struct{}
}

func (h hangingDecoder) Decode(_ context.Context, m *relaytype.Message) (*relay.Decoded, error) {
	h.entered <- m.ID
	<-h.hang
	return &relay.Decoded{}, nil
}

// startAdvancing starts e and, while Start waits, moves clock a second at a
// time once at least parked timers wait on it (everything that runs on the
// clock is parked, so each step is deterministic). It returns how far the
// clock moved and Start's error.
func startAdvancing(t *testing.T, e *relay.Engine, clock *relayclock.Fake, parked int) (time.Duration, error) {
	t.Helper()
	from := clock.Now()
	started := make(chan error, 1)
	go func() { started <- e.Start(context.Background()) }()
	for {
		var err error
		done := false
		require.Eventually(t, func() bool {
			select {
			case err = <-started:
				done = true
				return true
			default:
				return clock.Waiters() >= parked
			}
		}, 20*time.Second, time.Millisecond)
		if done {
			return clock.Now().Sub(from), err
		}
		clock.Advance(time.Second)
	}
}

// startNow starts e and fails the test if Start does not return on its own
// (it must not be waiting for the clock).
func startNow(t *testing.T, e *relay.Engine) error {
	t.Helper()
	started := make(chan error, 1)
	go func() { started <- e.Start(context.Background()) }()
	select {
	case err := <-started:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Start is waiting")
		return nil
	}
}

// TestRestartReleasesOwnLeasesAtOnce: engine A (InstanceID "pod-0") claims
// three messages with a one-minute lease and is killed while two of them
// are being decoded. Engine B, the restart — same InstanceID, a new driver
// on the same store — processes all three without its clock reaching the
// leases' expiry: at once on PostgreSQL (A's lock died with its session), and
// on SQLite after A's lock lease ran out (InstanceLockTTL), still well inside
// the message leases. A, resumed after the fact, commits nothing.
func TestRestartReleasesOwnLeasesAtOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		dA, dB, kill := twoProcesses(t, s)
		const lease = time.Minute
		var ca, cb calls
		entered, hang := make(chan int64, 3), make(chan struct{})
		clockA := relayclock.NewFake(t0)
		a := setupOn(t, dA, relay.Config{Mode: relay.ModeUnordered, InstanceID: "pod-0", Clock: clockA,
			LeaseDuration: lease, Workers: 2, Handler: hangingDecoder{batchHandler(&ca, nil), entered, hang}})
		a.createEffect()
		a.enqueue(1, 2, 3)
		require.NoError(t, a.engine.Start(a.ctx))
		<-entered
		<-entered // two workers hang in Decode; the third message waits for them
		for id := int64(1); id <= 3; id++ {
			require.Equal(t, "pod-0", a.get(id).LeaseOwner, "message %d", id)
		}
		kill()

		clockB := relayclock.NewFake(t0)
		b := setupOn(t, dB, relay.Config{Mode: relay.ModeUnordered, InstanceID: "pod-0", Clock: clockB,
			LeaseDuration: lease, Handler: batchHandler(&cb, nil)})
		if s.name == "postgres" {
			require.NoError(t, startNow(t, b.engine), "the dead session's lock is free at once")
		} else {
			// B waits for A's lock lease (InstanceLockTTL) to run out; the
			// clock may move on a little more while Start finishes, since B's
			// own lock renewal is parked on it by then.
			waited, err := startAdvancing(t, b.engine, clockB, 1)
			require.NoError(t, err)
			require.GreaterOrEqual(t, waited, relay.InstanceLockTTL, "A's lock lease ran out first")
		}
		t.Cleanup(func() { require.NoError(t, b.engine.Stop(context.Background())) })
		require.Eventually(t, func() bool {
			for id := int64(1); id <= 3; id++ {
				if b.state(id) != relaytype.StateSucceeded {
					return false
				}
			}
			return true
		}, 20*time.Second, 5*time.Millisecond)
		require.Less(t, clockB.Now().Sub(t0), lease, "processed before the old leases expired")
		require.ElementsMatch(t, []int64{1, 2, 3}, cb.get())
		require.Equal(t, 1, b.logs.count("released the leases of an earlier incarnation"))

		// The killed engine resumes (as a paused process would): whatever it
		// then does is refused, and each effect exists once.
		close(hang)
		stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = a.engine.Stop(stopCtx) // its store connections may be dead
		require.Equal(t, once(1, 2, 3), b.effects())
		for id := int64(1); id <= 3; id++ {
			require.Equal(t, relaytype.StateSucceeded, b.state(id))
		}
	})
}

// TestSecondLiveInstanceRefused: while engine A runs with InstanceID "pod-0",
// another engine with that InstanceID is refused at Start — after waiting
// InstanceLockTTL, long enough for a dead holder's lock to be freed on every
// store — with an error naming the id. Once A stops, the id is free at once.
// Engines with generated InstanceIDs take no lock: several run side by side.
func TestSecondLiveInstanceRefused(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		d := s.open(t, true)
		clock := relayclock.NewFake(t0)
		cfg := relay.Config{Mode: relay.ModePerKey, InstanceID: "pod-0", Clock: clock, PollInterval: time.Hour,
			Handler: okHandler()}
		a := setupOn(t, d, cfg)
		require.NoError(t, a.engine.Start(a.ctx))

		b := setupOn(t, d, cfg)
		// Parked: A's idle loop, A's lock renewal, B's next try.
		waited, err := startAdvancing(t, b.engine, clock, 3)
		require.ErrorIs(t, err, relaytype.ErrLocked)
		require.ErrorContains(t, err, `InstanceID "pod-0" is in use by another live engine`)
		require.GreaterOrEqual(t, waited, relay.InstanceLockTTL)

		a.enqueue(1)
		require.Eventually(t, func() bool { return a.state(1) == relaytype.StateSucceeded }, 20*time.Second,
			5*time.Millisecond, "A still runs")
		require.NoError(t, a.engine.Stop(a.ctx))

		c := setupOn(t, d, cfg)
		require.NoError(t, startNow(t, c.engine), "A released the lock when it stopped")
		require.NoError(t, c.engine.Stop(c.ctx))

		cfg.InstanceID = ""
		x, y := setupOn(t, d, cfg), setupOn(t, d, cfg)
		require.NoError(t, x.engine.Start(x.ctx))
		require.NoError(t, y.engine.Start(y.ctx))
		require.NotEqual(t, x.engine.InstanceID(), y.engine.InstanceID())
		require.NoError(t, x.engine.Stop(x.ctx))
		require.NoError(t, y.engine.Stop(y.ctx))
	})
}
