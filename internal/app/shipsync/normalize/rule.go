package normalize

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // window zones resolve the same on a ship without a zoneinfo directory
)

// Direction is which way a rule syncs its table.
type Direction string

// Directions. The ship emits events only for UPLINK and BOTH.
const (
	DirectionUplink   Direction = "UPLINK"
	DirectionDownlink Direction = "DOWNLINK"
	DirectionBoth     Direction = "BOTH"
)

// Priority is a rule's scheduling class (seed 004 §13): higher is more
// urgent. The zero value is "none" (an outcome with no rule).
type Priority int

// Priorities, least urgent first. PriorityNormal is a rule's default.
const (
	PriorityBulk Priority = iota + 1
	PriorityNormal
	PriorityHigh
	PriorityCritical
)

var priorityNames = map[Priority]string{
	PriorityBulk: "BULK", PriorityNormal: "NORMAL", PriorityHigh: "HIGH", PriorityCritical: "CRITICAL",
}

// String returns "CRITICAL", "HIGH", "NORMAL", "BULK", or "" for none.
func (p Priority) String() string { return priorityNames[p] }

// MarshalText writes the priority's name.
func (p Priority) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads CRITICAL, HIGH, NORMAL or BULK; "" leaves the default
// to rule validation.
func (p *Priority) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*p = 0
		return nil
	}
	for k, v := range priorityNames {
		if v == string(b) {
			*p = k
			return nil
		}
	}
	return errors.New("not CRITICAL, HIGH, NORMAL or BULK")
}

// Defaults of a rule's optional fields.
const (
	// FutureSkewDefault is how far in the future (past the trusted now) a
	// business time may be before it is refused under a dataset window.
	FutureSkewDefault = 5 * time.Minute
	// WindowZoneDefault is the zone day-based windows and DATE business
	// times are computed in.
	WindowZoneDefault = "UTC"
)

// Rule is the ship side of one rule version (seed 004 §8.1): which table it
// selects, which way it syncs, and how a change of that table becomes an
// event. Column names in a rule are the source table's, matched exactly;
// none may be a platform column (_sync_…, any case). The JSON names are the
// rules file's (docs/shipsync/normalize.md). A Rule in a RuleSet is
// validated and must not be changed.
type Rule struct {
	// ID and Version name the rule version events are produced under
	// (Version ≥ 1).
	ID      string `json:"id"`
	Version uint64 `json:"version"`
	// Direction is UPLINK, DOWNLINK or BOTH; a DOWNLINK rule emits nothing
	// on the ship.
	Direction Direction `json:"direction"`
	// Database and Table are the source table the rule selects (one rule
	// per table in a RuleSet).
	Database string `json:"database"`
	Table    string `json:"table"`
	// KeyColumns are the table's primary key columns in key order (source
	// names); a change whose key differs is blocked ("key-mismatch").
	KeyColumns []string `json:"key_columns"`
	// Revisioned (file default true): the table has the platform's _sync_*
	// columns and events carry base/result revisions from them. False: a
	// table without them, synced one way (UPLINK or DOWNLINK, not BOTH) as
	// an overwrite — each event's result revision is derived from its event
	// id and there is no base, so concurrent changes cannot be detected as
	// conflicts.
	Revisioned bool `json:"-"`
	// IncludedColumns, when set, are the only columns carried (it must list
	// every key column); ExcludedColumns are never carried (no key column).
	// At most one of the two is set.
	IncludedColumns []string `json:"included_columns,omitempty"`
	ExcludedColumns []string `json:"excluded_columns,omitempty"`
	// FieldMappings renames source columns in the event (source → event
	// column name, a plain identifier); unmapped columns keep their names.
	FieldMappings map[string]string `json:"field_mappings,omitempty"`
	// Transforms run in order on the named source columns' values (never on
	// key columns): whitelisted, versioned functions from the registry.
	Transforms []TransformSpec `json:"transforms,omitempty"`
	// RowFilter conditions are ANDed; a change whose row (after, or before
	// for DELETE) fails one is skipped ("filtered").
	RowFilter []Condition `json:"row_filter,omitempty"`
	// BusinessTimeColumn names the column holding the business time
	// (business_occurred_at).
	BusinessTimeColumn string `json:"business_time_column,omitempty"`
	// DatasetWindow, when set, limits the rule to rows whose business time
	// is at or after trustedNow − window (left-closed): a Go duration
	// ("36h") or whole days ("30d", calendar days in WindowZone). Needs
	// BusinessTimeColumn.
	DatasetWindow string `json:"dataset_window,omitempty"`
	// WindowZone is an IANA zone (default UTC).
	WindowZone string `json:"window_zone,omitempty"`
	// FutureSkew (a Go duration, default 5m) is how far past trustedNow a
	// business time may lie under a window.
	FutureSkew string `json:"future_skew,omitempty"`
	// Priority is the scheduling class (default NORMAL).
	Priority Priority `json:"priority,omitempty"`

	c compiled
}

