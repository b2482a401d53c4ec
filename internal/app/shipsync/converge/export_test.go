package converge

import "context"

// HistoryOf has Run tell, after its reconciliation, the history a failed
// check would print for record id of table t, into *into.
func HistoryOf(o *Options, t, id string, into *string) {
	o.afterReconcile = func(ctx context.Context, r *run) { *into = r.history(ctx, t, id) }
}
