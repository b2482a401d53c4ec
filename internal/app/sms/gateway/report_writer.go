package gateway

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// reportBatchMax is the most entries one pipeline of the report writer
// carries; what is queued beyond it goes in the next pipeline.
const reportBatchMax = 128

// errReportWriterStopped answers a write that comes when the report writer
// is not running (before Run starts it, after Run stopped it).
var errReportWriterStopped = errors.New("gateway: report writer not running")

// reportWriter writes the report stream's entries (status reports, MO,
// late SubmitResps) for concurrent callers. Each caller queues its entry
// and waits; one goroutine takes whatever is queued (at most
// reportBatchMax), sends it as one pipeline, and answers each caller with
// its own XADD's error. It never waits for more entries to come: a lone
// entry is sent at once, alone. Under load the entries that queue while a
// pipeline is out go together in the next one, so the report stream costs
// one round trip per pipeline instead of one per Deliver.
type reportWriter struct {
	rdb    redis.UniversalClient
	stream string

	mu      sync.Mutex
	queue   []*reportEntry
	running bool
	wake    chan struct{} // capacity 1: something was queued, or stop was called
	done    chan struct{} // closed when run returns
}

// reportEntry is one caller's entry and where its answer goes.
type reportEntry struct {
	ctx    context.Context
	values map[string]any
	err    chan error // capacity 1; the writer never blocks on it
}

func newReportWriter(rdb redis.UniversalClient, stream string) *reportWriter {
	return &reportWriter{rdb: rdb, stream: stream, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// start runs the writer until stop. ctx governs the pipelines; Run passes
// one that is never cancelled, so that the entries queued when it stops
// are still written.
func (w *reportWriter) start(ctx context.Context) {
	w.mu.Lock()
	w.running = true
	w.mu.Unlock()
	go w.run(ctx)
}

// stop refuses further writes, waits until every entry already queued has
// been written and answered, and returns once the writer's goroutine has
// ended.
func (w *reportWriter) stop() {
	w.mu.Lock()
	w.running = false
	w.mu.Unlock()
	w.signal()
	<-w.done
}

func (w *reportWriter) signal() {
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// write adds values to the report stream and returns nil once they are in
// it, or the error of its XADD (errReportWriterStopped when the writer is
// not running). When ctx ends first it returns ctx.Err() without waiting;
// the entry is then skipped if its pipeline has not been built yet, and
// may still be written if it has.
func (w *reportWriter) write(ctx context.Context, values map[string]any) error {
	e := &reportEntry{ctx: ctx, values: values, err: make(chan error, 1)}
	w.mu.Lock()
	if !w.running {
		w.mu.Unlock()
		return errReportWriterStopped
	}
	w.queue = append(w.queue, e)
	w.mu.Unlock()
	w.signal()
	select {
	case err := <-e.err:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run sends what is queued, a pipeline at a time, until it is stopped and
// the queue is empty.
func (w *reportWriter) run(ctx context.Context) {
	defer close(w.done)
	batch := make([]*reportEntry, 0, reportBatchMax)
	for {
		w.mu.Lock()
		n := min(len(w.queue), reportBatchMax)
		batch = append(batch[:0], w.queue[:n]...)
		rest := copy(w.queue, w.queue[n:])
		clear(w.queue[rest:])
		w.queue = w.queue[:rest]
		running := w.running
		w.mu.Unlock()
		if n > 0 {
			w.send(ctx, batch)
			clear(batch)
			continue
		}
		if !running {
			return
		}
		<-w.wake
	}
}

// send writes batch in one pipeline and answers each entry with its own
// command's error. An entry whose caller has stopped waiting is left out.
func (w *reportWriter) send(ctx context.Context, batch []*reportEntry) {
	pipe := w.rdb.Pipeline()
	adds := make([]*redis.StringCmd, len(batch))
	for i, e := range batch {
		if e.ctx.Err() != nil {
			continue
		}
		adds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: w.stream, Values: e.values})
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx) // each command's error is read below
	}
	for i, e := range batch {
		if adds[i] == nil {
			e.err <- e.ctx.Err()
			continue
		}
		e.err <- adds[i].Err()
	}
}
