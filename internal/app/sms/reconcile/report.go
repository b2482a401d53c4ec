package reconcile

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Result is a check's verdict.
type Result string

// The verdicts.
const (
	// Pass: every rule of the check holds.
	Pass Result = "pass"
	// Fail: at least one rule is broken (Check.Failures says which).
	Fail Result = "FAIL"
	// InFlight: nothing is broken, but work is still under way, which
	// Options.InFlight allows (after a drain it would be a failure).
	InFlight Result = "in flight"
)

// The checks' names, in the order Run makes them.
const (
	CheckLost    = "no-message-lost"
	CheckUnique  = "ids-unique"
	CheckSubmits = "submits-and-retries"
	CheckDrained = "drained"
	CheckLedger  = "ledger"
	CheckHealth  = "db-health"
)

// Check is one named check of a Report.
type Check struct {
	// Name is one of the Check… constants.
	Name string
	// Result is Fail when Failures is not empty, else InFlight when work
	// was found in flight (and allowed), else Pass.
	Result Result
	// Figures are what was counted, one line each; a part that could not
	// be checked says so here ("not checked: …", "not applicable: …").
	Figures []string
	// Failures are the broken rules, one line each, with counts and at
	// most Options.Examples example ids.
	Failures []string

	inFlight bool
}

func (c *Check) figure(format string, args ...any) {
	c.Figures = append(c.Figures, fmt.Sprintf(format, args...))
}

// fail records a broken rule; examples (ids or keys) are appended.
func (c *Check) fail(examples []string, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if len(examples) > 0 {
		s += " (e.g. " + strings.Join(examples, ", ") + ")"
	}
	c.Failures = append(c.Failures, s)
}

// unfinished records work still under way: a failure after a drain, a
// figure when in-flight work is allowed.
func (c *Check) unfinished(allowed bool, examples []string, format string, args ...any) {
	if allowed {
		c.inFlight = true
		c.figure("in flight: "+format, args...)
		return
	}
	c.fail(examples, format, args...)
}

func (c *Check) finish() {
	switch {
	case len(c.Failures) > 0:
		c.Result = Fail
	case c.inFlight:
		c.Result = InFlight
	default:
		c.Result = Pass
	}
}

// Report is what Run found: the six checks in order.
type Report struct {
	Checks []*Check
}

// OK reports whether no check failed (InFlight is not a failure).
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if c.Result == Fail {
			return false
		}
	}
	return true
}

// Check returns the check named name, or nil.
func (r *Report) Check(name string) *Check {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Failed lists the names of the failed checks.
func (r *Report) Failed() []string {
	var out []string
	for _, c := range r.Checks {
		if c.Result == Fail {
			out = append(out, c.Name)
		}
	}
	return out
}

// Write prints the report as a table, one row per figure and per failure
// (failures marked "✗"), then a verdict line.
func (r *Report) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tFIGURES")
	for _, c := range r.Checks {
		lines := append([]string{}, c.Figures...)
		for _, f := range c.Failures {
			lines = append(lines, "✗ "+f)
		}
		if len(lines) == 0 {
			lines = []string{""}
		}
		for i, l := range lines {
			if i == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Result, l)
			} else {
				fmt.Fprintf(tw, "\t\t%s\n", l)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.OK() {
		_, err := fmt.Fprintf(w, "reconcile: ok (%d checks)\n", len(r.Checks))
		return err
	}
	_, err := fmt.Fprintf(w, "reconcile: FAILED: %s\n", strings.Join(r.Failed(), ", "))
	return err
}

// ids formats example ids.
func ids(v []int64) []string {
	out := make([]string, len(v))
	for i, id := range v {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}
