package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/crash"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relayredis"
	"github.com/relayhq/relay/relaytype"
)

// script is what the test sends for one order, and what it expects.
type script struct {
	events   []Event
	accepted []string // event ids Apply accepts, in order
	final    Order
}

// newScripts makes n orders: created, paid, then shipped or cancelled, and
// for some a last event the order's state rejects.
func newScripts(r *rand.Rand, n int) []script {
	out := make([]script, n)
	for i := range out {
		oid := fmt.Sprintf("o%03d", i)
		kinds := []string{"created", "paid", "shipped"}
		if r.IntN(3) == 0 {
			kinds = []string{"created", "cancelled"}
		}
		if r.IntN(4) == 0 {
			kinds = append(kinds, "paid") // rejected: the order is past that
		}
		var cur *Order
		for j, k := range kinds {
			ev := Event{EventID: fmt.Sprintf("%s-e%d", oid, j), OrderID: oid, Kind: k}
			if k == "created" {
				ev.AmountCents = int64(100 + r.IntN(10000))
			}
			out[i].events = append(out[i].events, ev)
			if next, err := Apply(cur, ev); err == nil {
				cur = next
				out[i].accepted = append(out[i].accepted, ev.EventID)
			}
		}
		out[i].final = *cur
	}
	return out
}

// send posts ev until the app answers 200 or 202 (the process may be down or
// restarting) and returns the answer.
func send(ctx context.Context, client *http.Client, url string, ev Event) (EnqueueAnswer, int, error) {
	body, _ := json.Marshal(ev)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err == nil {
			var a EnqueueAnswer
			derr := json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusAccepted {
				return a, resp.StatusCode, derr
			}
			if resp.StatusCode < 500 {
				return a, resp.StatusCode, fmt.Errorf("refused: %s", resp.Status)
			}
		}
		select {
		case <-ctx.Done():
			return EnqueueAnswer{}, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond): // the process is restarting
		}
	}
}

