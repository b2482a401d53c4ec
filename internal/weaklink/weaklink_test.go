package weaklink_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/weaklink"
	"github.com/relayhq/relay/relayclock"
)

// clock measures the real transfers: weaklink runs in real time.
var clock = relayclock.System{}

// server is a target: handle runs per connection; it is closed with the test.
func server(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

func echo(c net.Conn) { _, _ = io.Copy(c, c) }

// start runs a proxy for cfg and stops it with the test.
func start(t *testing.T, cfg weaklink.Config) (*weaklink.Proxy, string) {
	t.Helper()
	p, err := weaklink.New(cfg)
	require.NoError(t, err)
	addr, err := p.Start(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, p.Stop(ctx))
	})
	return p, addr
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// TestThroughputAddsLatency: 256 KiB each way at 128 KiB/s per direction
// takes 2 s ± 15 %, plus the one-way latency once, not once per chunk.
func TestThroughputAddsLatency(t *testing.T) {
	t.Parallel()
	const rate, size, latency = 128 << 10, 256 << 10, 300 * time.Millisecond
	down := payload(size)
	gotUp := make(chan []byte, 1)
	target := server(t, func(c net.Conn) {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := io.ReadAll(c)
			gotUp <- b
		}()
		_, _ = c.Write(down)
		_ = c.(*net.TCPConn).CloseWrite()
		wg.Wait()
	})
	p, addr := start(t, weaklink.Config{Target: target, Rate: rate, Latency: latency})
	c := dial(t, addr)

	began := clock.Now()
	var gotDown []byte
	var downTook time.Duration
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		gotDown, _ = io.ReadAll(c)
		downTook = clock.Now().Sub(began)
	}()
	_, err := c.Write(payload(size))
	require.NoError(t, err)
	require.NoError(t, c.CloseWrite())
	up := <-gotUp
	upTook := clock.Now().Sub(began)
	<-readDone

	require.True(t, bytes.Equal(payload(size), up), "up: every byte, in order")
	require.True(t, bytes.Equal(down, gotDown), "down: every byte, in order")
	want := time.Duration(size)*time.Second/rate + latency
	t.Logf("up %s, down %s, want ~%s", upTook, downTook, want)
	for name, took := range map[string]time.Duration{"up": upTook, "down": downTook} {
		require.InEpsilon(t, want.Seconds(), took.Seconds(), 0.15, "%s took %s, want ~%s", name, took, want)
	}
	st := p.Stats()
	require.Equal(t, int64(size), st.BytesUp)
	require.Equal(t, int64(size), st.BytesDown)
	require.Equal(t, int64(1), st.Connections)
}

func TestPingPongSeesTheRoundTrip(t *testing.T) {
	t.Parallel()
	const latency = 40 * time.Millisecond
	_, addr := start(t, weaklink.Config{Target: server(t, echo), Latency: latency, Rate: 64 << 10})
	c := dial(t, addr)
	buf := make([]byte, 1)
	for i := range 5 {
		began := clock.Now()
		_, err := c.Write([]byte{byte(i)})
		require.NoError(t, err)
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err)
		rtt := clock.Now().Sub(began)
		require.Equal(t, byte(i), buf[0])
		require.GreaterOrEqual(t, rtt, 2*latency)
		require.Less(t, rtt, 2*latency+200*time.Millisecond, "latency is added once each way")
	}
}

// cutRun pushes 256 KiB through a proxy that cuts every connection, and
// returns what the proxy delivered before the cut.
func cutRun(t *testing.T, seed int64) int64 {
	t.Helper()
	p, addr := start(t, weaklink.Config{Target: server(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }),
		CutProbability: 1, CutWithin: 32 << 10, Seed: seed})
	var delivered []int64
	for range 3 {
		before := p.Stats().BytesUp
		c := dial(t, addr)
		_, err := c.Write(payload(256 << 10))
		if err == nil {
			_, err = c.Read(make([]byte, 1)) // the cut shows as a reset or EOF
		}
		require.Error(t, err)
		require.Eventually(t, func() bool { return p.Stats().Cuts == int64(len(delivered)+1) }, 5*time.Second, time.Millisecond)
		delivered = append(delivered, p.Stats().BytesUp-before)
	}
	for _, n := range delivered {
		require.Positive(t, n)
		require.LessOrEqual(t, n, int64(32<<10), "cut within CutWithin")
	}
	st := p.Stats()
	require.Equal(t, int64(3), st.Connections)
	return delivered[0] + delivered[1]<<20 + delivered[2]<<40
}

func TestCutEveryConnectionReproducibly(t *testing.T) {
	t.Parallel()
	require.Equal(t, cutRun(t, 7), cutRun(t, 7), "the seed fixes where the cuts fall")
}

func TestSetDownRefusesAndCuts(t *testing.T) {
	t.Parallel()
	p, addr := start(t, weaklink.Config{Target: server(t, echo)})
	c := dial(t, addr)
	_, err := c.Write([]byte("hi"))
	require.NoError(t, err)
	_, err = io.ReadFull(c, make([]byte, 2))
	require.NoError(t, err)

	p.SetDown(true)
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the open connection is cut")
	require.Equal(t, int64(1), p.Stats().Cuts)

	refused, err := net.Dial("tcp", addr)
	if err == nil { // the reset may come before or after the handshake completes
		_, err = refused.Read(make([]byte, 1))
		refused.Close()
	}
	require.Error(t, err, "a new connection is reset at once")
	require.Equal(t, int64(1), p.Stats().Refused)

	p.SetDown(false)
	c = dial(t, addr)
	_, err = c.Write([]byte("ok"))
	require.NoError(t, err)
	got := make([]byte, 2)
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, "ok", string(got))
	require.Equal(t, int64(2), p.Stats().Connections)
}

func TestStopLeavesNoGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	target := server(t, echo)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := weaklink.New(weaklink.Config{Target: target, Rate: 8 << 10, Latency: 50 * time.Millisecond})
	require.NoError(t, err)
	addr, err := p.Start(ctx)
	require.NoError(t, err)
	var conns []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = c.Write(payload(64 << 10)) // more than the rate lets through for a while
		require.NoError(t, err)
	}
	cancel() // Start's ctx ends the proxy
	stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	require.NoError(t, p.Stop(stopCtx))
	for _, c := range conns {
		_, err := c.Read(make([]byte, 1<<20))
		for err == nil {
			_, err = c.Read(make([]byte, 1<<20))
		}
		require.False(t, errors.Is(err, context.DeadlineExceeded))
		c.Close()
	}
	_, err = p.Start(context.Background())
	require.Error(t, err, "a stopped proxy does not start again")
	// The target's handlers end once the proxy's side is closed; then only
	// the target's accept loop and Eventually's own condition goroutine are
	// added to what ran before.
	if !assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= base+2 }, 5*time.Second, 10*time.Millisecond) {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d, before: %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for cfg, want := range map[*weaklink.Config]string{
		{}:                                 "Target is empty",
		{Target: "x", Rate: -1}:            "Rate is negative",
		{Target: "x", Latency: -1}:         "Latency is negative",
		{Target: "x", CutProbability: 1.5}: "CutProbability 1.5 is outside [0, 1]",
		{Target: "x", CutWithin: -1}:       "CutWithin is negative",
	} {
		_, err := weaklink.New(*cfg)
		require.ErrorContains(t, err, want)
	}
}
