package relaysqlite

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

//go:embed queries.sql
var queriesSQL string

// Query names. Each must have a "-- name: <Name>" section in queries.sql; init
// panics on a missing one, so a typo fails every test at once.
const (
	qSavepoint             = "Savepoint"
	qRollbackToSavepoint   = "RollbackToSavepoint"
	qReleaseSavepoint      = "ReleaseSavepoint"
	qPragmaJournalMode     = "PragmaJournalMode"
	qMigrationTableExists  = "MigrationTableExists"
	qMigrationBootstrap    = "MigrationBootstrap"
	qMigrationVersions     = "MigrationVersions"
	qMigrationIsApplied    = "MigrationIsApplied"
	qMigrationRecord       = "MigrationRecord"
	qSequenceNext          = "SequenceNext"
	qMessageInsert         = "MessageInsert"
	qMessageGet            = "MessageGet"
	qMessageListUnfinished = "MessageListUnfinished"
	qMessageBindIdentity   = "MessageBindIdentity"
	qMessageIdentityOf     = "MessageIdentityOf"
	qMessageIdentityOwner  = "MessageIdentityOwner"
	qMessageComplete       = "MessageComplete"
	qMessageFail           = "MessageFail"
	qMessageExhaust        = "MessageExhaust"
	qMessageExistsByID     = "MessageExistsByID"
	qMessageClaim          = "MessageClaim"
	qMessageClaimPerKey    = "MessageClaimPerKey"
	qMessageReplay         = "MessageReplay"
	qMessageStats          = "MessageStats"
	qMessageExists         = "MessageExists"
	qCursorGet             = "CursorGet"
	qCursorSave            = "CursorSave"
	qCursorSeed            = "CursorSeed"
	qHoleInsert            = "HoleInsert"
	qHoleList              = "HoleList"
	qLockAcquire           = "LockAcquire"
	qLockRenew             = "LockRenew"
	qLockRelease           = "LockRelease"
)

var queryNames = []string{
	qSavepoint, qRollbackToSavepoint, qReleaseSavepoint, qPragmaJournalMode,
	qMigrationTableExists, qMigrationBootstrap, qMigrationVersions, qMigrationIsApplied, qMigrationRecord,
	qSequenceNext, qMessageInsert, qMessageGet, qMessageListUnfinished,
	qMessageBindIdentity, qMessageIdentityOf, qMessageIdentityOwner, qMessageComplete,
	qMessageFail, qMessageExhaust, qMessageExistsByID, qMessageClaim, qMessageClaimPerKey,
	qMessageReplay, qMessageStats, qMessageExists,
	qCursorGet, qCursorSave, qCursorSeed, qHoleInsert, qHoleList,
	qLockAcquire, qLockRenew, qLockRelease,
}

// queries maps a query name to its SQL, parsed once from queries.sql.
var queries = mustParseQueries(queriesSQL, queryNames)

var nameMarkerRE = regexp.MustCompile(`(?m)^--\s*name:\s*(\S+)\s*$`)

// parseQueries splits src at "-- name: X" markers. Text before the first
// marker (the file header) is dropped; each body is trimmed.
func parseQueries(src string) (map[string]string, error) {
	out := make(map[string]string)
	locs := nameMarkerRE.FindAllStringSubmatchIndex(src, -1)
	for i, loc := range locs {
		name := src[loc[2]:loc[3]]
		end := len(src)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		body := strings.TrimSpace(src[loc[1]:end])
		if body == "" {
			return nil, fmt.Errorf("relaysqlite: queries.sql: query %q is empty", name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("relaysqlite: queries.sql: query %q defined twice", name)
		}
		out[name] = body
	}
	return out, nil
}

func mustParseQueries(src string, want []string) map[string]string {
	m, err := parseQueries(src)
	if err != nil {
		panic(err)
	}
	for _, n := range want {
		if _, ok := m[n]; !ok {
			panic(fmt.Sprintf("relaysqlite: queries.sql has no query %q", n))
		}
	}
	return m
}

// query returns the SQL of a named query; names are the q* constants, checked
// at init.
func query(name string) string { return queries[name] }

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// identQuery returns the named query with {ident} replaced by ident, after
// checking that ident is a plain SQL identifier (savepoint names cannot be
// bound as parameters).
func identQuery(name, ident string) (string, error) {
	if !identRE.MatchString(ident) {
		return "", fmt.Errorf("relaysqlite: invalid savepoint name %q (want [A-Za-z_][A-Za-z0-9_]*, at most 63 characters)", ident)
	}
	return strings.ReplaceAll(query(name), "{ident}", ident), nil
}