// compiled is what validation derives from a Rule.
type compiled struct {
	included   map[string]bool
	excluded   map[string]bool
	keys       map[string]bool
	transforms map[string][]boundTransform
	filter     []condition
	window     time.Duration
	windowDays int
	zone       *time.Location
	skew       time.Duration
}

// Uplink reports whether the ship emits events for this rule.
func (r *Rule) Uplink() bool { return r.Direction == DirectionUplink || r.Direction == DirectionBoth }

// HasWindow reports whether the rule has a dataset window.
func (r *Rule) HasWindow() bool { return r.c.window > 0 || r.c.windowDays > 0 }

// WindowStart is where the rule's dataset window starts for trustedNow:
// trustedNow − window, or for a day window the same wall-clock time that
// many calendar days earlier in WindowZone. Zero without a window.
func (r *Rule) WindowStart(trustedNow time.Time) time.Time {
	switch {
	case r.c.windowDays > 0:
		return trustedNow.In(r.c.zone).AddDate(0, 0, -r.c.windowDays)
	case r.c.window > 0:
		return trustedNow.Add(-r.c.window)
	}
	return time.Time{}
}

// UnmarshalJSON reads a rule of the rules file: unknown fields are refused,
// and revisioned defaults to true.
func (r *Rule) UnmarshalJSON(b []byte) error {
	type plain Rule
	aux := struct {
		*plain
		Revisioned *bool `json:"revisioned"`
	}{plain: (*plain)(r)}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return err
	}
	r.Revisioned = aux.Revisioned == nil || *aux.Revisioned
	return nil
}

// MarshalJSON writes the rule in the rules file's form.
func (r Rule) MarshalJSON() ([]byte, error) {
	type plain Rule
	return json.Marshal(struct {
		plain
		Revisioned bool `json:"revisioned"`
	}{plain(r), r.Revisioned})
}

// Condition is one row-filter condition: Column Op Value (or Values for
// "in"). Ops: eq, ne, lt, le, gt, ge (need Value), in (needs Values),
// is_null, not_null (neither). Values are text, read as the column's type
// when the row is filtered (see docs/shipsync/normalize.md); a comparison
// with a NULL column is false, as in SQL.
type Condition struct {
	Column string   `json:"column"`
	Op     string   `json:"op"`
	Value  *string  `json:"value,omitempty"`
	Values []string `json:"values,omitempty"`
}

// TransformSpec applies the registered transform Transform ("name@version",
// e.g. "trim@1", "truncate@1") with its integer Args to Column.
type TransformSpec struct {
	Column    string  `json:"column"`
	Transform string  `json:"transform"`
	Args      []int64 `json:"args,omitempty"`
}

// RuleError is a rule that failed validation: which rule (its index in the
// file and its id) and which field, and what is wrong. It never quotes
// anything but the rule's own names.
type RuleError struct {
	Index   int
	ID      string
	Field   string
	Problem string
}

// Error returns "normalize: rule ID (rules[i]): FIELD: PROBLEM".
func (e *RuleError) Error() string {
	return fmt.Sprintf("normalize: rule %q (rules[%d]): %s: %s", bound(e.ID, 64), e.Index, e.Field, e.Problem)
}

// RuleSet is a validated set of rules, at most one per database.table. It
// is immutable and safe for concurrent use.
type RuleSet struct {
	rules   []*Rule
	byTable map[string]*Rule
}

// rulesFile is the rules file: {"rules": [...]}.
type rulesFile struct {
	Rules []Rule `json:"rules"`
}

