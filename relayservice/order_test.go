package relayservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysource"
)

// journal records what the parts did, in order.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(e string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

// recorder is a Start/Stop part that records its calls. It stands in for the
// engine's and the other parts' Start/Stop so that the order is observable;
// startErr makes Start fail.
type recorder struct {
	name     string
	j        *journal
	startErr error
}

func (r *recorder) Start(context.Context) error {
	r.j.add("start " + r.name)
	return r.startErr
}

func (r *recorder) Stop(context.Context) error {
	r.j.add("stop " + r.name)
	return nil
}

// loopPart is a goroutine part (intake or job) that records its start and end
// and runs until its ctx ends, or fails with err once failNow is closed.
type loopPart struct {
	name    string
	j       *journal
	started chan struct{}
	failNow chan struct{}
	err     error
}

func newLoop(name string, j *journal) *loopPart {
	return &loopPart{name: name, j: j, started: make(chan struct{}), failNow: make(chan struct{})}
}

func (l *loopPart) Run(ctx context.Context) error {
	l.j.add("start " + l.name)
	close(l.started)
	defer l.j.add("stop " + l.name)
	select {
	case <-ctx.Done():
		return nil
	case <-l.failNow:
		return l.err
	}
}

// newTestService builds a Service on a real SQLite store and engine, whose
// Start/Stop parts are replaced by recorders named after the real ones.
func newTestService(t *testing.T, j *journal, intake *loopPart, jobs []*loopPart, parts ...*recorder) *Service {
	t.Helper()
	ctx := context.Background()
	d, err := relaysqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	_, err = relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
	require.NoError(t, err)
	e, err := relay.NewEngine(d, relay.Config{Queue: "order", Logger: slog.New(slog.DiscardHandler),
		Handler: relay.HandlerFunc(func(context.Context, relay.Tx, *relay.Delivery) relay.Result { return relay.Succeeded() })})
	require.NoError(t, err)
	cfg := Config{Driver: d, Engine: e, Logger: slog.New(slog.DiscardHandler), StopTimeout: 5 * time.Second}
	if intake != nil {
		cfg.Intake = intake
	}
	for _, job := range jobs {
		cfg.Jobs = append(cfg.Jobs, job.Run)
	}
	s, err := New(cfg)
	require.NoError(t, err)
	s.parts = nil
	for _, p := range parts {
		s.parts = append(s.parts, named{p.name, p})
	}
	return s
}

func recorders(j *journal, names ...string) []*recorder {
	rs := make([]*recorder, len(names))
	for i, n := range names {
		rs[i] = &recorder{name: n, j: j}
	}
	return rs
}

// noSink is never run: TestPartsOrder only lists the parts.
type noSink struct{}

func (noSink) Name() string                                       { return "none" }
func (noSink) Publish(context.Context, []relaysink.Event) []error { return nil }
func (noSink) Close(context.Context) error                        { return nil }

// noSource is never run either.
type noSource struct{}

func (noSource) Acknowledge(context.Context, int64, string, time.Time) (relaysource.AckOutcome, error) {
	return 0, errors.New("not used")
}

// The real parts are listed in start order: engine, dispatchers, ack writer,
// maintenance.
func TestPartsOrder(t *testing.T) {
	t.Parallel()
	s := newTestService(t, &journal{}, nil, nil)
	require.Equal(t, []string{"engine"}, partNames(partsOf(s.cfg)), "only the engine when nothing else is configured")

	cfg := s.cfg
	d, e := cfg.Driver, cfg.Engine
	for _, target := range []string{"a", "b"} {
		x, err := relay.NewDispatcher(d, noSink{}, relay.DispatcherConfig{Target: target})
		require.NoError(t, err)
		cfg.Dispatchers = append(cfg.Dispatchers, x)
	}
	var err error
	cfg.AckWriter, err = relay.NewAckWriter(d, noSource{}, relay.AckConfig{Queue: e.Queue(), Gate: e.Gate(), R: time.Hour})
	require.NoError(t, err)
	cfg.Retention, err = relay.NewRetention(d, relay.RetentionConfig{Targets: []string{"a", "b"}})
	require.NoError(t, err)
	cfg.Archiver, err = relay.NewArchiver(d, relay.ArchiverConfig{Queue: e.Queue()})
	require.NoError(t, err)
	require.Equal(t, []string{"engine", "dispatcher a", "dispatcher b", "ack writer", "retention", "archiver"},
		partNames(partsOf(cfg)))

	// Stats carries the maintenance jobs' progress.
	svc, err := New(cfg)
	require.NoError(t, err)
	_, err = cfg.Archiver.Work(t.Context())
	require.NoError(t, err)
	st, err := svc.Stats(t.Context())
	require.NoError(t, err)
	require.NotNil(t, st.Archiver)
	require.Equal(t, int64(1), st.Archiver.Passes)
	require.NotNil(t, st.Retention)
	require.Zero(t, st.Retention.Passes)
}

