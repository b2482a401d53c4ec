package relayintake

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

const (
	// BatchSizeDefault is Config.BatchSize when zero.
	BatchSizeDefault = 500
	// MaxCommitDelayDefault is Config.MaxCommitDelay when zero. It is a
	// placeholder, not a derived value: the upper bound from id allocation to transaction visibility
	// must be stated by the source database's owner and must not be derived from
	// message contents (an expiry field, say). Set Config.MaxCommitDelay to that
	// bound.
	MaxCommitDelayDefault = 60 * time.Second
	// PollIntervalDefault is Config.PollInterval when zero.
	PollIntervalDefault = time.Second
	// LateCheckWindowDefault is Config.LateCheckWindow when zero.
	LateCheckWindowDefault = 24 * time.Hour
	// LateCheckIntervalDefault is Config.LateCheckInterval when zero.
	LateCheckIntervalDefault = time.Minute
	// LateCheckLimitDefault is Config.LateCheckLimit when zero.
	LateCheckLimitDefault = 1000
)

// Config configures an Intake. Zero values take the documented defaults.
type Config struct {
	// Queue names the queue the rows are enqueued into and the cursor row.
	// Required.
	Queue string
	// BatchSize is the most rows one round reads. Default BatchSizeDefault.
	BatchSize int
	// MaxCommitDelay is how long a hole at W+1 may wait for its row to become
	// visible before it is released as permanent. Default MaxCommitDelayDefault;
	// see its comment: the real value must come from the source database's owner.
	// Every permanent hole stalls intake for this long.
	MaxCommitDelay time.Duration
	// ProbeHoles releases a hole as soon as the source (a
	// relaysource.HoleProber) finds that every transaction open when the
	// hole was first seen has ended — its row can then never appear — rather
	// than after MaxCommitDelay, which stays the bound when the probe cannot
	// answer. A rolled-back insert then stalls intake for a poll or two, not
	// for the whole delay. The source's database must be the one whose
	// transactions take the ids (see relaysource.SQLTable.HoleSettled for
	// what it needs on MariaDB).
	ProbeHoles bool
	// PollInterval is how long Run waits between rounds that made no immediate
	// progress, and after a failed round. Default PollIntervalDefault.
	PollInterval time.Duration
	// LateCheckWindow is how long after its release a permanent hole is still
	// checked for a late row (a row that committed after the max commit delay;
	// see docs/intake.md, "Late commits"). Default LateCheckWindowDefault; a
	// negative value turns the check off.
	LateCheckWindow time.Duration
	// LateCheckInterval is the least time, on Clock, between two late-row
	// checks; a check runs after a successful round once it has passed.
	// Default LateCheckIntervalDefault.
	LateCheckInterval time.Duration
	// LateCheckLimit is the most hole ids one check looks at (the oldest
	// unfound ones in the window, in id order). Default LateCheckLimitDefault.
	LateCheckLimit int
	// Clock is the only source of time (hole ages, polls). Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives structured logs; payloads are never logged. Default
	// slog.Default().
	Logger *slog.Logger
	// Registerer, when set, receives the intake's metrics (see Intake). nil: no
	// metrics are registered.
	Registerer prometheus.Registerer
	// Notify, when set, is called after every round that committed (new rows,
	// or a watermark or hole timer that moved), on the round's goroutine, so
	// that the engine processing the queue in this process takes the new
	// rows at once instead of at its next poll. Set it to the engine's
	// (*relay.Engine).Notify; relayservice does. It must not block. nil: the
	// engine finds the rows at its next poll.
	Notify func()
}

// withDefaults returns cfg with every zero field defaulted.
func (c Config) withDefaults() Config {
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.MaxCommitDelay = cmp.Or(c.MaxCommitDelay, MaxCommitDelayDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.LateCheckWindow = cmp.Or(c.LateCheckWindow, LateCheckWindowDefault)
	c.LateCheckInterval = cmp.Or(c.LateCheckInterval, LateCheckIntervalDefault)
	c.LateCheckLimit = cmp.Or(c.LateCheckLimit, LateCheckLimitDefault)
	if c.Clock == nil {
		c.Clock = relayclock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate names the first bad field.
func (c *Config) validate() error {
	switch {
	case c.Queue == "":
		return errors.New("relayintake: Config.Queue is required")
	case c.BatchSize < 0:
		return fmt.Errorf("relayintake: Config.BatchSize %d is negative", c.BatchSize)
	case c.MaxCommitDelay < 0:
		return fmt.Errorf("relayintake: Config.MaxCommitDelay %v is negative", c.MaxCommitDelay)
	case c.PollInterval < 0:
		return fmt.Errorf("relayintake: Config.PollInterval %v is negative", c.PollInterval)
	case c.LateCheckInterval < 0:
		return fmt.Errorf("relayintake: Config.LateCheckInterval %v is negative", c.LateCheckInterval)
	case c.LateCheckLimit < 0:
		return fmt.Errorf("relayintake: Config.LateCheckLimit %d is negative", c.LateCheckLimit)
	}
	return nil
}
