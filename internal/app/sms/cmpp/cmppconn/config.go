package cmppconn

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of Config. The keep-alive values are the ones the standard
// suggests (C = 3 min, T = 60 s, N = 3), the window its recommended W.
const (
	// WindowDefault is the standard's recommended sliding window W: at most
	// 16 Submits without a response.
	WindowDefault = 16
	// ActiveTestIntervalDefault is C: after this long without a packet from
	// the ISMG the connection sends ActiveTest.
	ActiveTestIntervalDefault = 180 * time.Second
	// ActiveTestTimeoutDefault is T: how long one ActiveTest (and the login)
	// waits for its response.
	ActiveTestTimeoutDefault = 60 * time.Second
	// ActiveTestTriesDefault is N: ActiveTests sent in a row without an
	// answer before the link is declared dead.
	ActiveTestTriesDefault = 3
	// ResponseTimeoutDefault is how long a Submit waits for its SubmitResp
	// before its outcome is Unknown (the standard's T).
	ResponseTimeoutDefault = 60 * time.Second
	// DeliverConcurrencyDefault is how many DeliverFunc calls may run at
	// once per connection, the ISMG's own window.
	DeliverConcurrencyDefault = 16
)

// Config describes one CMPP connection from an SP to an ISMG. The zero value
// of every optional field means its default.
type Config struct {
	// Addr is the ISMG's host:port (the standard's long-connection port is
	// 7890). Required.
	Addr string
	// Version is cmpp.V20 or cmpp.V30. Required: the two layouts differ and
	// a wrong guess garbles every Submit.
	Version cmpp.Version
	// SourceAddr is the SP_Id, the 6-digit enterprise code the ISMG knows
	// the account by (Connect Source_Addr). Required.
	SourceAddr string
	// Secret is the shared secret of the login authenticators. Required;
	// never logged, redacted by String.
	Secret string
	// Location is the zone of the Connect timestamp; default China Standard
	// Time (UTC+8), which ISMGs expect.
	Location *time.Location

	// Window is the sliding window W: how many Submits may wait for their
	// SubmitResp at once. Submit blocks while it is full. Default
	// WindowDefault.
	Window int
	// ResponseTimeout is how long a Submit waits for its SubmitResp after it
	// was queued for writing; then its outcome is Unknown and its window
	// slot is freed. Default ResponseTimeoutDefault.
	ResponseTimeout time.Duration
	// ActiveTestInterval (C), ActiveTestTimeout (T) and ActiveTestTries (N)
	// run the keep-alive: after C without a packet from the ISMG the
	// connection sends ActiveTest and waits T; unanswered, it sends again at
	// once, N tries in all, then closes the connection (ErrLinkDead).
	// T also bounds the login. Defaults ActiveTestIntervalDefault,
	// ActiveTestTimeoutDefault, ActiveTestTriesDefault.
	ActiveTestInterval time.Duration
	ActiveTestTimeout  time.Duration
	ActiveTestTries    int
	// RateLimit caps Submits per second on this connection (a token bucket
	// on Clock); 0 means no limit. A Pool has its own, channel-wide limit.
	RateLimit float64
	// RateBurst is how many Submits may pass the rate limit at once after a
	// quiet spell; default 1 (evenly spaced).
	RateBurst int

	// DeliverFunc takes each Deliver (MO or status report) the ISMG sends and
	// returns the DeliverResp Result: 0 when the Deliver is safely kept
	// (made durable first: the ISMG forgets it once answered 0), 8 (flow
	// control) to have the ISMG send it again later, another code to refuse
	// it. The DeliverResp goes out only after DeliverFunc returns. It runs on
	// its own goroutine, at most DeliverConcurrency at once; when that many
	// are busy, further Delivers are answered 8 at once, so a slow handler
	// never holds up SubmitResps. ctx ends when the connection closes; a
	// Deliver whose answer could not be sent comes again, so DeliverFunc
	// must be idempotent. The Deliver is the callee's to keep. Nil: every
	// Deliver is answered 8 and stays with the ISMG.
	DeliverFunc func(ctx context.Context, d *cmpp.Deliver) (result uint32)
	// DeliverConcurrency bounds concurrent DeliverFunc calls; default
	// DeliverConcurrencyDefault.
	DeliverConcurrency int
	// LateResponseFunc, if set, receives every SubmitResp that arrives for a
	// Submit whose outcome was already returned as Unknown (timeout or ctx):
	// the ISMG's word on it after all. It runs on the reading goroutine and
	// must not block.
	LateResponseFunc func(LateResponse)

	// Clock is the only source of time (timeouts, keep-alive, rate limit,
	// the Connect timestamp); default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives connection records (login, loss, unmatched
	// responses); never message content or numbers. Default slog.Default().
	Logger *slog.Logger
	// DialFunc opens the TCP connection; default a net.Dialer's
	// DialContext. ctx bounds the dial.
	DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)
}

