package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/cmpp/cmppconn"
)

// pipelineHook hands every pipeline to fn, which calls next itself.
type pipelineHook struct {
	fn func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error
}

func (pipelineHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (pipelineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h pipelineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { return h.fn(ctx, cmds, next) }
}

// writerBundle is a gateway reduced to what deliverFunc needs: a Redis
// client with a pipeline hook, a report stream of the test's own, and the
// report writer, running.
type writerBundle struct {
	ctx     context.Context
	rdb     *redis.Client
	g       *Gateway
	deliver func(context.Context, *cmpp.Deliver) uint32

	first   chan struct{} // closed when the first pipeline is entered
	release chan struct{} // the first pipeline waits for it to close
	free    func()        // closes release (once)
	mu      sync.Mutex
	sizes   []int // commands per pipeline, in order
	inject  func(ctx context.Context, n int, cmds []redis.Cmder) []redis.Cmder
}

// setupWriter builds a writerBundle whose first pipeline waits for
// b.release, so that a test can queue entries behind it.
func setupWriter(t *testing.T) *writerBundle {
	t.Helper()
	ctx := t.Context()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Ping(ctx).Err(), "Redis at 127.0.0.1:6379 must be running")
	var r [6]byte
	_, _ = rand.Read(r[:])
	stream := "test:gw:" + hex.EncodeToString(r[:]) + ":report"
	t.Cleanup(func() { _ = rdb.Del(context.Background(), stream, stream+":done").Err() })
	b := &writerBundle{ctx: ctx, rdb: rdb, first: make(chan struct{}), release: make(chan struct{})}
	b.free = sync.OnceFunc(func() { close(b.release) })
	rdb.AddHook(pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		b.mu.Lock()
		b.sizes = append(b.sizes, len(cmds))
		n := len(b.sizes)
		inject := b.inject
		b.mu.Unlock()
		if n == 1 {
			close(b.first)
			<-b.release
		}
		if inject != nil {
			cmds = inject(ctx, n, cmds)
		}
		return next(ctx, cmds)
	}})
	b.g = &Gateway{cfg: Config{ReportStream: stream}, log: slog.New(slog.DiscardHandler), rdb: rdb,
		reports: newReportWriter(rdb, stream)}
	b.g.reports.start(context.Background())
	t.Cleanup(b.g.reports.stop)
	t.Cleanup(b.free) // before stop, should the test end with the first pipeline held
	b.deliver = b.g.deliverFunc(&channel{name: "cm", version: cmpp.V30})
	return b
}

// queued is the number of entries waiting for a pipeline.
func (b *writerBundle) queued() int {
	b.g.reports.mu.Lock()
	defer b.g.reports.mu.Unlock()
	return len(b.g.reports.queue)
}

func (b *writerBundle) pipelines() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.sizes...)
}

func mo(id int) *cmpp.Deliver {
	return &cmpp.Deliver{MsgID: uint64(id), DestID: "10690001", ServiceID: "TEST", SrcTerminalID: "13800000001",
		MsgContent: []byte("mo " + strconv.Itoa(id))}
}

// queue calls deliver for MO 1..n, each on its own goroutine as cmppconn
// does: the first alone, until it is in the first pipeline (held until
// b.free), then the others, until they are all queued behind it. answers
// waits for every call to return and gives the answers by MO id.
func (b *writerBundle) queue(t *testing.T, n int) (answers func() map[int]uint32) {
	t.Helper()
	got := make([]uint32, n+1)
	var wg sync.WaitGroup
	wg.Go(func() { got[1] = b.deliver(b.ctx, mo(1)) })
	require.Eventually(t, func() bool { return isClosed(b.first) }, 10*time.Second, time.Millisecond, "a first pipeline")
	for i := 2; i <= n; i++ {
		wg.Go(func() { got[i] = b.deliver(b.ctx, mo(i)) })
	}
	require.Eventually(t, func() bool { return b.queued() == n-1 }, 10*time.Second, time.Millisecond)
	return func() map[int]uint32 {
		wg.Wait()
		out := map[int]uint32{}
		for i := 1; i <= n; i++ {
			out[i] = got[i]
		}
		return out
	}
}

