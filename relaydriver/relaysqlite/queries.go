package relaysqlite

import (
	_ "embed"
	"fmt"

	"github.com/relayhq/relay/internal/sqlfile"
)

//go:embed queries.sql
var queriesSQL string

// Query names. Each must have a "-- name: <Name>" section in queries.sql; init
// panics on a missing one, so a typo fails at start-up.
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
	qMessageInsertLookup   = "MessageInsertLookup"
	qMessageGet            = "MessageGet"
	qMessageListUnfinished = "MessageListUnfinished"
	qMessageBindIdentity   = "MessageBindIdentity"
	qMessageIdentityOf     = "MessageIdentityOf"
	qMessageIdentityOwner  = "MessageIdentityOwner"
	qMessageComplete       = "MessageComplete"
	qMessageDelete         = "MessageDelete"
	qMessageFail           = "MessageFail"
	qMessageExhaust        = "MessageExhaust"
	qMessageExistsByID     = "MessageExistsByID"
	qMessageClaim          = "MessageClaim"
	qMessageClaimPerKey    = "MessageClaimPerKey"
	qMessageLeaseRenew     = "MessageLeaseRenew"
	qMessageLeaseRelease   = "MessageLeaseRelease"
	qMessageReplay         = "MessageReplay"
	qMessageStats          = "MessageStats"
	qMessageExists         = "MessageExists"
	qCursorGet             = "CursorGet"
	qCursorSave            = "CursorSave"
	qCursorSeed            = "CursorSeed"
	qHoleInsert            = "HoleInsert"
	qHoleList              = "HoleList"
	qHoleListUnfound       = "HoleListUnfound"
	qHoleListFound         = "HoleListFound"
	qHoleMarkFound         = "HoleMarkFound"
	qHoleMarkIngested      = "HoleMarkIngested"
	qLockAcquire           = "LockAcquire"
	qLockRenew             = "LockRenew"
	qLockRelease           = "LockRelease"
	qLockHolder            = "LockHolder"
	qLockTakeOver          = "LockTakeOver"
	qOutboxKeyNext         = "OutboxKeyNext"
	qOutboxInsert          = "OutboxInsert"
	qOutboxFetch           = "OutboxFetch"
	qOutboxMarkSent        = "OutboxMarkSent"
	qOutboxDeleteDelivered = "OutboxDeleteDelivered"
	qOutboxFail            = "OutboxFail"
	qOutboxExists          = "OutboxExists"
	qOutboxDeleteSent      = "OutboxDeleteSent"
	qOutboxList            = "OutboxList"
	qOutboxStats           = "OutboxStats"
)

var queryNames = []string{
	qSavepoint, qRollbackToSavepoint, qReleaseSavepoint, qPragmaJournalMode,
	qMigrationTableExists, qMigrationBootstrap, qMigrationVersions, qMigrationIsApplied, qMigrationRecord,
	qSequenceNext, qMessageInsert, qMessageInsertLookup, qMessageGet, qMessageListUnfinished,
	qMessageBindIdentity, qMessageIdentityOf, qMessageIdentityOwner, qMessageComplete, qMessageDelete,
	qMessageFail, qMessageExhaust, qMessageExistsByID, qMessageClaim, qMessageClaimPerKey,
	qMessageLeaseRenew, qMessageLeaseRelease,
	qMessageReplay, qMessageStats, qMessageExists,
	qCursorGet, qCursorSave, qCursorSeed, qHoleInsert, qHoleList,
	qHoleListUnfound, qHoleListFound, qHoleMarkFound, qHoleMarkIngested,
	qLockAcquire, qLockRenew, qLockRelease, qLockHolder, qLockTakeOver,
	qOutboxKeyNext, qOutboxInsert, qOutboxFetch, qOutboxMarkSent, qOutboxDeleteDelivered, qOutboxFail, qOutboxExists,
	qOutboxDeleteSent, qOutboxList, qOutboxStats,
}

// cachedQueryNames are the queries run as cached prepared statements: all but
// the templated savepoint statements, DDL and pragmas.
var cachedQueryNames = func() []string {
	var out []string
	for _, n := range queryNames {
		switch n {
		case qSavepoint, qRollbackToSavepoint, qReleaseSavepoint, qPragmaJournalMode, qMigrationBootstrap:
			continue
		}
		out = append(out, n)
	}
	return out
}()

// queries maps a query name to its SQL, parsed once from queries.sql by the
// shared query layer; init panics on a name used here but missing there.
var queries = sqlfile.MustParse("relaysqlite/queries.sql", queriesSQL, queryNames...)

// query returns the SQL of a named query; names are the q* constants, checked
// at init.
func query(name string) string { return queries[name] }

// identQuery returns the named query with {{ident}} replaced by ident, after
// checking that ident is a plain SQL identifier (savepoint names cannot be
// bound as parameters).
func identQuery(name, ident string) (string, error) {
	stmt, err := sqlfile.WithIdent(query(name), ident)
	if err != nil {
		return "", fmt.Errorf("relaysqlite: savepoint: %w", err)
	}
	return stmt, nil
}
