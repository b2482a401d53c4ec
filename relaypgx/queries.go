package relaypgx

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

// queriesSQL holds every statement of the driver; see queries.sql.
//
//go:embed queries.sql
var queriesSQL string

// Query names in queries.sql. init checks that each one exists, so a typo fails
// at start-up rather than at the first call.
const (
	qMessageAllocateIDs    = "MessageAllocateIDs"
	qMessageInsertMany     = "MessageInsertMany"
	qMessageGet            = "MessageGet"
	qMessageIDExists       = "MessageIDExists"
	qMessageListUnfinished = "MessageListUnfinished"
	qMessageBindIdentity   = "MessageBindIdentity"
	qMessageIdentityOwner  = "MessageIdentityOwner"
	qMessageIdentityOf     = "MessageIdentityOf"
	qMessageComplete       = "MessageComplete"
	qMessageFail           = "MessageFail"
	qMessageExhaust        = "MessageExhaust"
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
	qMigrationTableExists  = "MigrationTableExists"
	qMigrationLock         = "MigrationLock"
	qMigrationCreateTable  = "MigrationCreateTable"
	qMigrationApplied      = "MigrationApplied"
	qMigrationIsApplied    = "MigrationIsApplied"
	qMigrationRecord       = "MigrationRecord"
	qLockTry               = "LockTry"
	qLockHeld              = "LockHeld"
	qLockRelease           = "LockRelease"
	qSavepoint             = "Savepoint"
	qRollbackToSavepoint   = "RollbackToSavepoint"
	qReleaseSavepoint      = "ReleaseSavepoint"
)

var queries = mustParseQueries(queriesSQL, qMessageAllocateIDs, qMessageInsertMany, qMessageGet,
	qMessageIDExists, qMessageListUnfinished, qMessageBindIdentity, qMessageIdentityOwner,
	qMessageIdentityOf, qMessageComplete, qMessageFail, qMessageExhaust, qMessageClaim,
	qMessageClaimPerKey, qMessageReplay, qMessageStats, qMessageExists, qCursorGet, qCursorSave,
	qCursorSeed, qHoleInsert, qHoleList, qMigrationTableExists, qMigrationLock,
	qMigrationCreateTable, qMigrationApplied, qMigrationIsApplied, qMigrationRecord, qLockTry,
	qLockHeld, qLockRelease, qSavepoint, qRollbackToSavepoint, qReleaseSavepoint)

var nameMarkerRE = regexp.MustCompile(`(?m)^--\s*name:\s*(\w+)\s*$`)

// parseQueries splits src at "-- name: X" markers. Comment-only lines and the
// trailing semicolon are dropped from each statement.
func parseQueries(src string) (map[string]string, error) {
	locs := nameMarkerRE.FindAllStringSubmatchIndex(src, -1)
	out := make(map[string]string, len(locs))
	for i, loc := range locs {
		name := src[loc[2]:loc[3]]
		end := len(src)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		var lines []string
		for _, line := range strings.Split(src[loc[1]:end], "\n") {
			if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
				continue
			}
			lines = append(lines, strings.TrimRight(line, " \t\r"))
		}
		body := strings.TrimSuffix(strings.TrimSpace(strings.Join(lines, "\n")), ";")
		if body == "" {
			return nil, fmt.Errorf("relaypgx: query %q is empty", name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("relaypgx: query %q defined twice", name)
		}
		out[name] = body
	}
	return out, nil
}

func mustParseQueries(src string, required ...string) map[string]string {
	m, err := parseQueries(src)
	if err != nil {
		panic(err)
	}
	for _, name := range required {
		if _, ok := m[name]; !ok {
			panic(fmt.Sprintf("relaypgx: queries.sql lacks query %q", name))
		}
	}
	return m
}

// identRE is what a savepoint name may be: an unquoted SQL identifier.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// withIdent returns query name with its {{name}} placeholder replaced by ident,
// after checking that ident is a plain identifier (no quoting, no injection).
func withIdent(name, ident string) (string, error) {
	if !identRE.MatchString(ident) {
		return "", fmt.Errorf("relaypgx: invalid savepoint name %q (want an identifier [A-Za-z_][A-Za-z0-9_]*)", ident)
	}
	return strings.ReplaceAll(queries[name], "{{name}}", ident), nil
}