// LateResponse is a SubmitResp for a Submit already reported as Unknown.
type LateResponse struct {
	// ConnID and Seq identify the Submit (SubmitResult.ConnID and Seq).
	ConnID uint64
	Seq    uint32
	// MsgID and Result are the SubmitResp's.
	MsgID  uint64
	Result uint32
}

// cst is China Standard Time, the zone of the Connect timestamp.
var cst = time.FixedZone("CST", 8*3600)

// withDefaults returns cfg with every zero optional field set.
func (cfg Config) withDefaults() Config {
	cfg.Location = cmp.Or(cfg.Location, cst)
	cfg.Window = cmp.Or(cfg.Window, WindowDefault)
	cfg.ResponseTimeout = cmp.Or(cfg.ResponseTimeout, ResponseTimeoutDefault)
	cfg.ActiveTestInterval = cmp.Or(cfg.ActiveTestInterval, ActiveTestIntervalDefault)
	cfg.ActiveTestTimeout = cmp.Or(cfg.ActiveTestTimeout, ActiveTestTimeoutDefault)
	cfg.ActiveTestTries = cmp.Or(cfg.ActiveTestTries, ActiveTestTriesDefault)
	cfg.RateBurst = cmp.Or(cfg.RateBurst, 1)
	cfg.DeliverConcurrency = cmp.Or(cfg.DeliverConcurrency, DeliverConcurrencyDefault)
	if cfg.Clock == nil {
		cfg.Clock = relayclock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DialFunc == nil {
		var d net.Dialer
		cfg.DialFunc = d.DialContext
	}
	return cfg
}

// validate names the first bad field of a Config with defaults applied.
func (cfg Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("cmppconn: config: "+format, args...)
	}
	switch {
	case cfg.Addr == "":
		return bad("Addr is required")
	case cfg.Version != cmpp.V20 && cfg.Version != cmpp.V30:
		return bad("Version %s: want cmpp.V20 or cmpp.V30", cfg.Version)
	case cfg.SourceAddr == "" || len(cfg.SourceAddr) > 6:
		return bad("SourceAddr must be the 1–6 character SP_Id, have %d characters", len(cfg.SourceAddr))
	case cfg.Secret == "":
		return bad("Secret is required")
	case cfg.Window < 1:
		return bad("Window %d below 1", cfg.Window)
	case cfg.ResponseTimeout < 0, cfg.ActiveTestInterval < 0, cfg.ActiveTestTimeout < 0:
		return bad("negative duration (ResponseTimeout %s, ActiveTestInterval %s, ActiveTestTimeout %s)",
			cfg.ResponseTimeout, cfg.ActiveTestInterval, cfg.ActiveTestTimeout)
	case cfg.ActiveTestTries < 1:
		return bad("ActiveTestTries %d below 1", cfg.ActiveTestTries)
	case cfg.RateLimit < 0:
		return bad("RateLimit %g is negative", cfg.RateLimit)
	case cfg.RateBurst < 1:
		return bad("RateBurst %d below 1", cfg.RateBurst)
	case cfg.DeliverConcurrency < 1:
		return bad("DeliverConcurrency %d below 1", cfg.DeliverConcurrency)
	}
	return nil
}

// String describes cfg with the secret redacted.
func (cfg Config) String() string {
	secret := "<none>"
	if cfg.Secret != "" {
		secret = "<redacted>"
	}
	return fmt.Sprintf("cmppconn.Config{Addr: %s, Version: %s, SourceAddr: %s, Secret: %s, Window: %d, "+
		"ResponseTimeout: %s, ActiveTest C/T/N: %s/%s/%d, RateLimit: %g/s burst %d}",
		cfg.Addr, cfg.Version, cfg.SourceAddr, secret, cfg.Window, cfg.ResponseTimeout,
		cfg.ActiveTestInterval, cfg.ActiveTestTimeout, cfg.ActiveTestTries, cfg.RateLimit, cfg.RateBurst)
}

// GoString is String, so %#v redacts too.
func (cfg Config) GoString() string { return cfg.String() }
