package supplier

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of Config, Account and Behaviour; the session timings are the
// standard's suggested C, T and N (3.0 §7).
const (
	// WindowDefault is Account.Window: the standard's suggested W.
	WindowDefault = 16
	// MaxConnsDefault is Account.MaxConns.
	MaxConnsDefault = 4
	// ISMGCodeDefault is Config.ISMGCode.
	ISMGCodeDefault = 1001
	// KeepaliveDefault is Config.Keepalive (C).
	KeepaliveDefault = 3 * time.Minute
	// ResponseTimeoutDefault is Config.ResponseTimeout (T).
	ResponseTimeoutDefault = 60 * time.Second
	// TriesDefault is Config.Tries (N).
	TriesDefault = 3
	// LoginTimeoutDefault is Config.LoginTimeout.
	LoginTimeoutDefault = 30 * time.Second
	// MaxHeldDefault is Config.MaxHeld.
	MaxHeldDefault = 100_000
	// MOFromDefault is MOConfig.From.
	MOFromDefault = "13800000000"
	// MOTextDefault is MOConfig.Text.
	MOTextDefault = "TD"
)

// ResultDefault is the Result a failed Submit gets when Behaviour.ResultCodes
// is empty: 13, Dest_terminal_Id error.
const ResultDefault = 13

// StatDefault is the report Stat when Behaviour.ReportStats is empty.
const StatDefault = "DELIVRD"

// Config configures a Server. The zero value of every field but Accounts has
// a documented default; the zero Behaviour is a perfect ISMG (answers at once,
// accepts every valid Submit, reports DELIVRD right after the SubmitResp).
type Config struct {
	// Accounts are the SP accounts that may log in; at least one. Their
	// SourceAddr values must differ.
	Accounts []Account
	// Behaviour is what the ISMG does with what it receives.
	Behaviour Behaviour
	// Record is where accepted Submits are appended (none when Path is
	// empty).
	Record RecordConfig
	// ISMGCode is the gateway code packed into every Msg_Id (ISMG_Id 001001
	// is 1001); default ISMGCodeDefault, at most cmpp.MaxMsgIDGateway.
	ISMGCode uint32
	// Location is the zone of the Msg_Id time fields and the report's
	// Submit_time and Done_time; default China Standard Time (UTC+8), the
	// zone of every ISMG.
	Location *time.Location
	// Keepalive is C: after this long without a packet from the SP, the
	// server sends ActiveTest. Default KeepaliveDefault; negative: never.
	Keepalive time.Duration
	// ResponseTimeout is T: how long the server waits for the answer to an
	// ActiveTest or a Deliver before it sends it again. Default
	// ResponseTimeoutDefault.
	ResponseTimeout time.Duration
	// Tries is N: how many times in all the server sends an ActiveTest (then
	// it drops the connection) or a Deliver (then it gives the Deliver up).
	// Default TriesDefault.
	Tries int
	// LoginTimeout is how long a new connection has to send its Connect;
	// default LoginTimeoutDefault.
	LoginTimeout time.Duration
	// MaxHeld bounds the Delivers (reports, MO parts) held per account while
	// it has no connection with room; past it the oldest is dropped and
	// counted (Stats.DeliversDropped). Default MaxHeldDefault.
	MaxHeld int
	// Clock is the only source of time; default relayclock.System.
	Clock relaytype.Clock
	// Logger receives connection events (login, drop, refusals); default a
	// logger that discards. It never sees secrets, phone numbers or message
	// content.
	Logger *slog.Logger
	// Seed seeds every random draw. One connection's draws come from its own
	// source (seeded by Seed and the connection's number, counted from 1 in
	// accept order), so a run with the same seed, settings and traffic
	// decides the same.
	Seed uint64
}

