package load_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/load"
	"github.com/relayhq/relay/relayclock"
)

var creds = load.Credentials{APIKey: "LoadTestKey0000000001", HMACSecret: []byte("0123456789abcdef0123456789abcdef")}

// fakeAPI answers POST /v1/messages like the API: it verifies the signature
// with admit.Verify and parses the body with admit.ParseRequest, then
// answers 202 {message_id, duplicate:false}, or what answer says.
type fakeAPI struct {
	t      *testing.T
	delay  time.Duration    // the answer's latency (synctest: fake time)
	answer func(i int) int  // status for the i-th request; nil: 202
	mu     sync.Mutex       // guards the fields below
	at     []time.Time      // arrival times
	reqs   []*admit.Request // bodies
	ids    map[string]bool  // client_msg_ids seen
	inFl   int              // requests in the handler now
	maxIn  int              // most at once
	bad    []string         // problems
	n      int              // requests so far
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	i := f.n
	f.n++
	f.at = append(f.at, time.Now())
	f.inFl++
	f.maxIn = max(f.maxIn, f.inFl)
	ok := r.Method == http.MethodPost && r.URL.Path == "/v1/messages" && r.Header.Get(admit.HeaderKey) == creds.APIKey &&
		admit.Verify(creds.HMACSecret, r.Method, r.URL.EscapedPath(), r.Header.Get(admit.HeaderTimestamp), body,
			r.Header.Get(admit.HeaderSignature))
	if !ok {
		f.bad = append(f.bad, "request with a bad signature")
	}
	req, err := admit.ParseRequest(body)
	if err != nil {
		f.bad = append(f.bad, err.Error())
	} else {
		if f.ids[req.ClientMsgID] {
			f.bad = append(f.bad, "client_msg_id used twice")
		}
		f.ids[req.ClientMsgID] = true
		f.reqs = append(f.reqs, req)
	}
	f.mu.Unlock()
	time.Sleep(f.delay) // inside a synctest bubble: fake time, the answer's latency
	f.mu.Lock()
	f.inFl--
	f.mu.Unlock()
	status := http.StatusAccepted
	if f.answer != nil {
		status = f.answer(i)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"message_id": i + 1, "duplicate": status == http.StatusOK})
}

func newFake(t *testing.T) *fakeAPI { return &fakeAPI{t: t, ids: map[string]bool{}} }

// handlerTransport serves requests with a handler in the calling goroutine:
// no network, so a synctest bubble sees every wait.
type handlerTransport struct{ h http.Handler }

func (h handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	h.h.ServeHTTP(w, r)
	return w.Result(), nil
}

var numberRE = regexp.MustCompile(`^1[3-9][0-9]{9}$`)

// TestRunPaced: in a synctest bubble (fake time), 50/s for 2 s is exactly
// 100 requests, request i arriving exactly i × 20 ms after the first; every
// one signed and well formed, one number each, all distinct and never
// blacklisted, 10 % long content messages; answers counted by status and
// latencies measured on the clock.
func TestRunPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t)
		f.delay = 5 * time.Millisecond
		f.answer = func(i int) int {
			switch {
			case i%25 == 3:
				return http.StatusOK
			case i%50 == 7:
				return http.StatusServiceUnavailable
			}
			return http.StatusAccepted
		}
		res, err := load.Run(t.Context(), load.Config{URL: "http://api.test", Credentials: creds, TPS: 50, Duration: 2 * time.Second,
			Clock: relayclock.System{}, Client: &http.Client{Transport: handlerTransport{f}},
			Blacklist: []string{}})
		require.NoError(t, err)
		require.Empty(t, f.bad)
		require.Equal(t, 100, res.Due)
		require.Equal(t, 100, res.Sent)
		require.Equal(t, 0, res.Dropped)
		require.Equal(t, 10, res.Long)
		require.Equal(t, 4, res.Duplicates)
		require.Equal(t, map[int]int{503: 2}, res.Errors)
		require.Equal(t, 94, res.Accepted)
		require.Equal(t, load.Summary{P50: 5 * time.Millisecond, P95: 5 * time.Millisecond, P99: 5 * time.Millisecond,
			Max: 5 * time.Millisecond}, res.Latency)
		require.InDelta(t, 50, res.SendRate, 0.001)
		require.Equal(t, 1985*time.Millisecond, res.Elapsed, "the last request at 1.98 s, answered 5 ms later")
		for i, at := range f.at {
			require.Equal(t, time.Duration(i)*20*time.Millisecond, at.Sub(f.at[0]), "request %d", i)
		}
		numbers := map[string]bool{}
		long := 0
		for _, r := range f.reqs {
			require.Len(t, r.Numbers, 1)
			require.Regexp(t, numberRE, r.Numbers[0])
			require.False(t, numbers[r.Numbers[0]], "number used twice")
			numbers[r.Numbers[0]] = true
			if r.Content != "" {
				long++
				require.True(t, strings.HasPrefix(r.Content, "【云通科技】"))
				require.Equal(t, 146, len([]rune(r.Content)))
			} else {
				require.Equal(t, "otp", r.Template)
				require.Equal(t, "云通科技", r.SignName)
			}
		}
		require.Equal(t, 10, long)
		t.Log(res)
	})
}

