package msgx

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/relayintake"
)

// Config is every msgx setting. The seed names its tunables PARAM:<key>
// (seed 000 reference.md, not available to us); each field is settable by that
// key through Params/Set, and Defaults() holds the values documented in
// docs/msgx/settings.md. A zero Config is not valid: start from Defaults().
type Config struct {
	// Pipeline is the engine pipeline name (queue, cursor, lock names).
	Pipeline string

	// Intake (seed 000 §4).
	ClaimBatch         int           // msgx.pipeline.claim-batch
	MaxCommitDelay     time.Duration // msgx.pipeline.max-commit-delay
	LateCheckWindow    time.Duration // msgx.pipeline.late-check-window (0: off)
	LateCheckInterval  time.Duration // msgx.pipeline.late-check-interval
	LateCheckLimit     int           // msgx.pipeline.late-check-limit
	PollInterval       time.Duration // msgx.pipeline.poll-interval
	CutoverWatermark   string        // msgx.pipeline.cutover-watermark ("" = no seeding)
	FIFOBatch          int           // msgx.pipeline.fifo-batch
	StateCacheFlights  int           // msgx.pipeline.state-cache-flights (0 = off)
	MaxAttempts        int           // msgx.pipeline.max-attempts
	Backoff            []time.Duration
	HandlerTimeout     time.Duration // msgx.pipeline.handler-timeout
	IncludeDayBoundary bool          // msgx.identity.include-day-boundary
	IgnoreRules        []string      // msgx.pipeline.ignore-rules

	// Acknowledgement write-back (seed 000 §6).
	BackfillBatch       int           // msgx.pipeline.backfill-batch
	BackfillMaxAttempts int           // msgx.pipeline.backfill-max-attempts (alert only)
	BackfillDeadline    time.Duration // msgx.pipeline.backfill-deadline: R

	// Events (seed 000 §8).
	MsgTopic       string        // msgx.kafka.msg-topic
	SchdTopic      string        // msgx.kafka.schd-topic
	MsgBatch       int           // msgx.msg.batch
	SchdFlushLimit int           // msgx.schd.flush-limit
	EventRetention time.Duration // msgx.pipeline.event-retention

	// Flight domain (seed 000 §11–§12).
	Flight flight.Settings

	// Requests (seed 000 §7.2).
	SystemCode     string        // msgx.request.system-code: our SNDR on REQT
	AODBCode       string        // msgx.request.aodb-code: RCVR of REQT
	RequestTimeout time.Duration // msgx.request.timeout: SENT → EXPIRED
	ClockSkew      time.Duration // msgx.request.clock-skew: RESP-guard tolerance

	// Lifecycle (seed 000 §9.3).
	ArchiveAfter     time.Duration // msgx.lifecycle.archive-after (PROC_STATE → history)
	SnapLogRetention time.Duration // msgx.lifecycle.snap-log-retention
	FlightKeepDays   int           // msgx.lifecycle.flight-keep-days
	FlightQuiet      time.Duration // msgx.lifecycle.flight-quiet
	HistoryRetention time.Duration // msgx.lifecycle.history-retention
	RequestRetention time.Duration // msgx.lifecycle.request-retention
	LifecycleEvery   time.Duration // msgx.lifecycle.every
}

