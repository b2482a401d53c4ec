package normalize

// ByID returns the rule whose id is id, or nil. A ship's remote applier
// resolves a downlink command's table by it: the command names the rule,
// and its database and table are the shore's. A nil RuleSet has no rules.
func (s *RuleSet) ByID(id string) *Rule {
	if s == nil {
		return nil
	}
	for _, r := range s.rules {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// Carries reports whether the rule carries column (a source column name):
// not a platform column, listed when the rule lists its included columns,
// and not excluded.
func (r *Rule) Carries(column string) bool {
	switch {
	case isSyncColumn(column), r.c.excluded[column]:
		return false
	case len(r.c.included) > 0:
		return r.c.included[column]
	}
	return true
}
