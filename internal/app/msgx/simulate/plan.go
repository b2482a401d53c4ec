package simulate

import (
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
)

// Category says why the simulator generated a message.
type Category string

const (
	// CategoryPlan: a SCHD-DNLD package of the daily plan.
	CategoryPlan Category = "plan"
	// CategoryReplan: a SCHD-DNLD package re-sending planned ACTIVE flights.
	CategoryReplan Category = "replan"
	// CategoryUpdate: a FLOP dynamic change.
	CategoryUpdate Category = "update"
	// CategoryDeletion: an FDEL.
	CategoryDeletion Category = "deletion"
	// CategoryAdhoc: a SCHD-ADFT creating one new flight.
	CategoryAdhoc Category = "adhoc"
	// CategoryDuplicate: the exact bytes of an earlier message re-sent.
	CategoryDuplicate Category = "duplicate"
	// CategoryMalformed: NULL, empty or invalid content, dead at decode
	// (MALFORMED; a wrong declared RCNT is PROTOCOL).
	CategoryMalformed Category = "malformed"
	// CategoryIgnored: an LDM, REGN, RSTA or EROR message.
	CategoryIgnored Category = "ignored"
	// CategoryProtocol: a SCHD-DNLD package rejected whole.
	CategoryProtocol Category = "protocol"
	// CategoryRollback: an insert that is rolled back, never visible.
	CategoryRollback Category = "rollback"
)

// Message is one generated mailbox insert.
type Message struct {
	// Category is why it was generated.
	Category Category
	// Variant names the case within the category, from the model's view of
	// its effect: e.g. "set", "clear", "noop", "maid-move", "link", "unlink",
	// "on-deleted" (update); "single", "cascade", "repeat" (deletion);
	// "stale" (a duplicate of a message whose effect was since overwritten);
	// "dup-flid", "moved-day" (protocol); "null", "empty", "truncated" …
	// (malformed); the TYPE (ignored).
	Variant string
	// Raw is MSGCONTENT; nil means NULL.
	Raw []byte
	// Msg is the message Raw encodes (sisxml.Decode(Raw) equals it); nil for
	// CategoryMalformed.
	Msg *sisxml.Message
	// Outcome is the expected PROCFLAG; "" for CategoryRollback (never committed).
	Outcome Outcome
	// Reason details Outcome: "" for a plain success, "duplicate-of:<plan
	// index>", "ignored", "MALFORMED", "PROTOCOL: …", "flight deleted",
	// "already deleted".
	Reason string
	// Original is the plan index of the message a duplicate repeats; -1 otherwise.
	Original int
	// Late: the insert is committed late (Options.LateBy, after later rows).
	Late bool
	// NullReceiveTime: RECEIVETIME is written NULL.
	NullReceiveTime bool
}

// Identity returns the message's business identity SNDR|TYPE|STYP|SEQN, or
// "" for a malformed message.
func (m *Message) Identity() string {
	if m.Msg == nil {
		return ""
	}
	return sisxml.Identity(m.Msg.Meta, false)
}

// Plan is a generated operating day: the mailbox inserts in order, each with
// its raw content and expected outcome, and the model of the expected final
// flight states. A Plan is immutable and safe for concurrent use.
type Plan struct {
	opts  Options
	msgs  []Message
	model *Model
}

// NewPlan generates the plan for o (defaults applied, see Options). Equal
// Options give equal plans. It panics if o is invalid (check with
// Options.Validate first when o comes from a user).
func NewPlan(o Options) *Plan {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		panic(err)
	}
	return generate(o)
}

// Options returns the plan's options, defaults applied (a count of none is
// -1); NewPlan(p.Options()) regenerates the same plan.
func (p *Plan) Options() Options { return p.opts }

// Messages returns the mailbox inserts in insert (= mailbox id) order.
// The slice is the plan's own: do not modify it.
func (p *Plan) Messages() []Message { return p.msgs }

// Model returns the expected final flight states.
func (p *Plan) Model() *Model { return p.model }

// Counts summarises a plan by category, variant and outcome.
type Counts struct {
	Messages        int              // every insert, rollbacks included
	Committed       int              // inserts that commit (every category but rollback)
	Categories      map[Category]int // inserts per category
	Variants        map[string]int   // inserts per "category/variant"
	FlopSubtypes    map[string]int   // CategoryUpdate messages per FLOP subtype
	PlanRecords     int              // FLGT records in the CategoryPlan packages
	Outcomes        map[Outcome]int  // committed rows per expected PROCFLAG
	Late            int              // inserts committed late
	NullReceiveTime int              // rows with a NULL RECEIVETIME
}

// Counts counts the plan's messages.
func (p *Plan) Counts() Counts {
	c := Counts{Categories: map[Category]int{}, Variants: map[string]int{}, FlopSubtypes: map[string]int{},
		Outcomes: map[Outcome]int{}}
	for i := range p.msgs {
		m := &p.msgs[i]
		c.Messages++
		c.Categories[m.Category]++
		c.Variants[string(m.Category)+"/"+m.Variant]++
		if m.Category == CategoryUpdate {
			c.FlopSubtypes[m.Msg.Meta.STYP]++
		}
		if m.Category == CategoryPlan {
			c.PlanRecords += len(m.Msg.Schd.Flights)
		}
		if m.Category == CategoryRollback {
			continue
		}
		c.Committed++
		c.Outcomes[m.Outcome]++
		if m.Late {
			c.Late++
		}
		if m.NullReceiveTime {
			c.NullReceiveTime++
		}
	}
	return c
}