// Defaults returns the documented defaults (docs/msgx/settings.md).
func Defaults() Config {
	return Config{
		Pipeline:            "msgx",
		ClaimBatch:          500,
		MaxCommitDelay:      30 * time.Second,
		LateCheckWindow:     relayintake.LateCheckWindowDefault,
		LateCheckInterval:   relayintake.LateCheckIntervalDefault,
		LateCheckLimit:      relayintake.LateCheckLimitDefault,
		PollInterval:        time.Second,
		FIFOBatch:           128,
		StateCacheFlights:   20000,
		MaxAttempts:         5,
		Backoff:             relay.DoublingBackoff(time.Second, 4),
		HandlerTimeout:      30 * time.Second,
		IgnoreRules:         []string{"LDM-*", "REGN-*", "RSTA-*", "EROR-*"},
		BackfillBatch:       200,
		BackfillMaxAttempts: 10,
		BackfillDeadline:    6 * time.Hour,
		MsgTopic:            "msgx.msg",
		SchdTopic:           "msgx.schd",
		MsgBatch:            500,
		SchdFlushLimit:      500,
		EventRetention:      72 * time.Hour,
		Flight:              flight.Settings{AbsentField: flight.AbsentKeep},
		SystemCode:          "RMS",
		AODBCode:            "AODB",
		RequestTimeout:      10 * time.Minute,
		ArchiveAfter:        7 * 24 * time.Hour,
		SnapLogRetention:    30 * 24 * time.Hour,
		FlightKeepDays:      7,
		FlightQuiet:         24 * time.Hour,
		HistoryRetention:    180 * 24 * time.Hour,
		RequestRetention:    30 * 24 * time.Hour,
		LifecycleEvery:      time.Minute,
	}
}

// param is one PARAM key: its documentation, how to read it from the config
// (for the settings table) and how to set it.
type param struct {
	key, doc string
	get      func(*Config) string
	set      func(*Config, string) error
}

func durParam(key, doc string, f func(*Config) *time.Duration) param {
	return param{key: key, doc: doc,
		get: func(c *Config) string { return f(c).String() },
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return err
			}
			if d < 0 {
				return fmt.Errorf("negative duration %s", d)
			}
			*f(c) = d
			return nil
		}}
}

func intParam(key, doc string, f func(*Config) *int) param {
	return param{key: key, doc: doc,
		get: func(c *Config) string { return strconv.Itoa(*f(c)) },
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return err
			}
			*f(c) = n
			return nil
		}}
}

func strParam(key, doc string, f func(*Config) *string) param {
	return param{key: key, doc: doc,
		get: func(c *Config) string { return *f(c) },
		set: func(c *Config, v string) error { *f(c) = v; return nil }}
}

func zoneParam(key, doc string, f func(*Config) **time.Location) param {
	return param{key: key, doc: doc,
		get: func(c *Config) string {
			if *f(c) == nil {
				return ""
			}
			return (*f(c)).String()
		},
		set: func(c *Config, v string) error {
			if v == "" {
				*f(c) = nil
				return nil
			}
			loc, err := time.LoadLocation(v)
			if err != nil {
				return err
			}
			*f(c) = loc
			return nil
		}}
}

func listParam(key, doc string, f func(*Config) *[]string) param {
	return param{key: key, doc: doc,
		get: func(c *Config) string { return strings.Join(*f(c), ",") },
		set: func(c *Config, v string) error {
			var out []string
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
			*f(c) = out
			return nil
		}}
}

