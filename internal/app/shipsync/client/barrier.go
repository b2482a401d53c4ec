package client

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/flow"
)

// Barrier holds records back from processing (the snapshot catch-up
// barrier, snapshot.Runner): while Hold is true for a partition's next
// record, that partition is paused and its records wait in memory (at most
// what was already fetched), neither read into the state nor past the
// checkpoint; they are processed in order once Hold turns false, checked
// again before every poll. A crash loses nothing: the checkpoint never
// passed them, so they are read again. Hold must be safe for concurrent
// use and cheap.
type Barrier interface {
	Hold(tp TP, offset int64) bool
}

// holdBack returns the records of recs that may be processed now and keeps
// the others, in order, behind the barrier. It runs on the consume loop.
func (c *Client) holdBack(recs []*kgo.Record) []*kgo.Record {
	if c.cfg.Barrier == nil {
		return recs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := recs[:0:0]
	var pause []TP
	for _, r := range recs {
		tp := TP{r.Topic, r.Partition}
		if q, ok := c.held[tp]; ok {
			c.held[tp] = append(q, r)
			continue
		}
		if c.cfg.Barrier.Hold(tp, r.Offset) {
			if c.held == nil {
				c.held = map[TP][]*kgo.Record{}
			}
			c.held[tp] = []*kgo.Record{r}
			pause = append(pause, tp)
			continue
		}
		out = append(out, r)
	}
	if len(pause) > 0 {
		c.kc.PauseFetchPartitions(byTopic(pause))
		for _, tp := range pause {
			c.log.Info("shipsync client: partition held by a snapshot barrier", "partition", tp.String())
		}
	}
	return out
}

// releaseHeld returns the held records the barrier now lets through (in
// order, up to the first still held), for the consume loop to hand on
// before its next poll, and resumes the partitions it released entirely.
func (c *Client) releaseHeld() []*kgo.Record {
	if c.cfg.Barrier == nil {
		return nil
	}
	c.mu.Lock()
	var recs []*kgo.Record
	var resume []TP
	for tp, q := range c.held {
		n := 0
		for n < len(q) && !c.cfg.Barrier.Hold(tp, q[n].Offset) {
			n++
		}
		if n == 0 {
			continue
		}
		recs = append(recs, q[:n]...)
		if n == len(q) {
			delete(c.held, tp)
			resume = append(resume, tp)
		} else {
			c.held[tp] = q[n:]
		}
	}
	if len(resume) > 0 {
		c.kc.ResumeFetchPartitions(byTopic(resume))
		c.flow()
	}
	c.mu.Unlock()
	return recs
}

// pollContext bounds a poll while records are held, so that the barrier
// is checked again even when nothing else arrives.
func (c *Client) pollContext(ctx context.Context) (context.Context, context.CancelFunc) {
	c.mu.Lock()
	n := len(c.held)
	c.mu.Unlock()
	if n == 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.ReceiptEvery)
}

// unheld drops the held partitions from tps (flow must not resume them).
// The caller holds c.mu.
func (c *Client) unheld(tps []TP) []TP {
	if len(c.held) == 0 {
		return tps
	}
	out := tps[:0:0]
	for _, tp := range tps {
		if _, ok := c.held[tp]; !ok {
			out = append(out, tp)
		}
	}
	return out
}

// pollTimedOut reports a fetch error that only says a bounded poll ended.
func pollTimedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// Meter waits until n bytes may go on the wire under the client's upload
// limit (Config.UploadRate; nothing to wait for without one), taking them
// from the same bucket the client's own uploads use: an uploader beside the
// client (the snapshot runner) shares the link's budget instead of adding
// to it. ctx ends the wait (its error is returned).
func (c *Client) Meter(ctx context.Context, n int64) error {
	if c.bucket == nil {
		return nil
	}
	if d := c.bucket.Reserve(c.cfg.Clock.Now(), n); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.cfg.Clock.After(d):
		}
	}
	return nil
}

// MayTransfer reports whether events of a rule of priority p may go on the
// wire now: always, except a BULK rule outside the transfer window
// (Config.BulkWindow) or while the node's clock is not trusted — the rule
// the client's own scheduler follows, for an uploader beside it (the
// snapshot runner).
func (c *Client) MayTransfer(p normalize.Priority) bool {
	if classOf(int(p)) != flow.Bulk || c.cfg.BulkWindow == nil {
		return true
	}
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.BulkWindow.Open(now) && c.trusted()
}