// Account is one SP account of the ISMG.
type Account struct {
	// SourceAddr is the SP_Id the SP logs in with (Source_Addr, 6 digits).
	SourceAddr string
	// Secret is the shared secret of the login authenticators; never logged
	// or printed (String redacts it).
	Secret string
	// Versions are the CMPP versions the account may log in with; default
	// both 2.0 and 3.0. A Connect asking more than the highest is refused
	// with Status 4 (version too high), any other version outside the list
	// with StatusVersionRefused.
	Versions []cmpp.Version
	// MaxConns bounds the account's logged-in connections; one more is
	// refused with StatusTooManyConns. Default MaxConnsDefault.
	MaxConns int
	// Window is W: the most Submits a connection may have unanswered. One
	// more is a window violation (Behaviour.WindowAction). Default
	// WindowDefault.
	Window int
	// Rate bounds the account's Submits per second over all its connections,
	// counting each destination (the standard's flow control counts n),
	// with a burst of one second's worth; past it a Submit is answered
	// Result 8. 0: no bound.
	Rate float64
}

// String describes the account without its secret.
func (a Account) String() string {
	return fmt.Sprintf("%s (secret redacted, versions %v, max conns %d, window %d, rate %g/s)",
		a.SourceAddr, a.Versions, a.MaxConns, a.Window, a.Rate)
}

// WindowAction is what the server does with a Submit past the window.
type WindowAction uint8

const (
	// WindowFlowControl answers it at once with Result 8 (flow control);
	// the default.
	WindowFlowControl WindowAction = iota
	// WindowDrop drops the connection without an answer.
	WindowDrop
)

// String returns "flow-control" or "drop".
func (w WindowAction) String() string {
	if w == WindowDrop {
		return "drop"
	}
	return "flow-control"
}

// Behaviour is what the ISMG does with the Submits it receives and what it
// sends unasked. Rates are probabilities from 0 to 1, drawn per Submit (per
// destination for reports).
type Behaviour struct {
	// Latency is the delay between receiving a Submit and sending its
	// SubmitResp; default at once. A spread distribution answers out of
	// order, as a real ISMG does.
	Latency Dist
	// FlowControlRate is the share of valid Submits answered Result 8 (flow
	// control) and not accepted.
	FlowControlRate float64
	// FailRate is the share of valid Submits answered with a failure Result
	// drawn from ResultCodes and not accepted. FlowControlRate + FailRate is
	// at most 1.
	FailRate float64
	// ResultCodes are the failure Results (1–255) and their weights; default
	// ResultDefault only.
	ResultCodes []Weighted[uint32]
	// NoAnswerRate is the share of accepted Submits whose SubmitResp is
	// never sent. They are accepted, recorded and reported: the carrier took
	// the message, the answer was lost — the unknown outcome a client must
	// not turn into a failure.
	NoAnswerRate float64
	// ReportDelay is the delay from the SubmitResp to each status report
	// (per destination, per segment: each segment is a Submit of its own);
	// default at once. Reports go only to Submits with Registered_Delivery 1.
	ReportDelay Dist
	// ReportStats are the report Stat values and their weights; default
	// StatDefault only.
	ReportStats []Weighted[string]
	// ReportBeforeRespRate is the share of accepted Submits whose reports
	// are sent on the same connection just before their SubmitResp (the
	// known race: a client must park a report it cannot match yet).
	ReportBeforeRespRate float64
	// DuplicateReportRate is the share of reports sent twice, the second
	// time as a new Deliver (its own Msg_Id) after another ReportDelay.
	DuplicateReportRate float64
	// WindowAction is what happens to a Submit past the account's Window;
	// default WindowFlowControl. Either way Stats.WindowViolations counts it.
	WindowAction WindowAction
	// DropEvery drops a connection (closes it without Terminate) right after
	// its every DropEvery-th accepted Submit, whose SubmitResp is then never
	// sent; 0: never. The Submit stays accepted and reported.
	DropEvery int
	// DropRate is the share of accepted Submits after which the connection
	// is dropped the same way.
	DropRate float64
	// MO configures mobile-originated messages sent unasked.
	MO MOConfig
}

// MOConfig configures the MO messages the server sends on its own; see also
// Server.SendMO.
type MOConfig struct {
	// Every sends one MO to every account with a logged-in connection every
	// Every on the clock; 0: never.
	Every time.Duration
	// Text is the message; default MOTextDefault. A text longer than one
	// message goes as several Delivers with a concatenation UDH (8-bit
	// reference).
	Text string
	// Fmt is its Msg_Fmt; 0 chooses ASCII or UCS2 by the text (cmpp.ChooseFmt).
	Fmt cmpp.MsgFmt
	// From is the sending handset (Src_terminal_Id); default MOFromDefault.
	From string
	// To is the SP number the handset sent to (Dest_Id); default the
	// account's SourceAddr.
	To string
}

