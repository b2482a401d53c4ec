package relayintake

import (
	"context"
	"fmt"
	"strconv"

	"github.com/relayhq/relay/relaydriver"
)

// Cutover seeding modes for Intake.Seed. A decimal id is the fourth mode.
const (
	// SeedMin reads everything present: W = MIN(id) − 1 (0 for an empty source).
	SeedMin = "min"
	// SeedZero starts from W = 0; a missing id 1 is a hole like any other.
	SeedZero = "zero"
	// SeedMax skips the stock visible now: W = MAX(id) (0 for an empty source).
	SeedMax = "max"
	// seedID is the mode recorded for a decimal id.
	seedID = "id"
)

// Seed stores the queue's first watermark. Seeding is the
// operator's cutover decision, never a default: mode is "min", "zero", "max" or a
// decimal id ≥ 0 (W = that id). The watermark, the mode and SeededAt are stored
// in one statement (CursorSeed), which refuses with relaytype.ErrSeedRefused when
// the queue already has a cursor or any message — an upgraded instance is
// never re-seeded. It returns the seeded W. ctx governs the source and store
// calls.
func (in *Intake) Seed(ctx context.Context, mode string) (int64, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	p := in.cfg.Queue

	var w int64
	recorded := mode
	switch mode {
	case SeedZero:
	case SeedMin, SeedMax:
		lo, hi, ok, err := in.src.Bounds(ctx)
		if err != nil {
			return 0, fmt.Errorf("relayintake: seed queue %q mode %s: read source bounds: %w", p, mode, err)
		}
		if ok && mode == SeedMin {
			w = lo - 1
		} else if ok {
			w = hi
		}
	default:
		id, err := strconv.ParseInt(mode, 10, 64)
		if err != nil || id < 0 {
			return 0, fmt.Errorf("relayintake: seed queue %q: mode %q is not min, zero, max or a decimal id ≥ 0", p, mode)
		}
		w, recorded = id, seedID
	}

	err := in.driver.GetExecutor().CursorSeed(ctx, &relaydriver.CursorSeedParams{
		Queue:     p,
		Watermark: w,
		Mode:      recorded,
		Now:       in.cfg.Clock.Now(),
	})
	if err != nil {
		return 0, fmt.Errorf("relayintake: seed queue %q mode %s W=%d: %w", p, mode, w, err)
	}
	in.cur = nil // the next round reads what was stored
	in.m.watermark.Set(float64(w))
	in.cfg.Logger.InfoContext(ctx, "intake: watermark seeded", "queue", p, "mode", recorded, "watermark", w)
	return w, nil
}