// TestCrashReconcile runs the real orders binary, kills it with SIGKILL (and,
// on every other child, at the dispatcher's after-confirm fault point) while
// webhooks keep arriving — each sent until answered, some sent twice on
// purpose — then lets a last child drain and reconciles every row: each order
// exact, each event stored once, each order's events in the Redis stream in
// order with sequences 1..n.
func TestCrashReconcile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "orders")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	storeURL := testdb.PGSchema(t)
	store := testdb.PGDriverAt(t, storeURL)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	require.NoError(t, rdb.Ping(ctx).Err(), "Redis at 127.0.0.1:6379 is required")
	stream := fmt.Sprintf("orders-test-%d", time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(context.Background(), stream) })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	args := []string{"--store", storeURL, "--stream", stream, "--addr", addr, "--instance-id", "orders-crash-test"}
	url := "http://" + addr + "/events"

	r := rand.New(rand.NewPCG(7, 11))
	scripts := newScripts(r, 100)
	// Webhooks arrive at about 30/s, so sending spans every kill.
	pace := time.NewTicker(33 * time.Millisecond)
	defer pace.Stop()
	var (
		sent, resent atomic.Int64
		sendErr      = make(chan error, len(scripts))
		sendersDone  = make(chan struct{})
		work         = make(chan script)
		wg           sync.WaitGroup
	)
	client := &http.Client{Timeout: 2 * time.Second}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				for j, ev := range s.events {
					<-pace.C
					a, _, err := send(ctx, client, url, ev)
					if err != nil {
						sendErr <- fmt.Errorf("%s: %w", ev.EventID, err)
						return
					}
					sent.Add(1)
					if (j+len(s.events))%3 == 0 { // a sender that sends twice
						b, code, err := send(ctx, client, url, ev)
						if err != nil || code != http.StatusOK || !b.Duplicate || b.MessageID != a.MessageID {
							sendErr <- fmt.Errorf("resend of %s: code %d, %+v after %+v: %v", ev.EventID, code, b, a, err)
							return
						}
						resent.Add(1)
					}
				}
			}
		}()
	}
	go func() {
		for _, s := range scripts {
			work <- s
		}
		close(work)
		wg.Wait()
		close(sendersDone)
	}()

	var log strings.Builder
	killed, faultKilled, err := crash.Kills{Binary: bin, Args: args, Kills: 8, FaultProbability: 0.2,
		MinWait: 400 * time.Millisecond, Spread: 800 * time.Millisecond, Rand: r,
		After: func(i int, wait time.Duration, fault bool) {
			fmt.Fprintf(&log, "kill %d after %s %s: %d events sent\n", i+1, wait.Round(time.Millisecond), crash.KillKind(fault), sent.Load())
		}}.Run(ctx)
	require.NoError(t, err, log.String())

	// A producer-only engine on the same store reads the progress.
	probe, err := relay.NewEngine(store, relay.Config{Queue: Queue})
	require.NoError(t, err)
	// A dispatcher that is never started only reads its target's counts.
	idle, err := relayredis.New(relayredis.Config{Addr: "127.0.0.1:6379"})
	require.NoError(t, err)
	defer idle.Close(context.Background())
	probeX, err := relay.NewDispatcher(store, idle, relay.DispatcherConfig{Target: Target})
	require.NoError(t, err)
	settled := func() (bool, error) {
		select {
		case <-sendersDone:
		default:
			return false, nil
		}
		st, err := probe.Stats(ctx)
		if err != nil {
			return false, err
		}
		xs, err := probeX.Stats(ctx)
		if err != nil {
			return false, err
		}
		return st.Backlog() == 0 && xs.Pending == 0, nil
	}
	require.NoError(t, crash.Drain(ctx, bin, args, settled, func() string { return log.String() }))
	close(sendErr)
	for err := range sendErr {
		require.NoError(t, err)
	}
	t.Logf("%d kills (%d at fault points), %d events sent, %d sent twice on purpose\n%s",
		killed, faultKilled, sent.Load(), resent.Load(), log.String())

	// Every event stored exactly once: one message per event id.
	st, err := probe.Stats(ctx)
	require.NoError(t, err)
	var total int
	for _, s := range scripts {
		total += len(s.events)
	}
	require.Equal(t, int64(total), st.Counts[relaytype.StateSucceeded]+st.Counts[relaytype.StateSkipped],
		"messages: %v", st.Counts)
	require.Zero(t, st.Counts[relaytype.StateDead])

	// Every order exact; its version proves each effect applied once.
	for _, s := range scripts {
		var o Order
		require.NoError(t, store.Pool().QueryRow(ctx,
			`SELECT order_id, status, amount_cents, version, last_event_id FROM orders WHERE order_id = $1`, s.final.ID).
			Scan(&o.ID, &o.Status, &o.AmountCents, &o.Version, &o.LastEventID))
		require.Equal(t, s.final, o)
	}

	// Every order's events in the stream, at least once, in order, seq 1..n.
	entries, err := rdb.XRange(ctx, stream, "-", "+").Result()
	require.NoError(t, err)
	got := map[string][]string{}
	seen := map[string]bool{}
	for _, e := range entries {
		id, _ := e.Values[relaysink.HeaderEventID].(string)
		key, _ := e.Values["key"].(string)
		if seen[id] {
			continue // a redelivery after a crash: consumers dedupe by id
		}
		seen[id] = true
		got[key] = append(got[key], id)
		seq, err := strconv.Atoi(e.Values[relaysink.HeaderSeq].(string))
		require.NoError(t, err)
		require.Equal(t, len(got[key]), seq, "event %s of %s", id, key)
	}
	for _, s := range scripts {
		want := make([]string, len(s.accepted))
		for i, id := range s.accepted {
			want[i] = "order-event:" + id
		}
		require.Equal(t, want, got[s.final.ID], "order %s", s.final.ID)
	}
	require.Len(t, got, len(scripts))
}
