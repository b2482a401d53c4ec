package relaypgx

import (
	_ "embed"
	"fmt"

	"github.com/relayhq/relay/internal/sqlfile"
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
	qMessageInsertLookup   = "MessageInsertLookup"
	qMessageGet            = "MessageGet"
	qMessageIDExists       = "MessageIDExists"
	qMessageListUnfinished = "MessageListUnfinished"
	qMessageBindIdentity   = "MessageBindIdentity"
	qSessionAsyncCommit    = "SessionAsyncCommit"
	qMessageIdentityOwner  = "MessageIdentityOwner"
	qMessageIdentityOf     = "MessageIdentityOf"
	qMessageBindIdentities = "MessageBindIdentities"
	qMessageComplete       = "MessageComplete"
	qMessageCompleteMany   = "MessageCompleteMany"
	qMessageDelete         = "MessageDelete"
	qMessageDeleteMany     = "MessageDeleteMany"
	qMessageFail           = "MessageFail"
	qMessageExhaust        = "MessageExhaust"
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
	qOutboxAppend          = "OutboxAppend"
	qOutboxFetch           = "OutboxFetch"
	qOutboxMarkSent        = "OutboxMarkSent"
	qOutboxDeleteDelivered = "OutboxDeleteDelivered"
	qOutboxFail            = "OutboxFail"
	qOutboxExists          = "OutboxExists"
	qOutboxDeleteSent      = "OutboxDeleteSent"
	qOutboxList            = "OutboxList"
	qOutboxStats           = "OutboxStats"
	qOutboxNotify          = "OutboxNotify"
	qOutboxListen          = "OutboxListen"
)

var queries = sqlfile.MustParse("relaypgx: queries.sql", queriesSQL, qMessageAllocateIDs, qMessageInsertMany, qMessageGet,
	qMessageIDExists, qMessageListUnfinished, qMessageBindIdentity, qSessionAsyncCommit, qMessageIdentityOwner,
	qMessageIdentityOf, qMessageComplete, qMessageCompleteMany, qMessageFail, qMessageExhaust, qMessageClaim,
	qMessageClaimPerKey, qMessageReplay, qMessageStats, qMessageExists, qCursorGet, qCursorSave,
	qCursorSeed, qHoleInsert, qHoleList, qHoleListUnfound, qHoleListFound, qHoleMarkFound,
	qHoleMarkIngested, qMigrationTableExists, qMigrationLock,
	qMigrationCreateTable, qMigrationApplied, qMigrationIsApplied, qMigrationRecord, qLockTry,
	qLockHeld, qLockRelease, qSavepoint, qRollbackToSavepoint, qReleaseSavepoint,
	qOutboxAppend, qOutboxFetch, qOutboxMarkSent, qOutboxDeleteDelivered, qOutboxFail, qOutboxExists, qOutboxDeleteSent,
	qOutboxList, qOutboxStats, qOutboxNotify, qOutboxListen, qMessageBindIdentities, qMessageInsertLookup,
	qMessageLeaseRenew, qMessageLeaseRelease, qMessageDelete, qMessageDeleteMany)

// withIdent returns query name with its {{ident}} placeholder replaced by
// ident, after checking that ident is a plain identifier (no quoting, no
// injection).
func withIdent(name, ident string) (string, error) {
	stmt, err := sqlfile.WithIdent(queries[name], ident)
	if err != nil {
		return "", fmt.Errorf("relaypgx: savepoint: %w", err)
	}
	return stmt, nil
}
