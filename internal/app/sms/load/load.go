package load

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of Config.
const (
	// MaxInFlightDefault bounds the requests waiting for an answer; a
	// request due while the bound is reached is dropped (counted, not sent).
	MaxInFlightDefault = 512
	// LongShareDefault is the share of long (three-segment) content
	// messages.
	LongShareDefault = 0.10
	// TimeoutDefault bounds one request.
	TimeoutDefault = 10 * time.Second
	// TemplateDefault, SignNameDefault: the fixture's one-segment OTP
	// template and its approved signature.
	TemplateDefault = "otp"
	SignNameDefault = "云通科技"
)

// LongBodyDefault is the body of a long message: 140 UCS2 characters, so
// with 【云通科技】 the text is 146 characters, three segments of 67.
var LongBodyDefault = strings.Repeat("您的订单已发货，请注意查收。", 10)

// Credentials are an app's API key and HMAC secret. String hides the
// secret.
type Credentials struct {
	APIKey     string
	HMACSecret []byte
}

// String shows the key only.
func (c Credentials) String() string { return "api_key=" + c.APIKey + " hmac_secret=[redacted]" }

// ParseCredentials reads the credentials file `relay sms seed-data` writes
// for an app (lines api_key=KEY and hmac_secret=HEX; # comments). Its
// errors never quote the secret.
func ParseCredentials(data []byte) (Credentials, error) {
	var c Credentials
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, "=")
		switch {
		case line == "" || strings.HasPrefix(line, "#") || !ok:
		case k == "api_key":
			c.APIKey = v
		case k == "hmac_secret":
			s, err := hex.DecodeString(v)
			if err != nil {
				return Credentials{}, errors.New("load: credentials: hmac_secret is not hex")
			}
			c.HMACSecret = s
		}
	}
	if c.APIKey == "" || len(c.HMACSecret) == 0 {
		return Credentials{}, errors.New("load: credentials: api_key and hmac_secret are required")
	}
	return c, nil
}

// Config configures Run.
type Config struct {
	// URL is the API's base URL (http://127.0.0.1:8080). Required.
	URL string
	// Credentials sign every request. Required.
	Credentials Credentials
	// TPS is the offered rate, requests per second (> 0), and Duration how
	// long requests are offered (> 0): request i is due at i/TPS from the
	// start, for every i/TPS < Duration, whatever the answers.
	TPS      float64
	Duration time.Duration
	// MaxInFlight: see MaxInFlightDefault.
	MaxInFlight int
	// LongShare is the share of long content messages (LongShareDefault
	// when 0; negative: none). Exactly ⌊i × share⌋ of the first i requests
	// are long.
	LongShare float64
	// Template and SignName are the one-segment messages' template and
	// signature (TemplateDefault, SignNameDefault); the template takes the
	// parameters code and minutes. LongBody is the long messages' body
	// (LongBodyDefault), sent as content behind 【SignName】.
	Template, SignName, LongBody string
	// Prefixes are the number segments numbers are drawn from (default:
	// every prefix of the fixture's three carriers); Blacklist the numbers
	// never used (nil: the fixture's blacklists; empty: none).
	Prefixes, Blacklist []string
	// NumberOffset is where each prefix's numbers start. Default: the
	// clock's Unix milliseconds: a later tier starts past the numbers an
	// earlier one used as long as fewer than one number per prefix per
	// millisecond is sent, so frequency limits never refuse them.
	NumberOffset uint64
	// IDPrefix starts every client_msg_id (then "-" and the request's
	// number). Default "load-" and the clock's Unix milliseconds in hex.
	IDPrefix string
	// Timeout bounds one request (TimeoutDefault).
	Timeout time.Duration
	// Clock paces the requests, stamps their signatures and measures their
	// latency. Required.
	Clock relaytype.Clock
	// Client sends the requests. Default: a client whose transport keeps
	// MaxInFlight idle connections to the API.
	Client *http.Client
}

func (c *Config) validate() error {
	switch {
	case c.URL == "":
		return errors.New("load: Config.URL is empty")
	case c.Credentials.APIKey == "" || len(c.Credentials.HMACSecret) == 0:
		return errors.New("load: Config.Credentials are missing")
	case c.TPS <= 0:
		return errors.New("load: Config.TPS must be positive")
	case c.Duration <= 0:
		return errors.New("load: Config.Duration must be positive")
	case c.MaxInFlight < 0 || c.Timeout < 0:
		return errors.New("load: Config.MaxInFlight and Timeout must not be negative")
	case c.LongShare > 1:
		return errors.New("load: Config.LongShare is over 1")
	case c.Clock == nil:
		return errors.New("load: Config.Clock is nil")
	}
	return nil
}