// params lists every PARAM key in documentation order.
var params = []param{
	strParam("msgx.pipeline.name", "engine pipeline name (queue, watermark cursor and lock names)", func(c *Config) *string { return &c.Pipeline }),
	intParam("msgx.pipeline.claim-batch", "mailbox rows read per intake round", func(c *Config) *int { return &c.ClaimBatch }),
	durParam("msgx.pipeline.max-commit-delay", "how long a hole at W+1 may wait for a late commit before it is released as permanent; must cover the mailbox's id-allocation→visibility bound, as stated by the mailbox's database owner", func(c *Config) *time.Duration { return &c.MaxCommitDelay }),
	durParam("msgx.pipeline.late-check-window", "how long after its release a permanent hole is still checked for a row that committed late (counted, listed by /admin/late, never ingested automatically); 0s turns the check off", func(c *Config) *time.Duration { return &c.LateCheckWindow }),
	durParam("msgx.pipeline.late-check-interval", "least time between two late-row checks of the released holes", func(c *Config) *time.Duration { return &c.LateCheckInterval }),
	intParam("msgx.pipeline.late-check-limit", "most released hole ids one late-row check looks at (the oldest unfound ones in the window)", func(c *Config) *int { return &c.LateCheckLimit }),
	durParam("msgx.pipeline.poll-interval", "idle poll interval of intake, pump, write-back and dispatchers", func(c *Config) *time.Duration { return &c.PollInterval }),
	strParam("msgx.pipeline.cutover-watermark", "explicit cutover seeding: min, zero, max or a mailbox id; empty = none; refused on an instance with a watermark or messages", func(c *Config) *string { return &c.CutoverWatermark }),
	intParam("msgx.pipeline.fifo-batch", "contiguous FIFO heads one PostgreSQL transaction may carry (order and per-message outcome unchanged)", func(c *Config) *int { return &c.FIFOBatch }),
	intParam("msgx.pipeline.state-cache-flights", "flight states the pump keeps in memory between messages, each checked against its FLIGHT_SCHD row version (STATE_VERSION and xmin) before use, so unchanged flights are not read again; 0 = off", func(c *Config) *int { return &c.StateCacheFlights }),
	intParam("msgx.pipeline.max-attempts", "attempt limit before DEAD(EXHAUSTED)", func(c *Config) *int { return &c.MaxAttempts }),
	{key: "msgx.pipeline.backoff", doc: "retry schedule: at most max-attempts−1 comma-separated durations (more is refused at start-up); a shorter schedule repeats its last level for the remaining attempts",
		get: func(c *Config) string {
			s := make([]string, len(c.Backoff))
			for i, d := range c.Backoff {
				s[i] = d.String()
			}
			return strings.Join(s, ",")
		},
		set: func(c *Config, v string) error {
			var out []time.Duration
			for _, s := range strings.Split(v, ",") {
				d, err := time.ParseDuration(strings.TrimSpace(s))
				if err != nil {
					return err
				}
				out = append(out, d)
			}
			c.Backoff = out
			return nil
		}},
	durParam("msgx.pipeline.handler-timeout", "bound of one processing attempt; overrun = FAILED(TIMEOUT)", func(c *Config) *time.Duration { return &c.HandlerTimeout }),
	{key: "msgx.identity.include-day-boundary", doc: "append |YYYYMMDD (day of DTTM) to the identity SNDR|TYPE|STYP|SEQN, for senders whose SEQN restarts daily; never change on a live pipeline",
		get: func(c *Config) string { return strconv.FormatBool(c.IncludeDayBoundary) },
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return err // a refused value leaves the identity setting as it was
			}
			c.IncludeDayBoundary = b
			return nil
		}},
	listParam("msgx.pipeline.ignore-rules", "ignore rules TYPE-STYP or TYPE-*, case-insensitive (baseline LDM/REGN/RSTA/EROR)", func(c *Config) *[]string { return &c.IgnoreRules }),
	intParam("msgx.pipeline.backfill-batch", "processing marks written back per round", func(c *Config) *int { return &c.BackfillBatch }),
	intParam("msgx.pipeline.backfill-max-attempts", "transient write-back failures that raise an alert; never abandons", func(c *Config) *int { return &c.BackfillMaxAttempts }),
	durParam("msgx.pipeline.backfill-deadline", "R: forced-write window and transient-failure deadline of the mark write-back, from ENQUEUED_AT; must be ≤ R_keep", func(c *Config) *time.Duration { return &c.BackfillDeadline }),
	strParam("msgx.kafka.msg-topic", "Kafka topic of change notices (KAFKA:msg, key FLID)", func(c *Config) *string { return &c.MsgTopic }),
	strParam("msgx.kafka.schd-topic", "compacted Kafka topic of full flight states (KAFKA:schd, key FLID, null = deleted)", func(c *Config) *string { return &c.SchdTopic }),
	intParam("msgx.msg.batch", "change notices published per dispatcher round", func(c *Config) *int { return &c.MsgBatch }),
	intParam("msgx.schd.flush-limit", "latest flight states published per dispatcher round", func(c *Config) *int { return &c.SchdFlushLimit }),
	durParam("msgx.pipeline.event-retention", "how long SENT outbox events are kept, from SENT_AT", func(c *Config) *time.Duration { return &c.EventRetention }),
	{key: "msgx.flight.absent-field", doc: "what a field a SCHD DNLD/RESP record does not carry means: keep (the requirements' design) or clear (SIS 3.16 note 4)",
		get: func(c *Config) string { return string(c.Flight.AbsentField) },
		set: func(c *Config, v string) error { c.Flight.AbsentField = flight.AbsentRule(v); return nil }},
	zoneParam("msgx.flight.airport-zone", "IANA zone of the airport; OPERATION_DAY is a date in it; empty = Asia/Shanghai", func(c *Config) **time.Location { return &c.Flight.AirportZone }),
	zoneParam("msgx.flight.message-zone", "IANA zone of the SIS wall-clock times (SODT …); empty = the airport zone", func(c *Config) **time.Location { return &c.Flight.MessageZone }),
	durParam("msgx.flight.day-cut", "local time of day at which an operating day starts (e.g. 4h: 03:59 belongs to the day before)", func(c *Config) *time.Duration { return &c.Flight.DayCut }),
	strParam("msgx.request.system-code", "our system code: SNDR of REQT messages, the sender of REQ_TRACK's open-request key", func(c *Config) *string { return &c.SystemCode }),
	strParam("msgx.request.aodb-code", "RCVR of REQT messages", func(c *Config) *string { return &c.AODBCode }),
	durParam("msgx.request.timeout", "a SENT request not answered within this becomes EXPIRED", func(c *Config) *time.Duration { return &c.RequestTimeout }),
	durParam("msgx.request.clock-skew", "RESP guard tolerance: a RESP whose DTTM is up to this much older than the request's send time still matches", func(c *Config) *time.Duration { return &c.ClockSkew }),
	durParam("msgx.lifecycle.archive-after", "terminal, acknowledged PROC_STATE rows older than this move to history, leaving a dedupe shadow", func(c *Config) *time.Duration { return &c.ArchiveAfter }),
	durParam("msgx.lifecycle.snap-log-retention", "SCHD_SNAP_LOG retention", func(c *Config) *time.Duration { return &c.SnapLogRetention }),
	intParam("msgx.lifecycle.flight-keep-days", "flights of operating days older than this many days are history candidates", func(c *Config) *int { return &c.FlightKeepDays }),
	durParam("msgx.lifecycle.flight-quiet", "…and must also have been unchanged this long (quiet period)", func(c *Config) *time.Duration { return &c.FlightQuiet }),
	durParam("msgx.lifecycle.history-retention", "archived flights are purged after this", func(c *Config) *time.Duration { return &c.HistoryRetention }),
	durParam("msgx.lifecycle.request-retention", "closed REQ_TRACK rows are purged after this", func(c *Config) *time.Duration { return &c.RequestRetention }),
	durParam("msgx.lifecycle.every", "pause between two lifecycle passes", func(c *Config) *time.Duration { return &c.LifecycleEvery }),
}