// deliverAll is queue, then the first pipeline let go, then the answers.
func (b *writerBundle) deliverAll(t *testing.T, n int) map[int]uint32 {
	t.Helper()
	answers := b.queue(t, n)
	b.free()
	return answers()
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// eventIDs counts the event ids in stream.
func (b *writerBundle) eventIDs(t *testing.T, stream string) map[string]int {
	t.Helper()
	msgs, err := b.rdb.XRange(b.ctx, stream, "-", "+").Result()
	require.NoError(t, err)
	ids := map[string]int{}
	for _, m := range msgs {
		ids[m.Values["event_id"].(string)]++
	}
	return ids
}

// TestReportWriterGroupsDelivers: Delivers that arrive while a pipeline is
// out go together in the next ones, at most reportBatchMax per pipeline;
// each is answered 0 and is in the stream exactly once.
func TestReportWriterGroupsDelivers(t *testing.T) {
	t.Parallel()
	b := setupWriter(t)
	const n = 300
	answers := b.deliverAll(t, n)
	for i, a := range answers {
		require.Zero(t, a, "MO %d", i)
	}
	require.Equal(t, []int{1, 128, 128, 43}, b.pipelines(), "the lone first Deliver went alone, the rest grouped")
	ids := b.eventIDs(t, b.g.cfg.ReportStream)
	require.Len(t, ids, n)
	for i := 1; i <= n; i++ {
		require.Equal(t, 1, ids[MOEventID("cm", uint64(i))], "MO %d", i)
	}
	require.EqualValues(t, n, b.g.stats.mo.Load())

	// One Deliver at a time: each goes at once, in a pipeline of its own.
	for i := n + 1; i <= n+3; i++ {
		require.Zero(t, b.deliver(b.ctx, mo(i)))
	}
	require.Equal(t, []int{1, 128, 128, 43, 1, 1, 1}, b.pipelines())
}

// TestReportWriterFailedCommands: in a pipeline whose later commands fail
// (the stream key turned into a string midway: WRONGTYPE), the Delivers of
// the failed commands are answered flow control and those written before
// are answered 0; a client that is closed answers flow control to all.
func TestReportWriterFailedCommands(t *testing.T) {
	t.Parallel()
	b := setupWriter(t)
	stream := b.g.cfg.ReportStream
	b.inject = func(ctx context.Context, n int, cmds []redis.Cmder) []redis.Cmder {
		if n != 2 || len(cmds) < 5 {
			return cmds
		}
		// After the second pipeline's fourth XADD, the stream moves away
		// and its key holds a string.
		out := append([]redis.Cmder(nil), cmds[:4]...)
		out = append(out, redis.NewStatusCmd(ctx, "rename", stream, stream+":done"),
			redis.NewStatusCmd(ctx, "set", stream, "not a stream"))
		return append(out, cmds[4:]...)
	}
	const n = 10
	answers := b.deliverAll(t, n)
	require.Equal(t, []int{1, 9}, b.pipelines())
	written := b.eventIDs(t, stream+":done")
	require.Len(t, written, 5, "the first pipeline's entry and four of the second")
	var zero, flow int
	for i, a := range answers {
		id := MOEventID("cm", uint64(i))
		if written[id] == 1 {
			require.Zero(t, a, "MO %d is in the stream", i)
			zero++
			continue
		}
		require.EqualValues(t, cmppconn.ResultFlowControl, a, "MO %d failed", i)
		flow++
	}
	require.Equal(t, 5, zero)
	require.Equal(t, 5, flow)
	require.EqualValues(t, 5, b.g.stats.mo.Load())

	// A closed client: every Deliver of the pipeline is answered flow
	// control.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", DisableIdentity: true})
	require.NoError(t, dead.Close())
	g := &Gateway{cfg: Config{ReportStream: stream}, log: slog.New(slog.DiscardHandler), rdb: dead,
		reports: newReportWriter(dead, stream)}
	g.reports.start(context.Background())
	t.Cleanup(g.reports.stop)
	deliver := g.deliverFunc(&channel{name: "cm", version: cmpp.V30})
	got := make([]uint32, 20)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i] = deliver(b.ctx, mo(100+i)) })
	}
	wg.Wait()
	for i, a := range got {
		require.EqualValues(t, cmppconn.ResultFlowControl, a, "MO %d", 100+i)
	}
	require.Zero(t, g.stats.mo.Load())
}

// TestReportWriterStopWritesQueued: stop refuses new entries (answered flow
// control at once) and returns only after the entries queued before it are
// written and answered 0.
func TestReportWriterStopWritesQueued(t *testing.T) {
	t.Parallel()
	b := setupWriter(t)
	const n = 40
	answers := b.queue(t, n)
	stopDone := make(chan struct{})
	go func() {
		b.g.reports.stop()
		close(stopDone)
	}()
	require.Eventually(t, func() bool {
		b.g.reports.mu.Lock()
		defer b.g.reports.mu.Unlock()
		return !b.g.reports.running
	}, 10*time.Second, time.Millisecond)
	require.EqualValues(t, cmppconn.ResultFlowControl, b.deliver(b.ctx, mo(n+1)), "refused once stopping")
	require.False(t, isClosed(stopDone), "stop returned before the queued entries were written")
	b.free()
	<-stopDone
	for i, a := range answers() {
		require.Zero(t, a, "MO %d", i)
	}
	ids := b.eventIDs(t, b.g.cfg.ReportStream)
	require.Len(t, ids, n)
	require.Equal(t, []int{1, n - 1}, b.pipelines())
	require.True(t, isClosed(b.g.reports.done), "the writer's goroutine has ended")
}
