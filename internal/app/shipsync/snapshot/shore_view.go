package snapshot

import (
	"context"
	_ "embed" // shore_queries.sql
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/sqlfile"
)

//go:embed shore_queries.sql
var shoreSQL string

var shoreStmts = sqlfile.MustParse("snapshot/shore_queries.sql", shoreSQL, "ShoreBaselines")

// ShoreBaseline is what the shore received of one snapshot task of one
// node: the SNAPSHOT events of the task's stream and where they stand. The
// task's own state (PENDING … COMPLETED) is the ship's (List); the shore
// sees its baseline arrive and apply.
type ShoreBaseline struct {
	Node   string
	TaskID string
	RuleID string
	// RuleVersion is the rule version of the task's events.
	RuleVersion uint64
	// Received are the events stored; Applied, Conflicts and Rejected those
	// with that result (the rest wait for the applier).
	Received, Applied, Conflicts, Rejected int64
	// First and Last are when the first and the latest event arrived.
	First, Last time.Time
}

// ShoreBaselines lists the snapshot baselines the shore received, of node
// (all nodes when ""), oldest first, from the shore's PostgreSQL pool: the
// management console's snapshot view on the shore. ctx governs the query.
func ShoreBaselines(ctx context.Context, pool *pgxpool.Pool, node string) ([]ShoreBaseline, error) {
	rows, err := pool.Query(ctx, shoreStmts["ShoreBaselines"], node)
	if err != nil {
		return nil, fmt.Errorf("snapshot: list shore baselines: %w", err)
	}
	defer rows.Close()
	var out []ShoreBaseline
	for rows.Next() {
		var b ShoreBaseline
		var stream string
		var version int64
		if err := rows.Scan(&b.Node, &stream, &b.RuleID, &version, &b.Received, &b.Applied, &b.Conflicts, &b.Rejected,
			&b.First, &b.Last); err != nil {
			return nil, fmt.Errorf("snapshot: list shore baselines: %w", err)
		}
		b.RuleVersion = uint64(version)
		b.TaskID = strings.TrimSuffix(strings.TrimPrefix(stream, "snapshot/"), "/0")
		b.First, b.Last = b.First.UTC(), b.Last.UTC()
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("snapshot: list shore baselines: %w", err)
	}
	return out, nil
}
