package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// TrimPass removes from the command stream every entry the group has
// delivered and nobody has pending: the entries below the group's lowest
// pending id, or, with nothing pending, up to its last delivered id. It
// returns how many entries it removed. Run calls it after every XAUTOCLAIM
// pass when Config.TrimCommands is set; it is exported for tests.
//
// Only this group's view counts: do not set TrimCommands when another
// consumer group reads the command stream.
func (g *Gateway) TrimPass(ctx context.Context) (int64, error) {
	c := g.cfg
	groups, err := g.rdb.XInfoGroups(ctx, c.CommandStream).Result()
	if err != nil {
		return 0, fmt.Errorf("gateway: trim: groups of %q: %w", c.CommandStream, err)
	}
	last := ""
	for _, gr := range groups {
		if gr.Name == c.Group {
			last = gr.LastDeliveredID
		}
	}
	if last == "" || last == "0-0" {
		return 0, nil // nothing delivered yet
	}
	minID, err := nextID(last)
	if err != nil {
		return 0, fmt.Errorf("gateway: trim: %w", err)
	}
	p, err := g.rdb.XPending(ctx, c.CommandStream, c.Group).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("gateway: trim: pending of %q: %w", c.CommandStream, err)
	}
	if p != nil && p.Count > 0 {
		minID = p.Lower // kept, with everything after it
	}
	// MINID is exact (no "~"): an entry is removed only when the group is
	// done with it. Entries delivered after the reads above have ids above
	// last, so they are kept.
	n, err := g.rdb.XTrimMinID(ctx, c.CommandStream, minID).Result()
	if err != nil {
		return 0, fmt.Errorf("gateway: trim %q below %s: %w", c.CommandStream, minID, err)
	}
	g.stats.trimmed.Add(n)
	return n, nil
}

// nextID returns the stream id right after id ("ms-seq").
func nextID(id string) (string, error) {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok {
		return "", fmt.Errorf("stream id %q is not ms-seq", id)
	}
	s, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return "", fmt.Errorf("stream id %q: %w", id, err)
	}
	return ms + "-" + strconv.FormatUint(s+1, 10), nil
}
