package shore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Rule is the shore side of one rule version: the table of the shore
// database its events write, the key and the columns they may carry. A
// registered version is immutable; a change is a new version.
type Rule struct {
	ID      string
	Version uint64
	// SourceTable is the table name events of the rule carry (the node's).
	SourceTable string
	// TargetTable is the table in the shore database the events write.
	TargetTable string
	// KeyColumns are the target's primary key columns, in key order; an
	// event's primary_key must name exactly these.
	KeyColumns []string
	// Columns are every column an event may carry (key columns included).
	Columns []string
	// InsertOverTombstone lets an INSERT re-create a record whose last known
	// state is deleted. Default (RegisterRule) true.
	InsertOverTombstone bool
	// Conflict is how the rule's conflicts are decided (zero: MANUAL).
	Conflict ConflictPolicy
}

// Conflict policies.
const (
	PolicyManual         = "MANUAL"
	PolicyShoreWins      = "SHORE_WINS"
	PolicyLastWriterWins = "LAST_WRITER_WINS"
)

// MaxSkewDefault is how far in the future a LAST_WRITER_WINS business time
// may be (against the shore's clock) and still count.
const MaxSkewDefault = 5 * time.Minute

// ConflictPolicy says how a rule's conflicts are decided.
type ConflictPolicy struct {
	// Policy is PolicyManual (the default), PolicyShoreWins or
	// PolicyLastWriterWins.
	Policy string
	// TimeColumn is LAST_WRITER_WINS's business time column (one of the
	// rule's columns).
	TimeColumn string
	// MaxSkew bounds how far in the future a time may be (default
	// MaxSkewDefault); a later one goes to an operator.
	MaxSkew time.Duration
	// TieDescending: equal times go to the higher node id (default the
	// lower).
	TieDescending bool
}

func (p ConflictPolicy) withDefaults() ConflictPolicy {
	p.Policy = cmp.Or(p.Policy, PolicyManual)
	if p.MaxSkew == 0 {
		p.MaxSkew = MaxSkewDefault
	}
	return p
}

func (p ConflictPolicy) tie() string {
	if p.TieDescending {
		return "NODE_DESC"
	}
	return "NODE_ASC"
}

// identifier is what a target table or column name may be: it is quoted
// into SQL, so nothing else is accepted.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ErrRuleExists: a rule version registered before with other content.
var ErrRuleExists = errors.New("shore: rule version already registered with other content")

// validate checks r's names and shape.
func (r *Rule) validate() error {
	switch {
	case r.ID == "" || len(r.ID) > 128:
		return errors.New("rule id must be 1–128 characters")
	case r.Version < 1 || r.Version > math.MaxInt64:
		return errors.New("rule version must be ≥ 1")
	case r.SourceTable == "":
		return errors.New("source table is empty")
	case !identifier.MatchString(r.TargetTable):
		return fmt.Errorf("target table %q is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, ≤ 64)", r.TargetTable)
	case len(r.KeyColumns) == 0:
		return errors.New("no key columns")
	}
	seen := map[string]bool{}
	for _, c := range r.Columns {
		if !identifier.MatchString(c) {
			return fmt.Errorf("column %q is not a plain identifier", c)
		}
		if strings.HasPrefix(strings.ToLower(c), "_sync_") {
			return fmt.Errorf("column %q: the _sync_ columns are the platform's", c)
		}
		if seen[strings.ToLower(c)] {
			return fmt.Errorf("column %q twice", c)
		}
		seen[strings.ToLower(c)] = true
	}
	for _, k := range r.KeyColumns {
		if !slices.Contains(r.Columns, k) {
			return fmt.Errorf("key column %q is not among the columns", k)
		}
	}
	switch p := r.Conflict; p.Policy {
	case PolicyManual, PolicyShoreWins:
	case PolicyLastWriterWins:
		if !slices.Contains(r.Columns, p.TimeColumn) {
			return fmt.Errorf("conflict policy %s: time column %q is not among the columns", p.Policy, p.TimeColumn)
		}
		if p.MaxSkew < 0 {
			return errors.New("conflict policy: max skew must not be negative")
		}
	default:
		return fmt.Errorf("conflict policy %q: must be %s, %s or %s", p.Policy, PolicyManual, PolicyShoreWins, PolicyLastWriterWins)
	}
	return nil
}

