// Command orders is a small app on relay's public API: order webhooks arrive
// over HTTP, are stored durably (deduplicated by their event id) before the
// sender gets an answer, are applied per order strictly in order — the orders
// table and an outbox event change in one transaction — and the events reach a
// Redis stream at least once, in order per order.
//
//	orders --store postgres://localhost/test --redis 127.0.0.1:6379
//	curl -H 'Content-Type: application/json' -d '{"event_id":"e1","order_id":"o1","kind":"created","amount_cents":1250}' localhost:8088/events
//
// It has no authentication, so it listens on a loopback address only:
// relayhttp refuses any other without a token or mutual TLS.
package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayhttp"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relayservice"
	"github.com/relayhq/relay/relaysink/relayredis"
	"github.com/relayhq/relay/relaytype"
)

// Names the app gives its engine parts.
const (
	// Queue is the engine queue the webhooks go into.
	Queue = "orders"
	// Target is the outbox target the Redis dispatcher delivers.
	Target = "redis:orders"
)

//go:embed migration/orders/*.sql
var migrations embed.FS

// Line is the app's own migration line (migration/orders/NNN_name.up.sql),
// applied beside the engine's.
var Line = relaymigrate.Line{Name: "orders", FS: mustSub(migrations, "migration")}

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // dir is a literal embedded above
	}
	return sub
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	flags := flag.NewFlagSet("orders", flag.ContinueOnError)
	store := flags.String("store", "postgres://127.0.0.1:5432/test", "PostgreSQL URL of the engine and the orders table")
	redisAddr := flags.String("redis", "127.0.0.1:6379", "Redis server the order events go to")
	stream := flags.String("stream", "orders.events", "Redis stream of the order events")
	addr := flags.String("addr", "127.0.0.1:8088", "HTTP listen address (loopback only; :PORT means 127.0.0.1:PORT)")
	instance := flags.String("instance-id", "", "lease owner name of this process (default: a random one)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	d, err := relaypgx.Open(ctx, *store)
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d), Line); err != nil {
		return err
	}
	app, err := NewApp(d, AppConfig{RedisAddr: *redisAddr, Stream: *stream, InstanceID: *instance, Logger: log})
	if err != nil {
		return err
	}
	defer app.sink.Close(context.Background())
	srv, err := relayhttp.Listen(relayhttp.Config{Name: "--addr", Addr: *addr, Handler: newHandler(app), Logger: log})
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	fmt.Printf("orders: listening on %s\n", srv.URL())

	// The service runs the engine and the dispatcher until ctx ends; the
	// HTTP server only enqueues, so it may answer before they started.
	ran := make(chan error, 1)
	go func() { ran <- app.Service.Run(ctx) }()
	select {
	case err = <-ran:
		stop()
	case err = <-served:
		stop()
		err = errors.Join(err, <-ran)
	case <-ctx.Done():
		err = <-ran
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(err, srv.Shutdown(stopCtx))
}

// AppConfig configures NewApp.
type AppConfig struct {
	RedisAddr, Stream, InstanceID string
	Clock                         relaytype.Clock
	Logger                        *slog.Logger
}

// App is the orders app's parts: the engine, the dispatcher of its events
// to Redis, and the service that runs both.
type App struct {
	Engine     *relay.Engine
	Dispatcher *relay.Dispatcher
	Service    *relayservice.Service
	store      *relaypgx.Driver
	sink       *relayredis.Sink
}

// NewApp builds the app's parts on store d; App.Service.Run runs them.
func NewApp(d *relaypgx.Driver, cfg AppConfig) (*App, error) {
	sink, err := relayredis.New(relayredis.Config{Addr: cfg.RedisAddr})
	if err != nil {
		return nil, err
	}
	engine, err := relay.NewEngine(d, relay.Config{
		Queue:      Queue,
		Mode:       relay.ModePerKey,
		Handler:    &handler{stream: cfg.Stream},
		InstanceID: cfg.InstanceID,
		Clock:      cfg.Clock,
		Logger:     cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	x, err := relay.NewDispatcher(d, sink, relay.DispatcherConfig{Target: Target, Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	// Shared: per-key claims are leased message by message, so several
	// processes may serve the same orders; the dispatcher keeps one active
	// instance per target by itself.
	svc, err := relayservice.New(relayservice.Config{Driver: d, Engine: engine, Dispatchers: []*relay.Dispatcher{x},
		Shared: true, Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &App{Engine: engine, Dispatcher: x, Service: svc, store: d, sink: sink}, nil
}

// handler applies one order event inside the engine's transaction.
type handler struct{ stream string }

func (h *handler) Handle(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
	ev, err := ParseEvent(d.Message.Payload)
	if err != nil {
		return relay.Dead(relaytype.ClassMalformed, err)
	}
	cur, err := loadOrder(ctx, tx, ev.OrderID)
	if err != nil {
		return relay.Retry(relaytype.ClassInfra, err)
	}
	next, err := Apply(cur, ev)
	if errors.Is(err, ErrRejected) {
		return relay.Skip(err.Error())
	}
	if _, err := tx.Exec(ctx, `INSERT INTO orders (order_id, status, amount_cents, version, last_event_id, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (order_id) DO UPDATE SET status = $2, amount_cents = $3, version = $4, last_event_id = $5, updated_at = $6`,
		next.ID, next.Status, next.AmountCents, next.Version, next.LastEventID, d.Message.EnqueuedAt); err != nil {
		return relay.Retry(relaytype.ClassInfra, err)
	}
	body, err := json.Marshal(next)
	if err != nil {
		return relay.Retry(relaytype.ClassInternal, err)
	}
	if _, err := relay.AppendEventsTx(ctx, tx, &relay.OutboxEvent{
		ID: "order-event:" + ev.EventID, Target: Target, Topic: h.stream, Key: ev.OrderID, Payload: body,
	}); err != nil {
		return relay.Retry(relaytype.ClassInfra, err)
	}
	return relay.Succeeded()
}

// loadOrder reads the order's row under a row lock, or nil when absent.
func loadOrder(ctx context.Context, tx relay.Tx, id string) (*Order, error) {
	o := &Order{ID: id}
	err := tx.QueryRow(ctx, `SELECT status, amount_cents, version, last_event_id FROM orders WHERE order_id = $1 FOR UPDATE`, id).
		Scan(&o.Status, &o.AmountCents, &o.Version, &o.LastEventID)
	if errors.Is(err, relaytype.ErrNotFound) {
		return nil, nil
	}
	return o, err
}