// TierResult is what the client saw of one Run.
type TierResult struct {
	// Offered is the offered rate (Config.TPS) and Duration the offered
	// window.
	Offered  float64
	Duration time.Duration
	// Due is the number of requests the schedule called for; Sent those
	// sent, Dropped those not sent because MaxInFlight requests were
	// waiting (Due = Sent + Dropped unless ctx ended the run).
	Due, Sent, Dropped int
	// Long counts the long messages among Sent.
	Long int
	// Accepted counts 202 answers, Duplicates 200 (client_msg_id taken).
	Accepted, Duplicates int
	// Errors counts the other answers by HTTP status; 0 is a request that
	// got no answer (connection refused, timeout).
	Errors map[int]int
	// Latency is the client's latency of answered requests (any status).
	Latency Summary
	// Start is when the first request was due; SendWindow the time from it
	// to the last send; SendRate Sent per second of that window.
	Start      time.Time
	SendWindow time.Duration
	SendRate   float64
	// Elapsed is from Start to the last answer.
	Elapsed time.Duration
}

// Failed is the number of requests sent that were neither accepted nor
// duplicates.
func (r *TierResult) Failed() int { return r.Sent - r.Accepted - r.Duplicates }

// String is one line of figures.
func (r *TierResult) String() string {
	errs := make([]string, 0, len(r.Errors))
	for _, s := range slicesSorted(r.Errors) {
		name := strconv.Itoa(s)
		if s == 0 {
			name = "no answer"
		}
		errs = append(errs, fmt.Sprintf("%s: %d", name, r.Errors[s]))
	}
	return fmt.Sprintf("offered %g/s for %s: sent %d (%d long) at %.1f/s, dropped %d; accepted %d, duplicates %d, errors %d [%s]; client p50 %s p95 %s p99 %s max %s",
		r.Offered, r.Duration, r.Sent, r.Long, r.SendRate, r.Dropped, r.Accepted, r.Duplicates, r.Failed(),
		strings.Join(errs, ", "), r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Max)
}

func slicesSorted(m map[int]int) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Run offers cfg.TPS requests per second for cfg.Duration, open loop: each
// request goes at its due time whatever the earlier ones' answers, unless
// cfg.MaxInFlight are waiting, when it is dropped. It returns when every
// request sent has its answer (or its timeout). ctx ends the schedule early
// and cancels the requests in flight; the result counts what was done.
func Run(ctx context.Context, cfg Config) (*TierResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.MaxInFlight = cmp.Or(cfg.MaxInFlight, MaxInFlightDefault)
	cfg.Timeout = cmp.Or(cfg.Timeout, TimeoutDefault)
	switch {
	case cfg.LongShare == 0:
		cfg.LongShare = LongShareDefault
	case cfg.LongShare < 0:
		cfg.LongShare = 0
	}
	cfg.Template = cmp.Or(cfg.Template, TemplateDefault)
	cfg.SignName = cmp.Or(cfg.SignName, SignNameDefault)
	cfg.LongBody = cmp.Or(cfg.LongBody, LongBodyDefault)
	start := cfg.Clock.Now()
	if cfg.IDPrefix == "" {
		cfg.IDPrefix = "load-" + strconv.FormatInt(start.UnixMilli(), 16)
	}
	if cfg.NumberOffset == 0 {
		cfg.NumberOffset = uint64(start.UnixMilli())
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: &http.Transport{MaxIdleConns: cfg.MaxInFlight,
			MaxIdleConnsPerHost: cfg.MaxInFlight, IdleConnTimeout: 30 * time.Second}}
	}
	gen, err := newNumbers(cfg.Prefixes, cfg.Blacklist, cfg.NumberOffset)
	if err != nil {
		return nil, err
	}
	url := strings.TrimSuffix(cfg.URL, "/") + "/v1/messages"

	res := &TierResult{Offered: cfg.TPS, Duration: cfg.Duration, Errors: map[int]int{}, Start: start}
	var (
		mu       sync.Mutex // guards res's counters and last
		last     time.Time
		lat      Latencies
		wg       sync.WaitGroup
		sem      = make(chan struct{}, cfg.MaxInFlight)
		lastSend time.Time
	)