// TestRunDropsOverBound: with at most 2 requests in flight and answers
// taking 50 ms, some of the 100 due requests find the bound reached and are
// dropped, never sent; due = sent + dropped, and never more than 2 at once.
func TestRunDropsOverBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t)
		f.delay = 50 * time.Millisecond
		res, err := load.Run(t.Context(), load.Config{URL: "http://api.test", Credentials: creds, TPS: 50, Duration: 2 * time.Second,
			MaxInFlight: 2, LongShare: -1, Clock: relayclock.System{}, Client: &http.Client{Transport: handlerTransport{f}}})
		require.NoError(t, err)
		require.Empty(t, f.bad)
		require.Equal(t, 100, res.Due)
		require.Equal(t, res.Due, res.Sent+res.Dropped)
		require.Positive(t, res.Dropped)
		require.Equal(t, res.Sent, f.n)
		require.Equal(t, res.Sent, res.Accepted)
		require.Equal(t, 0, res.Long)
		require.LessOrEqual(t, f.maxIn, 2)
	})
}

// TestRunHTTP: over a real HTTP server and the system clock, 200/s for
// 250 ms sends exactly 50 signed requests (the count follows from the
// schedule, not from timing) and every one is accepted.
func TestRunHTTP(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	res, err := load.Run(t.Context(), load.Config{URL: srv.URL, Credentials: creds, TPS: 200, Duration: 250 * time.Millisecond,
		Clock: relayclock.System{}})
	require.NoError(t, err)
	require.Empty(t, f.bad)
	require.Equal(t, 50, res.Sent+res.Dropped)
	require.Equal(t, res.Sent, res.Accepted)
	require.Equal(t, 5, res.Long)
	require.Positive(t, res.Latency.Max)
}

func TestConfigRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []load.Config{
		{Credentials: creds, TPS: 1, Duration: time.Second, Clock: relayclock.System{}},
		{URL: "http://x", TPS: 1, Duration: time.Second, Clock: relayclock.System{}},
		{URL: "http://x", Credentials: creds, Duration: time.Second, Clock: relayclock.System{}},
		{URL: "http://x", Credentials: creds, TPS: 1, Clock: relayclock.System{}},
		{URL: "http://x", Credentials: creds, TPS: 1, Duration: time.Second},
		{URL: "http://x", Credentials: creds, TPS: 1, Duration: time.Second, Clock: relayclock.System{}, Prefixes: []string{"1x3"}},
	} {
		_, err := load.Run(t.Context(), c)
		require.Error(t, err)
	}
}

func TestParseCredentials(t *testing.T) {
	t.Parallel()
	c, err := load.ParseCredentials([]byte("# relay sms app yuntong/otp, created 2026-12-02T02:00:00Z\napi_key=AbCdEf0123456789\nhmac_secret=3031323334353637383930313233343536373839303132333435363738393031\n"))
	require.NoError(t, err)
	require.Equal(t, "AbCdEf0123456789", c.APIKey)
	require.Equal(t, []byte("01234567890123456789012345678901"), c.HMACSecret)
	require.NotContains(t, c.String(), "3031")
	_, err = load.ParseCredentials([]byte("api_key=x\nhmac_secret=zz-secret\n"))
	require.ErrorContains(t, err, "not hex")
	require.NotContains(t, err.Error(), "zz-secret")
	_, err = load.ParseCredentials([]byte("api_key=x\n"))
	require.Error(t, err)
}

// TestPercentiles: nearest rank over the recorded values.
func TestPercentiles(t *testing.T) {
	t.Parallel()
	var l load.Latencies
	require.Equal(t, load.Summary{}, l.Summary())
	for i := 100; i >= 1; i-- { // 1 ms … 100 ms, added out of order
		l.Add(time.Duration(i) * time.Millisecond)
	}
	require.Equal(t, 100, l.Len())
	require.Equal(t, load.Summary{P50: 50 * time.Millisecond, P95: 95 * time.Millisecond, P99: 99 * time.Millisecond,
		Max: 100 * time.Millisecond}, l.Summary())
	require.Equal(t, time.Millisecond, l.Percentile(0.5))
	require.Equal(t, time.Millisecond, l.Percentile(1))
	require.Equal(t, 2*time.Millisecond, l.Percentile(1.5))

	var one load.Latencies
	one.Add(7 * time.Millisecond)
	require.Equal(t, load.Summary{P50: 7 * time.Millisecond, P95: 7 * time.Millisecond, P99: 7 * time.Millisecond,
		Max: 7 * time.Millisecond}, one.Summary())

	var ten load.Latencies // 10 values: p95 and p99 are the largest
	for i := 1; i <= 10; i++ {
		ten.Add(time.Duration(i) * time.Second)
	}
	s := ten.Summary()
	require.Equal(t, 5*time.Second, s.P50)
	require.Equal(t, 10*time.Second, s.P95)
	require.Equal(t, 10*time.Second, s.P99)
}

// TestNumbersSkipBlacklist: counting up from 13800000000 (the offset wraps
// to 0), the fixture's blacklisted 13800000000 is skipped.
func TestNumbersSkipBlacklist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t)
		res, err := load.Run(t.Context(), load.Config{URL: "http://api.test", Credentials: creds, TPS: 10, Duration: 300 * time.Millisecond,
			Prefixes: []string{"138"}, NumberOffset: 100_000_000, LongShare: -1, Clock: relayclock.System{},
			Client: &http.Client{Transport: handlerTransport{f}}})
		require.NoError(t, err)
		require.Equal(t, 3, res.Accepted)
		var got []string
		for _, r := range f.reqs {
			got = append(got, r.Numbers[0])
		}
		require.Equal(t, []string{"13800000001", "13800000002", "13800000003"}, got)
	})
}
