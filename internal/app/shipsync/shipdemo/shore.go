package shipdemo

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaymigrate"
)

// ShoreRule is one table the shore accepts from the node: rule ID version
// 1 writes Table (the same name on both sides) with Columns, keyed by "id".
type ShoreRule struct {
	ID, Table string
	Columns   []string
	// Conflict is how the rule's conflicts are decided (zero: MANUAL).
	Conflict shore.ConflictPolicy
}

// DemoHeartbeat is the heartbeat interval of a demo shore.
const DemoHeartbeat = 2 * time.Second

// ShoreOptions configure StartShore.
type ShoreOptions struct {
	// PostgresURL is the shore's PostgreSQL (migrated by StartShore).
	PostgresURL string
	// TargetDSN is the shore's business database.
	TargetDSN string
	// PKIDir is where the development PKI is made: the CA, the shore's
	// certificate and the node's (pki.NodeFiles("node-" + Node)).
	PKIDir string
	// Node is the node registered and allowed Rules.
	Node  string
	Rules []ShoreRule
	// HeartbeatInterval is the interval the shore asks its nodes for
	// (default DemoHeartbeat: short, so the backlog and ETA a console shows
	// follow a demo that lasts seconds).
	HeartbeatInterval time.Duration
	// Addr is the data API's address (default 127.0.0.1:0).
	Addr string
	// Limits of the data API (zero fields: the shore's defaults).
	Limits shore.Limits
	// UrgentRules are applied on the urgent queue (Inbox.SetUrgentRules).
	UrgentRules []string
	// DeferApply leaves the applier stopped until Shore.StartApplier: the
	// shore receives (and answers RECEIVED) but applies nothing, as when
	// its applier runs on other machines than the one measured.
	DeferApply bool
	Logger     *slog.Logger
}

// Shore is an in-process shore: the data API over mutual TLS and an
// applier writing to the target.
type Shore struct {
	// URL is the data API's base URL.
	URL string
	// PG is the shore's PostgreSQL.
	PG *relaypgx.Driver
	// PKI is the PKI directory.
	PKI pki.Dir
	// Handler serves the data API (its metrics count what it received).
	Handler *shore.Handler
	stops   []func()

	applier  *apply.Applier
	applying bool
}

// StartApplier starts the applier of a shore started with DeferApply (at
// once otherwise); a second call does nothing.
func (s *Shore) StartApplier(ctx context.Context) error {
	if s.applying {
		return nil
	}
	if err := s.applier.Start(ctx); err != nil {
		return err
	}
	s.applying = true
	return nil
}

// Close stops the server and the applier and closes the databases.
func (s *Shore) Close() {
	for _, f := range slices.Backward(s.stops) {
		f()
	}
	s.stops = nil
}

// SetupShore migrates the shore's PostgreSQL, makes the PKI in
// o.PKIDir and registers the node and the rules: all a shore process
// (`relay shipsync shore`) needs. The caller closes the driver.
func SetupShore(ctx context.Context, o ShoreOptions) (*relaypgx.Driver, error) {
	d, err := relaypgx.Open(ctx, o.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("shipdemo: postgres: %w", err)
	}
	if err := setupShore(ctx, d, o); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

func setupShore(ctx context.Context, d *relaypgx.Driver, o ShoreOptions) error {
	clock := relayclock.System{}
	if _, err := relaymigrate.Up(ctx, d, clock, shore.MigrationLines(d)...); err != nil {
		return err
	}
	p := pki.Dir{Path: o.PKIDir, Clock: clock}
	if _, err := p.InitCA(); err != nil {
		return err
	}
	if _, err := p.IssueServer([]string{"127.0.0.1", "localhost"}); err != nil {
		return err
	}
	cert, err := p.IssueNode(o.Node, "")
	if err != nil {
		return err
	}
	reg := shore.NewRegistry(d.Pool(), clock)
	who := shore.Audit{Actor: "shipsync demo", Reason: "demo set-up"}
	if _, err := reg.Add(ctx, cert, who); err != nil {
		return err
	}
	for _, r := range o.Rules {
		if err := reg.AllowRule(ctx, o.Node, r.ID, 1, who); err != nil {
			return err
		}
		if err := reg.RegisterRule(ctx, shore.Rule{ID: r.ID, Version: 1, SourceTable: r.Table, TargetTable: r.Table,
			KeyColumns: []string{"id"}, Columns: r.Columns, InsertOverTombstone: true, Conflict: r.Conflict}, who); err != nil {
			return err
		}
	}
	return nil
}

// StartShore migrates the shore's PostgreSQL, makes the PKI, registers the
// node and the rules (SetupShore), and serves the data API with an applier.
func StartShore(ctx context.Context, o ShoreOptions) (s *Shore, err error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := relayclock.System{}
	s = &Shore{PKI: pki.Dir{Path: o.PKIDir, Clock: clock}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	d, err := relaypgx.Open(ctx, o.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("shipdemo: postgres: %w", err)
	}
	s.stops = append(s.stops, func() { _ = d.Close() })
	s.PG = d
	if err := setupShore(ctx, d, o); err != nil {
		return nil, err
	}
	reg := shore.NewRegistry(d.Pool(), clock)
	p := s.PKI
	codec, err := wire.NewCodec(wire.Config{})
	if err != nil {
		return nil, err
	}
	inbox, err := shore.NewInbox(d, codec, clock)
	if err == nil {
		inbox.SetUrgentRules(o.UrgentRules)
	}
	if err != nil {
		return nil, err
	}
	target, err := apply.OpenTarget(o.TargetDSN)
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { _ = target.Close() })
	if err := target.EnsureLedger(ctx); err != nil {
		return nil, err
	}
	a, err := apply.New(apply.Config{Driver: d, Target: target, Clock: clock, InstanceID: "shipdemo-shore", Logger: log})
	if err != nil {
		return nil, err
	}
	s.applier = a
	if !o.DeferApply {
		if err := s.StartApplier(ctx); err != nil {
			return nil, err
		}
	}
	s.stops = append(s.stops, func() {
		if !s.applying {
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Stop(sctx); err != nil {
			log.Warn("shipdemo: applier stop", "error", err)
		}
	})
	inbox.OnRelease(a.Notify)
	h, err := shore.NewHandler(shore.Config{Registry: reg, Inbox: inbox, Codec: codec, Clock: clock, Logger: log,
		Limits: o.Limits, HeartbeatInterval: cmp.Or(o.HeartbeatInterval, DemoHeartbeat)})
	if err != nil {
		return nil, err
	}
	s.Handler = h
	sc, err := p.ServerCert()
	if err != nil {
		return nil, err
	}
	cas, err := p.CAPool()
	if err != nil {
		return nil, err
	}
	srv, err := relayhttp.Listen(relayhttp.Config{Name: "shore", Addr: cmp.Or(o.Addr, "127.0.0.1:0"), Handler: h,
		TLS: shore.ServerTLS(sc, cas, clock), Logger: log, MaxBodyBytes: int64(codec.Config().MaxBytes) + 128<<10})
	if err != nil {
		return nil, err
	}
	go func() { _ = srv.Serve() }()
	s.stops = append(s.stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	s.URL = srv.URL()
	return s, nil
}
