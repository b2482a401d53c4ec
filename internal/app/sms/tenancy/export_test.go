package tenancy

// LedgerByKeysSQL is the ledger's key look-up, for the plan test.
var LedgerByKeysSQL = stmts["LedgerByKeys"]