func partNames(ps []named) []string {
	names := []string{}
	for _, p := range ps {
		names = append(names, p.name)
	}
	return names
}

// Run starts the engine and dispatchers before the ack writer and maintenance,
// then the jobs, the intake last; on ctx end it stops them in reverse order
// and returns nil. Active is true only while the parts run.
func TestStartStopOrder(t *testing.T) {
	t.Parallel()
	j := &journal{}
	intake, job := newLoop("intake", j), newLoop("job", j)
	s := newTestService(t, j, intake, []*loopPart{job},
		recorders(j, "engine", "dispatcher a", "dispatcher b", "ack writer", "retention", "archiver")...)
	require.False(t, s.Active())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-intake.started
	<-job.started
	require.True(t, s.Active())
	cancel()
	require.NoError(t, <-done)
	require.False(t, s.Active())
	events := j.list()
	require.Equal(t, []string{
		"start engine", "start dispatcher a", "start dispatcher b", "start ack writer", "start retention", "start archiver",
	}, events[:6])
	// The loops run on goroutines launched after every Start returned (the
	// intake launched last); they may begin in either order.
	require.ElementsMatch(t, []string{"start job", "start intake"}, events[6:8])
	require.Equal(t, []string{
		"stop intake", "stop job",
		"stop archiver", "stop retention", "stop ack writer", "stop dispatcher b", "stop dispatcher a", "stop engine",
	}, events[8:])
	require.ErrorContains(t, s.Run(context.Background()), "Run called twice")
}

// A part that fails to start stops the ones already started, in reverse
// order; nothing after it starts and Run returns its error.
func TestStartFailureStopsStarted(t *testing.T) {
	t.Parallel()
	j := &journal{}
	boom := errors.New("schema too old")
	parts := recorders(j, "engine", "dispatcher a", "ack writer", "retention")
	parts[2].startErr = boom
	intake := newLoop("intake", j)
	s := newTestService(t, j, intake, nil, parts...)
	err := s.Run(context.Background())
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "start ack writer")
	require.Equal(t, []string{"start engine", "start dispatcher a", "start ack writer", "stop dispatcher a", "stop engine"}, j.list())
	require.False(t, s.Active())
}

// A job (or the intake) that fails while running stops every part, in
// reverse order, and Run returns its error.
func TestRunningFailureStopsAll(t *testing.T) {
	t.Parallel()
	for _, failing := range []string{"job", "intake"} {
		t.Run(failing, func(t *testing.T) {
			t.Parallel()
			j := &journal{}
			intake, job := newLoop("intake", j), newLoop("job", j)
			boom := fmt.Errorf("%s broke", failing)
			failer := map[string]*loopPart{"job": job, "intake": intake}[failing]
			failer.err = boom
			s := newTestService(t, j, intake, []*loopPart{job}, recorders(j, "engine", "dispatcher a")...)
			done := make(chan error, 1)
			go func() { done <- s.Run(context.Background()) }()
			<-intake.started
			<-job.started
			close(failer.failNow)
			err := <-done
			require.ErrorIs(t, err, boom)
			events := j.list()
			require.Equal(t, []string{"start engine", "start dispatcher a"}, events[:2])
			require.ElementsMatch(t, []string{"start job", "start intake"}, events[2:4])
			require.ElementsMatch(t, []string{"stop intake", "stop job"}, events[4:6], "the failed loop ends by itself")
			require.Equal(t, []string{"stop dispatcher a", "stop engine"}, events[6:])
		})
	}
}

// A job that returns nil has finished; the Service keeps running.
func TestJobFinishing(t *testing.T) {
	t.Parallel()
	j := &journal{}
	intake := newLoop("intake", j)
	finished := make(chan struct{})
	s := newTestService(t, j, intake, nil, recorders(j, "engine")...)
	s.cfg.Jobs = []func(context.Context) error{func(context.Context) error { close(finished); return nil }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-intake.started
	<-finished
	require.True(t, s.Active())
	select {
	case err := <-done:
		t.Fatalf("Run returned %v after a job finished", err)
	default:
	}
	cancel()
	require.NoError(t, <-done)
}

// Prepare runs under the lock before any part; its error stops Run.
func TestPrepare(t *testing.T) {
	t.Parallel()
	j := &journal{}
	s := newTestService(t, j, newLoop("intake", j), nil, recorders(j, "engine")...)
	boom := errors.New("seeding refused")
	s.cfg.Prepare = func(context.Context) error {
		j.add("prepare")
		require.True(t, s.Active(), "Prepare runs while the lock is held")
		return boom
	}
	require.ErrorIs(t, s.Run(context.Background()), boom)
	require.Equal(t, []string{"prepare"}, j.list())
}
