// Package bench holds relay's load generators and measurements (`relay bench`).
// Figures are printed, never asserted: the machines are shared and noisy.
package bench

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

//go:embed migration
var migrationFS embed.FS

//go:embed queries.sql
var queriesSQL string

var queries = sqlfile.MustParse("bench/queries.sql", queriesSQL, "EffectInsert", "EffectCount")

// Migrate applies the engine line and the bench line to d.
func Migrate(ctx context.Context, d relaydriver.Driver, clock relaytype.Clock) error {
	sub, err := fs.Sub(migrationFS, "migration/"+d.Name())
	if err != nil {
		return err
	}
	_, err = relaymigrate.Up(ctx, d, clock, relaymigrate.EngineLineOf(d), relaymigrate.Line{Name: "bench", FS: sub})
	return err
}

// FIFOOptions shape one FIFO measurement.
type FIFOOptions struct {
	Queue string
	N     int // messages
	// FIFOBatch is relay.Config.FIFOBatch (messages per transaction).
	FIFOBatch int
	Clock     relaytype.Clock
}

// FIFOResult is one measured run.
type FIFOResult struct {
	N       int
	Elapsed time.Duration
}

// Rate returns messages per second.
func (r FIFOResult) Rate() float64 { return float64(r.N) / r.Elapsed.Seconds() }

// RunFIFO enqueues N messages, then measures how long the global FIFO mode
// takes to process them all with a handler that does one INSERT each, and
// checks that exactly N effects were written.
func RunFIFO(ctx context.Context, d relaydriver.Driver, o FIFOOptions) (FIFOResult, error) {
	queue := o.Queue
	handler := relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, del *relay.Delivery) relay.Result {
		if _, err := tx.Exec(ctx, queries["EffectInsert"], queue, del.Message.ID); err != nil {
			return relay.Retry(relaytype.ClassInfra, err)
		}
		return relay.Succeeded()
	})
	e, err := relay.NewEngine(d, relay.Config{Queue: queue, Mode: relay.ModeFIFO, Handler: handler,
		FIFOBatch: o.FIFOBatch, Clock: o.Clock})
	if err != nil {
		return FIFOResult{}, err
	}
	const chunk = 1000
	for i := 0; i < o.N; i += chunk {
		params := make([]*relay.EnqueueParams, 0, chunk)
		for j := i; j < min(i+chunk, o.N); j++ {
			params = append(params, &relay.EnqueueParams{ID: int64(j + 1), Payload: []byte("x")})
		}
		if _, err := e.Enqueue(ctx, params...); err != nil {
			return FIFOResult{}, err
		}
	}
	start := o.Clock.Now()
	done := 0
	for done < o.N {
		n, err := e.Work(ctx)
		if err != nil {
			return FIFOResult{}, err
		}
		if n == 0 {
			return FIFOResult{}, fmt.Errorf("bench: engine stopped after %d of %d messages", done, o.N)
		}
		done += n
	}
	res := FIFOResult{N: o.N, Elapsed: o.Clock.Now().Sub(start)}
	var effects int64
	if err := d.GetExecutor().QueryRow(ctx, queries["EffectCount"], queue).Scan(&effects); err != nil {
		return res, err
	}
	if effects != int64(o.N) {
		return res, fmt.Errorf("bench: %d effects for %d messages", effects, o.N)
	}
	return res, nil
}