// SyncPolicy is how far an accepted Submit's record line goes before the
// SubmitResp is sent.
type SyncPolicy uint8

const (
	// SyncWrite writes the line to the file (write(2)) before the SubmitResp
	// is sent: it survives a crash of the gateway and of the simulator
	// process, not of the machine. The default.
	SyncWrite SyncPolicy = iota
	// SyncFsync also fsyncs the file before the SubmitResp is sent (lines of
	// Submits arriving together share one fsync): it survives a machine
	// crash too, at the cost of a disk flush per batch.
	SyncFsync
)

// String returns "write" or "fsync".
func (p SyncPolicy) String() string {
	if p == SyncFsync {
		return "fsync"
	}
	return "write"
}

// RecordConfig is the record of accepted Submits (see ReadRecord).
type RecordConfig struct {
	// Path is the record file, created if absent and appended to; empty: no
	// record. Without a record, Msg_Id uniqueness across restarts rests on
	// the clock alone (see docs/sms/cmpp.md).
	Path string
	// Sync is the durability of each line; default SyncWrite.
	Sync SyncPolicy
}

// Connect Status values this server sends beyond the standard's 0–4 (the
// standard leaves 5 and up to the ISMG).
const (
	// StatusVersionRefused answers a Connect asking for a version the
	// account does not allow and that is not above its highest.
	StatusVersionRefused = 5
	// StatusTooManyConns answers a Connect past Account.MaxConns.
	StatusTooManyConns = 6
)

// cst is China Standard Time, the default Location.
var cst = time.FixedZone("CST", 8*3600)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.ISMGCode = cmp.Or(c.ISMGCode, ISMGCodeDefault)
	if c.Location == nil {
		c.Location = cst
	}
	c.Keepalive = cmp.Or(c.Keepalive, KeepaliveDefault)
	c.ResponseTimeout = cmp.Or(c.ResponseTimeout, ResponseTimeoutDefault)
	c.Tries = cmp.Or(c.Tries, TriesDefault)
	c.LoginTimeout = cmp.Or(c.LoginTimeout, LoginTimeoutDefault)
	c.MaxHeld = cmp.Or(c.MaxHeld, MaxHeldDefault)
	if c.Clock == nil {
		c.Clock = relayclock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	accts := make([]Account, len(c.Accounts))
	for i, a := range c.Accounts {
		if len(a.Versions) == 0 {
			a.Versions = []cmpp.Version{cmpp.V20, cmpp.V30}
		}
		a.MaxConns = cmp.Or(a.MaxConns, MaxConnsDefault)
		a.Window = cmp.Or(a.Window, WindowDefault)
		accts[i] = a
	}
	c.Accounts = accts
	b := &c.Behaviour
	if len(b.ResultCodes) == 0 {
		b.ResultCodes = []Weighted[uint32]{{Value: ResultDefault, Weight: 1}}
	}
	if len(b.ReportStats) == 0 {
		b.ReportStats = []Weighted[string]{{Value: StatDefault, Weight: 1}}
	}
	b.MO.Text = cmp.Or(b.MO.Text, MOTextDefault)
	b.MO.From = cmp.Or(b.MO.From, MOFromDefault)
	return c
}

