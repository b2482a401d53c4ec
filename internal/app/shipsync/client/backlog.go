package client

import (
	"context"
	"time"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// backlogCostFactor bounds what the heartbeat's backlog groups cost: they
// are read again only once the last reading is this many times older than
// it took. Reading them visits every open event_state row (a million on a
// ship back from months offline), which on a short heartbeat interval
// would otherwise take a large share of the client's time away from
// reading and sending; with the factor it stays under about 2 %.
const backlogCostFactor = 50

// backlogCadence decides when the backlog groups are read again. Times are
// on one monotonic scale.
type backlogCadence struct {
	read      bool
	at, took  time.Duration
	lastGroup []*pb.BacklogSummary
}

// due reports whether the groups must be read at now.
func (b *backlogCadence) due(now time.Duration) bool {
	return !b.read || now-b.at >= backlogCostFactor*b.took || now < b.at
}

// record notes a reading that ran from start to end.
func (b *backlogCadence) record(start, end time.Duration, groups []*pb.BacklogSummary) {
	b.read, b.at, b.took, b.lastGroup = true, start, max(end-start, 0), groups
}

// monotonic returns the client's monotonic time: Config.Monotonic when
// set, else the injected clock.
func (c *Client) monotonic() time.Duration {
	if c.cfg.Monotonic != nil {
		return c.cfg.Monotonic()
	}
	return time.Duration(c.cfg.Clock.Now().UnixNano())
}

// backlogGroups returns the backlog grouped by direction, rule, priority
// and state, read from the store when the cadence says so and otherwise
// as last read.
func (c *Client) backlogGroups(ctx context.Context, cad *backlogCadence) ([]*pb.BacklogSummary, error) {
	start := c.monotonic()
	if !cad.due(start) {
		return cad.lastGroup, nil
	}
	groups, err := c.cfg.Store.backlog(ctx)
	if err != nil {
		return nil, err
	}
	cad.record(start, c.monotonic(), groups)
	return groups, nil
}
