package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// Example_fifo runs a global-FIFO queue on the embedded SQLite store: the
// handler's write and the message's terminal state commit in one transaction,
// a failing head blocks the queue until its backoff passes, and the engine is
// driven round by round with Work on a fake clock.
func Example_fifo() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "relay-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	store, err := relaysqlite.Open(ctx, filepath.Join(dir, "relay.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if _, err := relaymigrate.Up(ctx, store, relayclock.System{}, relaymigrate.EngineLineOf(store)); err != nil {
		panic(err)
	}
	if _, err := store.GetExecutor().Exec(ctx, "CREATE TABLE flight (msg_id BIGINT PRIMARY KEY, body TEXT)"); err != nil {
		panic(err)
	}

	clock := relayclock.NewFake(time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC))
	failedOnce := false
	engine, err := relay.NewEngine(store, relay.Config{
		Queue:  "flights",
		Mode:   relay.ModeFIFO,
		Clock:  clock,
		Logger: slog.New(slog.DiscardHandler),
		Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
			if d.Message.ID == 2 && !failedOnce {
				failedOnce = true
				fmt.Printf("message %d: broker down, retry later\n", d.Message.ID)
				return relay.Retry(relaytype.ClassInfra, errors.New("broker down"))
			}
			if _, err := tx.Exec(ctx, "INSERT INTO flight (msg_id, body) VALUES ($1, $2)", d.Message.ID, string(d.Message.Payload)); err != nil {
				return relay.Retry(relaytype.ClassInfra, err)
			}
			fmt.Printf("message %d: applied %s\n", d.Message.ID, d.Message.Payload)
			return relay.Succeeded()
		}),
	})
	if err != nil {
		panic(err)
	}

	// Ids decide the order, not the order of enqueueing.
	if _, err := engine.Enqueue(ctx,
		&relay.EnqueueParams{ID: 3, Payload: []byte("CA1234 landed")},
		&relay.EnqueueParams{ID: 1, Payload: []byte("CA1234 scheduled")},
		&relay.EnqueueParams{ID: 2, Payload: []byte("CA1234 departed")},
	); err != nil {
		panic(err)
	}

	n, _ := engine.Work(ctx) // 1 succeeds, 2 fails and blocks 3
	fmt.Println("round 1 decisions:", n)
	clock.Advance(time.Second) // the first backoff level
	n, _ = engine.Work(ctx)
	fmt.Println("round 2 decisions:", n)

	st, _ := engine.Stats(ctx)
	fmt.Println("succeeded:", st.Counts[relaytype.StateSucceeded], "backlog:", st.Backlog())
	// Output:
	// message 1: applied CA1234 scheduled
	// message 2: broker down, retry later
	// round 1 decisions: 2
	// message 2: applied CA1234 departed
	// message 3: applied CA1234 landed
	// round 2 decisions: 2
	// succeeded: 3 backlog: 0
}
