package admit

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/relayhq/relay"
)

// Defaults of the API's group commit (APIConfig.AcceptBatch,
// APIConfig.AcceptConcurrency).
const (
	// AcceptBatchDefault is the most requests one accept transaction takes.
	AcceptBatchDefault = 64
	// AcceptConcurrencyDefault is how many accept transactions may be open
	// at once; requests arriving while all are busy wait for the next one.
	// Fewer open at once means larger groups under load: with 2 instead of
	// 4, relay sms load measured 310-540 µs of the API's PostgreSQL CPU per
	// message instead of 490-820 (2026-12-03, alternate runs at 500 and
	// 800/s), the client p99 no worse.
	AcceptConcurrencyDefault = 2
	// acceptTimeout bounds one accept transaction. It is not the request's
	// own deadline: a batch carries other callers' requests too.
	acceptTimeout = 30 * time.Second
)

// pendingAccept is one request waiting in the group commit.
type pendingAccept struct {
	app    int64
	req    *Request
	body   []byte // the engine payload
	params []byte // req.Params as JSON
	done   chan acceptOutcome
}

type acceptOutcome struct {
	res relay.EnqueueResult
	err error
}

// grouper commits concurrent accepts together: a request that finds fewer
// than max transactions open leads one, taking every request queued at that
// moment (up to batch) into it; requests arriving meanwhile queue for the
// next. Under light load every request is its own transaction, at once;
// under heavy load the commits, round trips and WAL flushes are shared by a
// batch. Each request is still answered only after the commit that holds
// it. No goroutine outlives the queued work.
type grouper struct {
	batch, max int
	commit     func(ctx context.Context, b []*pendingAccept) ([]relay.EnqueueResult, error)

	mu      sync.Mutex
	queue   []*pendingAccept
	running int
}

// accept queues p and returns its outcome once its batch has committed (or
// failed).
func (g *grouper) accept(ctx context.Context, p *pendingAccept) (relay.EnqueueResult, error) {
	p.done = make(chan acceptOutcome, 1)
	g.mu.Lock()
	g.queue = append(g.queue, p)
	lead := g.running < g.max
	if lead {
		g.running++
	}
	g.mu.Unlock()
	if lead {
		g.lead(context.WithoutCancel(ctx))
	}
	out := <-p.done
	return out.res, out.err
}

// lead commits one batch from the queue, then hands the queue on to a new
// leader goroutine when requests are still waiting, so the caller that led
// is answered without waiting for later batches.
func (g *grouper) lead(ctx context.Context) {
	g.mu.Lock()
	n := min(len(g.queue), g.batch)
	b := g.queue[:n:n]
	g.queue = g.queue[n:]
	g.mu.Unlock()
	if n > 0 {
		g.run(ctx, b)
	}
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.running--
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	go g.lead(ctx)
}

// run commits b as one transaction; when that fails and b holds more than
// one request, each is tried alone, so one request the store refuses does
// not fail the others.
func (g *grouper) run(ctx context.Context, b []*pendingAccept) {
	ctx, cancel := context.WithTimeout(ctx, acceptTimeout)
	defer cancel()
	res, err := g.commit(ctx, b)
	if err == nil {
		for i, p := range b {
			p.done <- acceptOutcome{res: res[i]}
		}
		return
	}
	if len(b) == 1 {
		b[0].done <- acceptOutcome{err: err}
		return
	}
	for _, p := range b {
		res, err := g.commit(ctx, []*pendingAccept{p})
		if err != nil {
			p.done <- acceptOutcome{err: err}
			continue
		}
		p.done <- acceptOutcome{res: res[0]}
	}
}

// commitAccepts enqueues b's requests and writes the inbox rows of the new
// ones in one transaction (the inbox row exists exactly when its engine
// message does), and returns one result per request in order.
func (a *api) commitAccepts(ctx context.Context, b []*pendingAccept) ([]relay.EnqueueResult, error) {
	params := make([]*relay.EnqueueParams, len(b))
	for i, p := range b {
		params[i] = &relay.EnqueueParams{Identity: Identity(p.app, p.req.ClientMsgID), Payload: p.body}
	}
	ptx, err := a.cfg.Driver.Pool().Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = ptx.Rollback(context.WithoutCancel(ctx)) }()
	res, err := a.cfg.Engine.EnqueueTx(ctx, a.cfg.Driver.WrapTx(ptx), params...)
	if err != nil {
		return nil, err
	}
	var rows acceptRows
	for i, p := range b {
		if !res[i].Duplicate {
			if err := rows.add(res[i].ID, p); err != nil {
				return nil, err
			}
		}
	}
	if len(rows.ids) > 0 {
		if _, err := ptx.Exec(ctx, stmts["MessageAcceptMany"], rows.ids, rows.apps, rows.clientIDs, rows.numbers,
			rows.signs, rows.templates, rows.params, rows.contents, a.cfg.Clock.Now()); err != nil {
			return nil, fmt.Errorf("inbox rows: %w", err)
		}
	}
	if err := ptx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	a.cfg.Engine.Notify()
	return res, nil
}

// acceptRows are the columns of MessageAcceptMany.
type acceptRows struct {
	ids, apps                                              []int64
	clientIDs, numbers, signs, templates, params, contents []string
}

func (r *acceptRows) add(id int64, p *pendingAccept) error {
	numbers, err := json.Marshal(p.req.Numbers)
	if err != nil {
		return err
	}
	r.ids = append(r.ids, id)
	r.apps = append(r.apps, p.app)
	r.clientIDs = append(r.clientIDs, p.req.ClientMsgID)
	r.numbers = append(r.numbers, string(numbers))
	r.signs = append(r.signs, p.req.SignName)
	r.templates = append(r.templates, p.req.Template)
	r.params = append(r.params, string(p.params))
	r.contents = append(r.contents, p.req.Content)
	return nil
}