// Set sets the PARAM key to value. An unknown key or an unparsable value is
// an error naming the key.
func (c *Config) Set(key, value string) error {
	i := slices.IndexFunc(params, func(p param) bool { return p.key == key })
	if i < 0 {
		return fmt.Errorf("msgx: unknown setting %q (see `relay msgx params`)", key)
	}
	if err := params[i].set(c, strings.TrimSpace(value)); err != nil {
		return fmt.Errorf("msgx: setting %s=%q: %w", key, value, err)
	}
	return nil
}

// Validate checks the configuration and names the first bad setting.
func (c *Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("msgx: invalid %s: %s", key, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Pipeline == "":
		return bad("msgx.pipeline.name", "empty")
	case c.ClaimBatch < 1:
		return bad("msgx.pipeline.claim-batch", "%d < 1", c.ClaimBatch)
	case c.MaxCommitDelay <= 0:
		return bad("msgx.pipeline.max-commit-delay", "must be positive")
	case c.LateCheckInterval <= 0:
		return bad("msgx.pipeline.late-check-interval", "must be positive")
	case c.LateCheckLimit < 1:
		return bad("msgx.pipeline.late-check-limit", "%d < 1", c.LateCheckLimit)
	case c.PollInterval <= 0:
		return bad("msgx.pipeline.poll-interval", "must be positive")
	case !cutoverMode(c.CutoverWatermark):
		// Caught here rather than by the seeding itself, which runs only once
		// the pipeline lock is held (seed 000 §4.3).
		return bad("msgx.pipeline.cutover-watermark", "%q: want min, zero, max, a mailbox id ≥ 0, or empty", c.CutoverWatermark)
	case c.FIFOBatch < 1 || c.FIFOBatch > relay.FIFOBatchMax:
		return bad("msgx.pipeline.fifo-batch", "%d outside [1, %d]", c.FIFOBatch, relay.FIFOBatchMax)
	case c.StateCacheFlights < 0:
		return bad("msgx.pipeline.state-cache-flights", "%d < 0", c.StateCacheFlights)
	case c.MaxAttempts < 1:
		return bad("msgx.pipeline.max-attempts", "%d < 1", c.MaxAttempts)
	case len(c.Backoff) > c.MaxAttempts-1:
		return bad("msgx.pipeline.backoff", "%d levels for max-attempts %d: at most %d (a level beyond that can never fire; a shorter schedule repeats its last level)",
			len(c.Backoff), c.MaxAttempts, c.MaxAttempts-1)
	case c.BackfillBatch < 1:
		return bad("msgx.pipeline.backfill-batch", "%d < 1", c.BackfillBatch)
	case c.BackfillDeadline <= 0:
		return bad("msgx.pipeline.backfill-deadline", "must be positive")
	case c.MsgTopic == "" || c.SchdTopic == "" || c.MsgTopic == c.SchdTopic:
		return bad("msgx.kafka.msg-topic/schd-topic", "both required and distinct")
	case c.MsgBatch < 1:
		return bad("msgx.msg.batch", "%d < 1", c.MsgBatch)
	case c.SchdFlushLimit < 1:
		return bad("msgx.schd.flush-limit", "%d < 1", c.SchdFlushLimit)
	case c.SystemCode == "" || strings.Contains(c.SystemCode, "|"):
		return bad("msgx.request.system-code", "%q", c.SystemCode)
	case c.RequestTimeout <= 0:
		// 0 would expire every request in the Pass that sends it: no response
		// could ever match (seed 000 §7.2).
		return bad("msgx.request.timeout", "must be positive")
	case c.FlightKeepDays < 1:
		return bad("msgx.lifecycle.flight-keep-days", "%d < 1", c.FlightKeepDays)
	case c.LifecycleEvery <= 0:
		return bad("msgx.lifecycle.every", "must be positive")
	}
	for i, d := range c.Backoff {
		if d < 0 {
			return bad("msgx.pipeline.backoff", "level %d is negative (%s)", i+1, d)
		}
	}
	if err := c.Flight.Validate(); err != nil {
		return fmt.Errorf("msgx: %w", err)
	}
	return nil
}

// cutoverMode reports whether v is a cutover seeding mode intake accepts:
// "" (no seeding), min, zero, max or a decimal mailbox id ≥ 0.
func cutoverMode(v string) bool {
	switch v {
	case "", "min", "zero", "max":
		return true
	}
	id, err := strconv.ParseInt(v, 10, 64)
	return err == nil && id >= 0
}

// WriteParams writes the settings table (key, value in c, meaning) to w.
func WriteParams(w io.Writer, c *Config) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range params {
		v := p.get(c)
		if v == "" {
			v = `""`
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.key, v, p.doc)
	}
	return tw.Flush()
}

// WriteParamsMarkdown writes the settings table of docs/msgx/settings.md:
// every PARAM key with its value in c and its meaning.
func WriteParamsMarkdown(w io.Writer, c *Config) error {
	if _, err := fmt.Fprintln(w, "| key | default | meaning |\n|---|---|---|"); err != nil {
		return err
	}
	for _, p := range params {
		v := p.get(c)
		if v == "" {
			v = `""`
		}
		if _, err := fmt.Fprintf(w, "| `%s` | `%s` | %s |\n", p.key, v, strings.ReplaceAll(p.doc, "|", `\|`)); err != nil {
			return err
		}
	}
	return nil
}
