package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/weaklink"
	"github.com/relayhq/relay/relayclock"
)

func TestBackoffFullJitterDoublesToCap(t *testing.T) {
	b := Backoff{Base: time.Second, Cap: 5 * time.Minute, Rand: rand.New(rand.NewPCG(1, 2))}
	for attempt, ceil := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		var most time.Duration
		for range 2000 {
			d := b.Delay(attempt, errors.New("network"))
			if d < 0 || d > ceil {
				t.Fatalf("attempt %d: delay %s outside [0, %s]", attempt, d, ceil)
			}
			most = max(most, d)
		}
		if most < ceil*9/10 {
			t.Fatalf("attempt %d: the largest of 2000 delays is %s; full jitter should reach near %s", attempt, most, ceil)
		}
	}
	for range 1000 {
		if d := b.Delay(40, nil); d > 5*time.Minute {
			t.Fatalf("delay %s above the cap", d)
		}
	}
}

func TestBackoffHonoursRetryAfter(t *testing.T) {
	b := Backoff{Rand: rand.New(rand.NewPCG(1, 2))}
	err := &RequestError{Status: 429, Retryable: true, RetryAfter: 7 * time.Second}
	if d := b.Delay(0, err); d != 7*time.Second {
		t.Fatalf("Retry-After 7s gave %s", d)
	}
	err.RetryAfter = time.Hour
	if d := b.Delay(0, err); d != BackoffCapDefault {
		t.Fatalf("a Retry-After beyond the cap gave %s, want the cap", d)
	}
}

// TestLinkBack: a request that gets no answer marks the link down; the
// next that gets one (whatever its status) closes LinkBack's channel, so
// loops backing off after the outage resume at once.
func TestLinkBack(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/sync/v1/heartbeat" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		b, _ := proto.Marshal(&pb.HeartbeatResponse{})
		w.Header().Set("Content-Type", shore.ContentType)
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	p, err := weaklink.New(weaklink.Config{Target: srv.Listener.Addr().String()})
	require.NoError(t, err)
	addr, err := p.Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	tr, err := NewTransport("http://"+addr, nil, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	back := tr.LinkBack()
	_, err = tr.Heartbeat(t.Context(), &pb.Heartbeat{})
	require.NoError(t, err)
	require.False(t, closed(back), "the link was never down")

	p.SetDown(true)
	_, err = tr.Heartbeat(t.Context(), &pb.Heartbeat{})
	var re *RequestError
	require.ErrorAs(t, err, &re)
	require.Zero(t, re.Status, "no answer")
	back = tr.LinkBack()
	require.False(t, closed(back))

	p.SetDown(false)
	_, err = tr.Receipts(t.Context(), "", 10) // answered 404: the link works
	require.ErrorAs(t, err, &re)
	require.Equal(t, http.StatusNotFound, re.Status)
	require.True(t, closed(back), "an answer after the outage")
	require.False(t, closed(tr.LinkBack()), "a new outage needs a new channel")
}

// TestBackoffEndsWhenTheLinkIsBack: a loop backing off after a request
// that got no answer resumes when another request gets one — once per run
// of failures; a refusal or an overload (an answer) waits its backoff.
func TestBackoffEndsWhenTheLinkIsBack(t *testing.T) {
	t.Parallel()
	clock := relayclock.NewFake(time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC))
	tr, err := NewTransport("http://127.0.0.1:1", nil, time.Second)
	require.NoError(t, err)
	c := &Client{cfg: Config{Clock: clock, Transport: tr}}
	noAnswer := &RequestError{Retryable: true, Err: errors.New("connection reset")}
	wait := func(err error, woken *bool) <-chan bool {
		done := make(chan bool, 1)
		go func() { done <- c.backoff(t.Context(), 5*time.Minute, err, woken) }()
		require.Eventually(t, func() bool { return clock.Waiters() > 0 }, 10*time.Second, time.Millisecond)
		return done
	}
	outage := func() { tr.linkSeen(false); tr.linkSeen(true) }
	// stillWaiting fails if done is answered soon: the backoff goes on.
	stillWaiting := func(done <-chan bool, why string) {
		select {
		case <-done:
			t.Fatal(why)
		case <-time.After(50 * time.Millisecond):
		}
	}

	woken := false
	done := wait(noAnswer, &woken)
	outage() // another loop's request is answered
	require.True(t, <-done)
	require.True(t, woken)

	// The next failure of the same run waits its backoff whatever the link.
	done = wait(noAnswer, &woken)
	outage()
	stillWaiting(done, "woken twice in one run of failures")
	clock.Advance(5 * time.Minute)
	require.True(t, <-done)

	// An answer (here 503) is not an outage: its backoff is waited out.
	woken = false
	done = wait(&RequestError{Status: 503, Retryable: true}, &woken)
	outage()
	stillWaiting(done, "an overloaded shore's backoff was cut short")
	clock.Advance(5 * time.Minute)
	require.True(t, <-done)
	require.False(t, woken)
}