// RegisterRule registers r, audited. Registering the same version again
// with the same content does nothing; with other content it is refused
// (ErrRuleExists).
func (r *Registry) RegisterRule(ctx context.Context, rule Rule, a Audit) error {
	if err := a.validate(); err != nil {
		return err
	}
	rule.Conflict = rule.Conflict.withDefaults()
	if err := rule.validate(); err != nil {
		return fmt.Errorf("shore: register rule: %w", err)
	}
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		now := r.clock.Now()
		tag, err := tx.Exec(ctx, stmts["RuleInsert"], rule.ID, int64(rule.Version), rule.SourceTable, rule.TargetTable,
			rule.KeyColumns, rule.Columns, rule.InsertOverTombstone, now, rule.Conflict.Policy, rule.Conflict.TimeColumn,
			rule.Conflict.MaxSkew.Milliseconds(), rule.Conflict.tie())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			got, err := LoadRules(ctx, tx, []RuleRef{{rule.ID, rule.Version}})
			if err != nil {
				return err
			}
			if old := got[RuleRef{rule.ID, rule.Version}]; old == nil || !old.equal(&rule) {
				return ErrRuleExists
			}
			return nil
		}
		return audit(ctx, tx, now, a, "rule.register", "rule", fmt.Sprintf("%s@%d", rule.ID, rule.Version), nil,
			ptr(fmt.Sprintf("%s → %s key %s", rule.SourceTable, rule.TargetTable, strings.Join(rule.KeyColumns, ","))))
	})
	if err != nil {
		return fmt.Errorf("shore: register rule %s version %d: %w", rule.ID, rule.Version, err)
	}
	return nil
}

func (r *Rule) equal(o *Rule) bool {
	return r.ID == o.ID && r.Version == o.Version && r.SourceTable == o.SourceTable && r.TargetTable == o.TargetTable &&
		slices.Equal(r.KeyColumns, o.KeyColumns) && slices.Equal(r.Columns, o.Columns) &&
		r.InsertOverTombstone == o.InsertOverTombstone && r.Conflict == o.Conflict
}

// RuleRef names a rule version.
type RuleRef struct {
	ID      string
	Version uint64
}

// LoadRules reads the registered rules among refs (absent ones are missing
// from the map).
func LoadRules(ctx context.Context, q Querier, refs []RuleRef) (map[RuleRef]*Rule, error) {
	ids, vs := make([]string, len(refs)), make([]int64, len(refs))
	for i, r := range refs {
		ids[i], vs[i] = r.ID, int64(min(r.Version, math.MaxInt64))
	}
	rows, err := q.Query(ctx, stmts["RuleGetMany"], ids, vs)
	if err != nil {
		return nil, fmt.Errorf("shore: load rules: %w", err)
	}
	return collectRules(rows)
}

// RegisteredRules returns every registered rule version.
func (r *Registry) RegisteredRules(ctx context.Context) ([]*Rule, error) {
	rows, err := r.pool.Query(ctx, stmts["RuleRegistered"])
	if err != nil {
		return nil, fmt.Errorf("shore: rules: %w", err)
	}
	m, err := collectRules(rows)
	if err != nil {
		return nil, err
	}
	out := make([]*Rule, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Rule) int {
		return cmp.Or(strings.Compare(a.ID, b.ID), cmp.Compare(a.Version, b.Version))
	})
	return out, nil
}

func collectRules(rows pgx.Rows) (map[RuleRef]*Rule, error) {
	out := map[RuleRef]*Rule{}
	var r Rule
	var v, skew int64
	var tie string
	_, err := pgx.ForEachRow(rows, []any{&r.ID, &v, &r.SourceTable, &r.TargetTable, &r.KeyColumns, &r.Columns,
		&r.InsertOverTombstone, &r.Conflict.Policy, &r.Conflict.TimeColumn, &skew, &tie}, func() error {
		rule := r
		rule.Version = uint64(v)
		rule.Conflict.MaxSkew, rule.Conflict.TieDescending = time.Duration(skew)*time.Millisecond, tie == "NODE_DESC"
		rule.KeyColumns, rule.Columns = slices.Clone(r.KeyColumns), slices.Clone(r.Columns)
		out[RuleRef{rule.ID, rule.Version}] = &rule
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shore: load rules: %w", err)
	}
	return out, nil
}