// LoadRules reads a rules file (JSON, {"rules": [...]}, unknown fields
// refused) and validates it like NewRuleSet. A validation error is a
// *RuleError naming the rule and the field.
func LoadRules(r io.Reader) (*RuleSet, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f rulesFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("normalize: rules file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("normalize: rules file: trailing data")
	}
	return NewRuleSet(f.Rules...)
}

// NewRuleSet validates rules and builds a RuleSet. Fields are taken as
// given (note Revisioned: the file format defaults it to true, a Go zero
// value is false). Rule ids must be unique, and so must database.table.
func NewRuleSet(rules ...Rule) (*RuleSet, error) {
	s := &RuleSet{byTable: make(map[string]*Rule, len(rules))}
	ids := map[string]bool{}
	for i := range rules {
		r := rules[i] // a copy: the set owns its rules
		if err := r.compile(); err != nil {
			var re *RuleError
			if errors.As(err, &re) {
				re.Index = i
			}
			return nil, err
		}
		if ids[r.ID] {
			return nil, &RuleError{Index: i, ID: r.ID, Field: "id", Problem: "used by another rule"}
		}
		ids[r.ID] = true
		k := tableKey(r.Database, r.Table)
		if s.byTable[k] != nil {
			return nil, &RuleError{Index: i, ID: r.ID, Field: "table", Problem: "another rule selects the same database.table"}
		}
		s.byTable[k] = &r
		s.rules = append(s.rules, &r)
	}
	return s, nil
}

// Lookup returns the rule for database.table, or nil. A nil RuleSet has no
// rules.
func (s *RuleSet) Lookup(database, table string) *Rule {
	if s == nil {
		return nil
	}
	return s.byTable[tableKey(database, table)]
}

// Rules returns the set's rules in file order.
func (s *RuleSet) Rules() []*Rule {
	if s == nil {
		return nil
	}
	return slices.Clone(s.rules)
}

func tableKey(db, table string) string { return db + "\x00" + table }

// identifier is what an event column name given by a mapping may be: the
// shore quotes it into SQL (shore.Rule's columns follow the same pattern).
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// isSyncColumn reports whether name is one of the platform's _sync_*
// columns (any case).
func isSyncColumn(name string) bool {
	return len(name) >= 6 && strings.EqualFold(name[:6], "_sync_")
}

// compile validates r and fills r.c.
func (r *Rule) compile() error {
	bad := func(field, problem string) error {
		return &RuleError{ID: r.ID, Field: field, Problem: problem}
	}
	switch {
	case r.ID == "" || len(r.ID) > 256 || !printable(r.ID):
		return bad("id", "must be 1–256 printable characters")
	case r.Version < 1:
		return bad("version", "must be ≥ 1")
	case r.Direction != DirectionUplink && r.Direction != DirectionDownlink && r.Direction != DirectionBoth:
		return bad("direction", "must be UPLINK, DOWNLINK or BOTH")
	case r.Database == "" || len(r.Database) > 256 || !printable(r.Database):
		return bad("database", "must be 1–256 printable characters")
	case r.Table == "" || len(r.Table) > 256 || !printable(r.Table):
		return bad("table", "must be 1–256 printable characters")
	case len(r.KeyColumns) == 0:
		return bad("key_columns", "missing")
	case !r.Revisioned && r.Direction == DirectionBoth:
		return bad("revisioned", "a rule that is not revisioned syncs one way only (UPLINK or DOWNLINK)")
	case len(r.IncludedColumns) > 0 && len(r.ExcludedColumns) > 0:
		return bad("excluded_columns", "set together with included_columns")
	}
	if r.Priority == 0 {
		r.Priority = PriorityNormal
	}
	if _, ok := priorityNames[r.Priority]; !ok {
		return bad("priority", "must be CRITICAL, HIGH, NORMAL or BULK")
	}
	r.c = compiled{}
	var err error
	if r.c.keys, err = columnSet(r.KeyColumns, "key_columns", bad); err != nil {
		return err
	}
	if r.c.included, err = columnSet(r.IncludedColumns, "included_columns", bad); err != nil {
		return err
	}
	if r.c.excluded, err = columnSet(r.ExcludedColumns, "excluded_columns", bad); err != nil {
		return err
	}
	for i, k := range r.KeyColumns {
		if r.c.excluded[k] {
			return bad(fmt.Sprintf("excluded_columns (key_columns[%d])", i), "a key column cannot be excluded")
		}
		if len(r.c.included) > 0 && !r.c.included[k] {
			return bad(fmt.Sprintf("included_columns (key_columns[%d])", i), "must list every key column")
		}
	}
	if err := r.compileMappings(bad); err != nil {
		return err
	}
	if err := r.compileTransforms(bad); err != nil {
		return err
	}
	if err := r.compileFilter(bad); err != nil {
		return err
	}
	return r.compileWindow(bad)
}

