package gateway

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/sms/cmpp/cmppconn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of Config.
const (
	// GroupDefault is the consumer group on the command stream.
	GroupDefault = "sms-gateway"
	// CommandStreamDefault is the stream the submit commands arrive on.
	CommandStreamDefault = "sms:submit"
	// ResultStreamDefault is the stream submit results go to.
	ResultStreamDefault = "sms:result"
	// ReportStreamDefault is the stream status reports and MO go to.
	ReportStreamDefault = "sms:report"
	// SubmitTimeoutDefault bounds one Submit, from the claim to its outcome:
	// waiting for a connection, the rate limit and a window slot, then the
	// SubmitResp (cmppconn.ResponseTimeoutDefault, 60 s).
	SubmitTimeoutDefault = 90 * time.Second
	// StaleClaimDefault is how old a CLAIMED row must be before another
	// gateway settles it UNKNOWN: longer than any Submit can take.
	StaleClaimDefault = 2 * time.Minute
	// MinIdleDefault is XAUTOCLAIM's min-idle-time: longer than the slowest
	// Submit and than StaleClaim, so a live gateway's entry is never taken.
	MinIdleDefault = 3 * time.Minute
	// ClaimIntervalDefault is the time between XAUTOCLAIM passes.
	ClaimIntervalDefault = 30 * time.Second
	// ReadCountDefault is COUNT for XREADGROUP and XAUTOCLAIM: the largest
	// batch one read hands to a worker (claimed in one statement, settled
	// in one, its results written in one pipeline).
	ReadCountDefault = 64
	// BlockDefault is XREADGROUP's BLOCK: how long a read waits for entries
	// (and so how soon Run notices its ctx ended while the stream is quiet).
	BlockDefault = time.Second
	// ConcurrencyDefault bounds the commands in work at once (eight full
	// batches). It is also the most commands one crash can leave claimed
	// and unsettled, each of which becomes UNKNOWN; at a steady rate far
	// below the gateway's capacity the number in work is rate × latency,
	// well under it.
	ConcurrencyDefault = 512
	// StopTimeoutDefault bounds closing the channels' connections in Run.
	StopTimeoutDefault = 10 * time.Second
)

// NotSentBackoffDefault is Config.NotSentBackoff's default: four quick
// retries within 8 s, then XAUTOCLAIM's MinIdle.
var NotSentBackoffDefault = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 5 * time.Second}

// Config configures a Gateway. Zero values take the defaults.
type Config struct {
	// Redis holds the streams; required.
	Redis redis.UniversalClient
	// DB holds the gateway_submit table (MigrationLine applied); required.
	// A *pgxpool.Pool.
	DB Querier
	// Channels are the configured channels, one connection pool each; at
	// least one, names unique. Each Pool.Conn.DeliverFunc is set by the
	// gateway.
	Channels []ChannelConfig
	// Consumer is this gateway's consumer name in the group; required,
	// unique per running gateway, and kept across restarts so that a
	// restarted gateway reads its own pending entries first.
	Consumer string
	// Group, CommandStream, ResultStream, ReportStream name the consumer
	// group and streams; defaults GroupDefault, CommandStreamDefault,
	// ResultStreamDefault, ReportStreamDefault.
	Group, CommandStream, ResultStream, ReportStream string
	// SubmitTimeout bounds one Submit (SubmitTimeoutDefault); when it ends
	// before a SubmitResp the outcome is Unknown (or NotSent if nothing
	// was written).
	SubmitTimeout time.Duration
	// StaleClaim: a CLAIMED row at least this old is the claim of a crashed
	// gateway and is settled UNKNOWN (StaleClaimDefault). It must be
	// longer than SubmitTimeout.
	StaleClaim time.Duration
	// MinIdle is XAUTOCLAIM's min-idle-time (MinIdleDefault). It must be
	// longer than StaleClaim.
	MinIdle time.Duration
	// NotSentBackoff is how long the gateway waits before it submits again,
	// in process, a command that was not sent (no connection in time, or
	// flow control): one wait per retry (default NotSentBackoffDefault).
	// After the last one the command stays pending and comes back through
	// XAUTOCLAIM after MinIdle. Each retry claims the row again.
	NotSentBackoff []time.Duration
	// ClaimInterval is the time between XAUTOCLAIM passes; one runs at
	// start. Default ClaimIntervalDefault.
	ClaimInterval time.Duration
	// TrimCommands removes from the command stream, after each XAUTOCLAIM
	// pass, the entries the group has delivered and acked (TrimPass). Off
	// by default; leave it off when another group reads the stream.
	TrimCommands bool
	// ReadCount is the COUNT of reads (ReadCountDefault).
	ReadCount int
	// Block is XREADGROUP's BLOCK (BlockDefault), measured by Redis.
	Block time.Duration
	// Concurrency bounds the commands in work at once (ConcurrencyDefault);
	// a read larger than it is worked on in parts.
	Concurrency int
	// StopTimeout bounds closing the connections when Run ends
	// (StopTimeoutDefault).
	StopTimeout time.Duration
	// Clock stamps rows and drives every timer of the gateway; default
	// relayclock.System.
	Clock relaytype.Clock
	// Logger gets events with counts, submit ids and classes; never a
	// phone number, content or secret. Default: discard.
	Logger *slog.Logger
}