schedule:
	for i := 0; ; i++ {
		off := time.Duration(float64(i) * float64(time.Second) / cfg.TPS)
		if off >= cfg.Duration {
			break
		}
		if wait := start.Add(off).Sub(cfg.Clock.Now()); wait > 0 {
			select {
			case <-cfg.Clock.After(wait):
			case <-ctx.Done():
				break schedule
			}
		}
		res.Due++
		select {
		case sem <- struct{}{}:
		default:
			res.Dropped++
			continue
		}
		long := cfg.LongShare > 0 && int(float64(i+1)*cfg.LongShare) > int(float64(i)*cfg.LongShare)
		body, err := requestBody(&cfg, i, gen.next(), long)
		if err != nil {
			<-sem
			return nil, err
		}
		res.Sent++
		if long {
			res.Long++
		}
		lastSend = cfg.Clock.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			status, d := send(ctx, &cfg, url, body)
			mu.Lock()
			defer mu.Unlock()
			switch status {
			case http.StatusAccepted:
				res.Accepted++
			case http.StatusOK:
				res.Duplicates++
			default:
				res.Errors[status]++
			}
			if status != 0 {
				lat.Add(d)
			}
			if now := cfg.Clock.Now(); now.After(last) {
				last = now
			}
		}()
	}
	wg.Wait()
	res.Latency = lat.Summary()
	if res.Sent > 0 {
		res.SendWindow = lastSend.Sub(start)
		// n requests span n-1 intervals; count the window as n intervals so
		// that a run on schedule reports the offered rate.
		if w := res.SendWindow + time.Duration(float64(time.Second)/cfg.TPS); w > 0 {
			res.SendRate = float64(res.Sent) / w.Seconds()
		}
		res.Elapsed = last.Sub(start)
	}
	return res, nil
}

// requestBody is request i's JSON body.
func requestBody(cfg *Config, i int, number string, long bool) ([]byte, error) {
	r := admit.Request{ClientMsgID: cfg.IDPrefix + "-" + strconv.Itoa(i), Numbers: []string{number}}
	if long {
		r.Content = "【" + cfg.SignName + "】" + cfg.LongBody
	} else {
		r.Template, r.SignName = cfg.Template, cfg.SignName
		r.Params = map[string]string{"code": fmt.Sprintf("%06d", i%1000000), "minutes": "5"}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("load: request %d: %w", i, err)
	}
	return b, nil
}

// send posts one signed request and returns its status (0: no answer) and
// latency.
func send(ctx context.Context, cfg *Config, url string, body []byte) (int, time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0
	}
	began := cfg.Clock.Now()
	ts := began.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(admit.HeaderKey, cfg.Credentials.APIKey)
	req.Header.Set(admit.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(admit.HeaderSignature, admit.Sign(cfg.Credentials.HMACSecret, http.MethodPost, req.URL.EscapedPath(), ts, body))
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return 0, 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, cfg.Clock.Now().Sub(began)
}

// numbers hands out distinct valid mobile numbers: prefix after prefix in
// turn, each prefix counting up from an offset, skipping blacklisted ones.
type numbers struct {
	prefixes []string
	cursor   []uint64
	mod      []uint64
	black    map[string]bool
	turn     int
}

func newNumbers(prefixes, blacklist []string, offset uint64) (*numbers, error) {
	if len(prefixes) == 0 || blacklist == nil {
		f := tenancy.DemoFixture(func(string) string { return "" })
		if len(prefixes) == 0 {
			for _, c := range f.Carriers {
				prefixes = append(prefixes, c.Prefixes...)
			}
		}
		if blacklist == nil {
			blacklist = append(blacklist, f.Blacklist...)
			for _, e := range f.Enterprises {
				blacklist = append(blacklist, e.Blacklist...)
			}
		}
	}
	n := &numbers{prefixes: slices.Sorted(slices.Values(prefixes)), black: map[string]bool{}}
	for _, p := range n.prefixes {
		if len(p) < 3 || len(p) > 7 || strings.Trim(p, "0123456789") != "" {
			return nil, fmt.Errorf("load: prefix %q: want 3 to 7 digits", p)
		}
		mod := uint64(1)
		for range 11 - len(p) {
			mod *= 10
		}
		n.mod = append(n.mod, mod)
		n.cursor = append(n.cursor, offset%mod)
	}
	for _, b := range blacklist {
		n.black[b] = true
	}
	return n, nil
}

// next returns the next number. Not safe for concurrent use (Run's
// schedule is one goroutine).
func (n *numbers) next() string {
	i := n.turn % len(n.prefixes)
	n.turn++
	p := n.prefixes[i]
	for {
		v := n.cursor[i]
		n.cursor[i] = (v + 1) % n.mod[i]
		s := fmt.Sprintf("%s%0*d", p, 11-len(p), v)
		if !n.black[s] {
			return s
		}
	}
}