func (r *Rule) compileMappings(bad func(string, string) error) error {
	targets := map[string]string{}
	srcs := slices.Sorted(maps.Keys(r.FieldMappings))
	for _, src := range srcs {
		to := r.FieldMappings[src]
		field := "field_mappings[" + strconv.Quote(bound(src, 64)) + "]"
		if err := checkColumnName(src, field, bad); err != nil {
			return err
		}
		switch {
		case !identifier.MatchString(to):
			return bad(field, "target is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, ≤ 64)")
		case isSyncColumn(to):
			return bad(field, "target is a platform column (_sync_…)")
		case targets[to] != "":
			return bad(field, "target used by another mapping")
		case r.c.excluded[src]:
			return bad(field, "maps an excluded column")
		case len(r.c.included) > 0 && !r.c.included[src]:
			return bad(field, "maps a column that is not included")
		}
		targets[to] = src
	}
	// A target may not collide with a column that keeps its name.
	for _, set := range [][]string{r.KeyColumns, r.IncludedColumns} {
		for _, c := range set {
			if src := targets[c]; src != "" && src != c {
				if _, mapped := r.FieldMappings[c]; !mapped {
					return bad("field_mappings["+strconv.Quote(bound(src, 64))+"]", "target is the name of another column")
				}
			}
		}
	}
	return nil
}

func (r *Rule) compileWindow(bad func(string, string) error) error {
	if r.BusinessTimeColumn != "" {
		if err := checkColumnName(r.BusinessTimeColumn, "business_time_column", bad); err != nil {
			return err
		}
	}
	zone := cmp.Or(r.WindowZone, WindowZoneDefault)
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "Local" {
		return bad("window_zone", "not an IANA time zone")
	}
	r.c.zone = loc
	r.c.skew = FutureSkewDefault
	if r.FutureSkew != "" {
		d, err := time.ParseDuration(r.FutureSkew)
		if err != nil || d < 0 {
			return bad("future_skew", "not a duration ≥ 0 (e.g. 5m)")
		}
		r.c.skew = d
	}
	if r.DatasetWindow == "" {
		return nil
	}
	if r.BusinessTimeColumn == "" {
		return bad("dataset_window", "needs business_time_column")
	}
	if days, ok := strings.CutSuffix(r.DatasetWindow, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 100000 || days[0] == '+' {
			return bad("dataset_window", "not a whole number of days ≥ 1 (e.g. 30d)")
		}
		r.c.windowDays = n
		return nil
	}
	d, err := time.ParseDuration(r.DatasetWindow)
	if err != nil || d <= 0 {
		return bad("dataset_window", "not a positive duration (e.g. 36h) or days (e.g. 30d)")
	}
	r.c.window = d
	return nil
}

// columnSet checks a list of source column names and returns it as a set.
func columnSet(cols []string, field string, bad func(string, string) error) (map[string]bool, error) {
	set := make(map[string]bool, len(cols))
	for i, c := range cols {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := checkColumnName(c, f, bad); err != nil {
			return nil, err
		}
		if set[c] {
			return nil, bad(f, "listed twice")
		}
		set[c] = true
	}
	return set, nil
}

// checkColumnName checks a source column name a rule refers to.
func checkColumnName(c, field string, bad func(string, string) error) error {
	switch {
	case c == "" || len(c) > 256 || !printable(c):
		return bad(field, "not a column name (1–256 printable characters)")
	case isSyncColumn(c):
		return bad(field, "a platform column (_sync_…) cannot be named by a rule")
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// bound cuts s to n bytes at most (on a rune boundary) for an error text.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}
