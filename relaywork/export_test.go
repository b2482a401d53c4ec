package relaywork

// QueryForTest returns the SQL of the named statement of queries.sql.
func QueryForTest(name string) string { return stmts[name] }