// validate names the first bad field of a Config with defaults applied.
func (c Config) validate() error {
	if len(c.Accounts) == 0 {
		return fmt.Errorf("supplier: Accounts: at least one account is required")
	}
	seen := map[string]bool{}
	for i, a := range c.Accounts {
		if err := a.validate(i); err != nil {
			return err
		}
		if seen[a.SourceAddr] {
			return fmt.Errorf("supplier: Accounts[%d].SourceAddr %s listed twice", i, a.SourceAddr)
		}
		seen[a.SourceAddr] = true
	}
	switch {
	case c.ISMGCode > cmpp.MaxMsgIDGateway:
		return fmt.Errorf("supplier: ISMGCode %d over %d", c.ISMGCode, cmpp.MaxMsgIDGateway)
	case c.ResponseTimeout < 0:
		return fmt.Errorf("supplier: ResponseTimeout %s is negative", c.ResponseTimeout)
	case c.LoginTimeout < 0:
		return fmt.Errorf("supplier: LoginTimeout %s is negative", c.LoginTimeout)
	case c.Tries < 1:
		return fmt.Errorf("supplier: Tries %d below 1", c.Tries)
	case c.MaxHeld < 1:
		return fmt.Errorf("supplier: MaxHeld %d below 1", c.MaxHeld)
	case c.Record.Sync > SyncFsync:
		return fmt.Errorf("supplier: Record.Sync %d unknown", c.Record.Sync)
	}
	return c.Behaviour.validate()
}

func (a Account) validate(i int) error {
	field := func(name string) string { return fmt.Sprintf("supplier: Accounts[%d].%s", i, name) }
	if len(a.SourceAddr) != 6 || strings.Trim(a.SourceAddr, "0123456789") != "" {
		return fmt.Errorf("%s %s: want 6 digits", field("SourceAddr"), relaytype.QuoteValue(a.SourceAddr))
	}
	for _, v := range a.Versions {
		if v != cmpp.V20 && v != cmpp.V30 {
			return fmt.Errorf("%s: %s (want 2.0 or 3.0)", field("Versions"), v)
		}
	}
	switch {
	case a.MaxConns < 1:
		return fmt.Errorf("%s %d below 1", field("MaxConns"), a.MaxConns)
	case a.Window < 1:
		return fmt.Errorf("%s %d below 1", field("Window"), a.Window)
	case a.Rate < 0 || a.Rate != a.Rate:
		return fmt.Errorf("%s %g is negative or NaN", field("Rate"), a.Rate)
	}
	return nil
}

// maxVersion returns the highest version the account allows.
func (a Account) maxVersion() cmpp.Version { return slices.Max(a.Versions) }

func (b Behaviour) validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{
		{"FlowControlRate", b.FlowControlRate}, {"FailRate", b.FailRate}, {"NoAnswerRate", b.NoAnswerRate},
		{"ReportBeforeRespRate", b.ReportBeforeRespRate}, {"DuplicateReportRate", b.DuplicateReportRate},
		{"DropRate", b.DropRate},
	} {
		if !(r.v >= 0 && r.v <= 1) { // also refuses NaN
			return fmt.Errorf("supplier: Behaviour.%s %g outside 0…1", r.name, r.v)
		}
	}
	if b.FlowControlRate+b.FailRate > 1 {
		return fmt.Errorf("supplier: Behaviour.FlowControlRate + FailRate = %g over 1", b.FlowControlRate+b.FailRate)
	}
	if err := b.Latency.validate("Behaviour.Latency"); err != nil {
		return err
	}
	if err := b.ReportDelay.validate("Behaviour.ReportDelay"); err != nil {
		return err
	}
	if err := validateWeights("Behaviour.ResultCodes", b.ResultCodes); err != nil {
		return err
	}
	for _, w := range b.ResultCodes {
		if w.Value < 1 || w.Value > 255 {
			return fmt.Errorf("supplier: Behaviour.ResultCodes: Result %d outside 1…255", w.Value)
		}
	}
	if err := validateWeights("Behaviour.ReportStats", b.ReportStats); err != nil {
		return err
	}
	for _, w := range b.ReportStats {
		if !validStat(w.Value) {
			return fmt.Errorf("supplier: Behaviour.ReportStats: Stat %s is not 1–7 printable characters", relaytype.QuoteValue(w.Value))
		}
	}
	switch {
	case b.WindowAction > WindowDrop:
		return fmt.Errorf("supplier: Behaviour.WindowAction %d unknown", b.WindowAction)
	case b.DropEvery < 0:
		return fmt.Errorf("supplier: Behaviour.DropEvery %d is negative", b.DropEvery)
	case b.MO.Every < 0:
		return fmt.Errorf("supplier: Behaviour.MO.Every %s is negative", b.MO.Every)
	}
	return nil
}