// ChannelConfig is one channel: a name commands use and its pool.
type ChannelConfig struct {
	// Name is what Command.Channel refers to.
	Name string
	// Pool configures the channel's connections (account, version, K,
	// window, rate). Its Conn.SourceAddr is the SP_Id put in Msg_src.
	Pool cmppconn.PoolConfig
}

func (cfg Config) withDefaults() Config {
	cfg.Group = cmp.Or(cfg.Group, GroupDefault)
	cfg.CommandStream = cmp.Or(cfg.CommandStream, CommandStreamDefault)
	cfg.ResultStream = cmp.Or(cfg.ResultStream, ResultStreamDefault)
	cfg.ReportStream = cmp.Or(cfg.ReportStream, ReportStreamDefault)
	cfg.SubmitTimeout = cmp.Or(cfg.SubmitTimeout, SubmitTimeoutDefault)
	cfg.StaleClaim = cmp.Or(cfg.StaleClaim, StaleClaimDefault)
	cfg.MinIdle = cmp.Or(cfg.MinIdle, MinIdleDefault)
	cfg.ClaimInterval = cmp.Or(cfg.ClaimInterval, ClaimIntervalDefault)
	cfg.ReadCount = cmp.Or(cfg.ReadCount, ReadCountDefault)
	cfg.Block = cmp.Or(cfg.Block, BlockDefault)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, ConcurrencyDefault)
	cfg.StopTimeout = cmp.Or(cfg.StopTimeout, StopTimeoutDefault)
	if cfg.NotSentBackoff == nil {
		cfg.NotSentBackoff = NotSentBackoffDefault
	}
	if cfg.Clock == nil {
		cfg.Clock = relayclock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

func (cfg Config) validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("gateway: config: "+f, a...) }
	switch {
	case cfg.Redis == nil:
		return bad("Redis is required")
	case cfg.DB == nil:
		return bad("DB is required")
	case cfg.Consumer == "":
		return bad("Consumer is required")
	case len(cfg.Channels) == 0:
		return bad("Channels: at least one")
	case cfg.StaleClaim <= cfg.SubmitTimeout:
		return bad("StaleClaim %v must be longer than SubmitTimeout %v", cfg.StaleClaim, cfg.SubmitTimeout)
	case cfg.MinIdle <= cfg.StaleClaim:
		return bad("MinIdle %v must be longer than StaleClaim %v", cfg.MinIdle, cfg.StaleClaim)
	case cfg.ReadCount < 1, cfg.Concurrency < 1, cfg.ClaimInterval < 0, cfg.Block < 0:
		return bad("ReadCount, Concurrency must be positive; ClaimInterval, Block not negative")
	}
	for i, d := range cfg.NotSentBackoff {
		if d < 0 {
			return bad("NotSentBackoff[%d] is negative (%v)", i, d)
		}
	}
	seen := map[string]bool{}
	for i, ch := range cfg.Channels {
		if ch.Name == "" || seen[ch.Name] {
			return bad("Channels[%d]: empty or repeated name", i)
		}
		seen[ch.Name] = true
	}
	return nil
}
