package shorecrash

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// ship is the harness's ship-side test client: it uploads each stream's
// batches in order, resending a batch under the same id until it is
// answered (the shore may die at any moment), and pulls receipts.
type ship struct {
	base  string
	c     *http.Client
	codec *wire.Codec

	mu       sync.Mutex
	resends  int
	problems []string
	receipts map[string]*pb.Receipt // event id → receipt
	dupes    int
	cursor   string
}

func newShip(base string, tc *tls.Config, codec *wire.Codec) *ship {
	tr := &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 4}
	return &ship{base: base, c: &http.Client{Transport: tr, Timeout: 20 * time.Second}, codec: codec,
		receipts: map[string]*pb.Receipt{}}
}

func (s *ship) problem(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) < 50 {
		s.problems = append(s.problems, fmt.Sprintf(format, a...))
	}
}

// upload sends evs in batches of size, in order, under batch ids derived
// from tag and the stream.
func (s *ship) upload(ctx context.Context, tag, part string, evs []planned, size int) {
	for i, n := 0, 0; i < len(evs); i, n = i+size, n+1 {
		batch := make([]*pb.ChangeEvent, 0, size)
		for _, p := range evs[i:min(i+size, len(evs))] {
			batch = append(batch, p.ev)
		}
		body, err := s.codec.Encode(&wire.Batch{NodeID: node, BatchID: uuidOf(tag, "batch", part, n), Sequence: uint64(n + 1),
			CreatedAt: time.Now(), Events: batch})
		if err != nil {
			s.problem("encode batch %d of %s: %v", n, part, err)
			return
		}
		for attempt := 0; ; attempt++ {
			if ctx.Err() != nil {
				return
			}
			resp, retry, err := s.post(ctx, body)
			if err == nil {
				for j, st := range resp.Statuses {
					if st.Status != pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED {
						s.problem("batch %d of %s: event %d answered %s %s", n, part, j, st.Status, st.Reason)
					}
				}
				break
			}
			if !retry {
				s.problem("batch %d of %s: %v", n, part, err)
				return
			}
			s.mu.Lock()
			s.resends++
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(time.Duration(attempt+1)*50*time.Millisecond, time.Second)):
			}
		}
	}
}

// post sends one batch; retry says whether the failure is one to resend
// after (the shore down, overloaded or unavailable).
func (s *ship) post(ctx context.Context, body []byte) (*pb.UploadResponse, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+shore.PathBatches, bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Content-Type", shore.ContentType)
	resp, err := s.c.Do(req)
	if err != nil {
		return nil, true, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, true, err
	}
	if resp.StatusCode != http.StatusOK {
		retry := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		return nil, retry, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var ur pb.UploadResponse
	if err := proto.Unmarshal(rb, &ur); err != nil {
		return nil, false, fmt.Errorf("answer: %w", err)
	}
	return &ur, false, nil
}

// pull fetches the receipts after the cursor, page by page, until a page
// is empty or fails (the shore may be down: the next pull goes on).
func (s *ship) pull(ctx context.Context) {
	for ctx.Err() == nil {
		s.mu.Lock()
		cursor := s.cursor
		s.mu.Unlock()
		u := s.base + shore.PathReceipts + "?limit=1000&cursor=" + url.QueryEscape(cursor)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return
		}
		resp, err := s.c.Do(req)
		if err != nil {
			return
		}
		rb, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return
		}
		var page pb.ReceiptPage
		if err := proto.Unmarshal(rb, &page); err != nil {
			s.problem("receipt page: %v", err)
			return
		}
		s.mu.Lock()
		for _, r := range page.Receipts {
			if _, seen := s.receipts[r.EventId]; seen {
				s.dupes++
			}
			s.receipts[r.EventId] = r
		}
		s.cursor = page.NextCursor
		s.mu.Unlock()
		if len(page.Receipts) == 0 || !page.More {
			return
		}
	}
}

// ready reports whether the shore answers (a receipts page).
func (s *ship) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+shore.PathReceipts+"?limit=1", nil)
	if err != nil {
		return false
	}
	resp, err := s.c.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// received is how many distinct events have a receipt.
func (s *ship) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.receipts)
}

func (s *ship) stats() (resends, dupes int, problems []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resends, s.dupes, append([]string(nil), s.problems...)
}
