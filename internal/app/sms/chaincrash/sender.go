package chaincrash

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/load"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
)

// Apps of the fixture the sender uses: one-segment template messages go
// through the OTP app, long content messages through the notify app.
const (
	appShort = "yuntong/otp"
	appLong  = "yuntong/notify"
)

// prefixes are number prefixes of the fixture's three carriers.
var prefixes = []string{"138", "130", "133"}

// Resend backoff while the API is down: from resendMin, doubling to
// resendMax.
const (
	resendMin      = 50 * time.Millisecond
	resendMax      = time.Second
	requestTimeout = 5 * time.Second
)

// sender posts the run's requests, open loop at a rate with a bound on
// those in flight, each resent with the same client_msg_id until the API
// answers 202 or 200 — whatever process lives or dies behind it.
type sender struct {
	url       string
	creds     map[string]tenancy.AppCredentials
	idPrefix  string
	longShare float64
	client    *http.Client

	posts, resends, accepted, duplicates, long atomic.Int64

	mu       sync.Mutex
	answered map[string]int64 // client_msg_id → message id answered
	problems []string
}

// SendStats are the client's figures.
type SendStats struct {
	// Requests is the number of messages; Posts the HTTP requests sent
	// (Resends of them after a refused connection, a timeout or a 5xx);
	// Accepted the 202 answers, Duplicates the 200 answers (a resend whose
	// earlier copy had been accepted, its answer lost); Long the
	// three-segment messages.
	Requests, Long                       int
	Posts, Resends, Accepted, Duplicates int64
	// Window is the time from the first request to the last answer.
	Window time.Duration
}

func newSender(url string, creds map[string]tenancy.AppCredentials, idPrefix string, longShare float64) *sender {
	return &sender{url: strings.TrimSuffix(url, "/") + "/v1/messages", creds: creds, idPrefix: idPrefix,
		longShare: longShare, answered: map[string]int64{},
		client: &http.Client{Timeout: requestTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 128}}}
}

// run sends n requests at tps with at most inFlight waiting; a request due
// while inFlight wait goes as soon as one returns. It returns when every
// request has its answer or ctx ends.
func (s *sender) run(ctx context.Context, n int, tps float64, inFlight int) {
	start := time.Now()
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(float64(i) * float64(time.Second) / tps))); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			s.one(ctx, i)
		})
	}
	wg.Wait()
}

// isLong tells whether request i is a long message: exactly ⌊i × share⌋
// of the first i are.
func (s *sender) isLong(i int) bool {
	return int(float64(i+1)*s.longShare) > int(float64(i)*s.longShare)
}

// clientID is request i's client_msg_id.
func (s *sender) clientID(i int) string { return s.idPrefix + strconv.Itoa(i) }

func (s *sender) one(ctx context.Context, i int) {
	// A number of its own per request (no frequency limit is hit), never
	// one of the fixture's blacklisted numbers.
	req := admit.Request{ClientMsgID: s.clientID(i), Numbers: []string{prefixes[i%3] + fmt.Sprintf("%08d", 20_000_000+i)}}
	app := appShort
	if s.isLong(i) {
		s.long.Add(1)
		app = appLong
		req.Content = "【" + load.SignNameDefault + "】" + load.LongBodyDefault
	} else {
		req.Template, req.SignName = load.TemplateDefault, load.SignNameDefault
		req.Params = map[string]string{"code": fmt.Sprintf("%06d", i%1_000_000), "minutes": "5"}
	}
	body, err := json.Marshal(req)
	if err != nil {
		s.problem("request %d: %v", i, err)
		return
	}
	c := s.creds[app]
	backoff := resendMin
	for try := 0; ctx.Err() == nil; try++ {
		if try > 0 {
			s.resends.Add(1)
		}
		s.posts.Add(1)
		status, answer, err := s.post(ctx, c, body)
		switch {
		case err == nil && (status == http.StatusAccepted || status == http.StatusOK):
			if status == http.StatusAccepted {
				s.accepted.Add(1)
			} else {
				s.duplicates.Add(1)
			}
			s.mu.Lock()
			if prev, ok := s.answered[req.ClientMsgID]; ok && prev != answer.MessageID {
				s.problems = append(s.problems, fmt.Sprintf("%s answered message %d, then %d", req.ClientMsgID, prev, answer.MessageID))
			}
			s.answered[req.ClientMsgID] = answer.MessageID
			s.mu.Unlock()
			return
		case err == nil && status >= 400 && status < 500 && status != http.StatusTooManyRequests:
			s.problem("request %d: refused with %d", i, status)
			return
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, resendMax)
	}
}

// post sends body once, signed now; status 0 is no answer.
func (s *sender) post(ctx context.Context, c tenancy.AppCredentials, body []byte) (int, admit.SendAnswer, error) {
	var a admit.SendAnswer
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return 0, a, err
	}
	ts := time.Now().Unix()
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(admit.HeaderKey, c.APIKey)
	r.Header.Set(admit.HeaderTimestamp, strconv.FormatInt(ts, 10))
	r.Header.Set(admit.HeaderSignature, admit.Sign(c.HMACSecret, http.MethodPost, "/v1/messages", ts, body))
	resp, err := s.client.Do(r)
	if err != nil {
		return 0, a, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, a, err
	}
	if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &a); err != nil {
			return 0, a, fmt.Errorf("answer: %w", err)
		}
	}
	return resp.StatusCode, a, nil
}

func (s *sender) problem(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, a...))
}
