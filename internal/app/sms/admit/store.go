package admit

import (
	_ "embed"

	"github.com/relayhq/relay/internal/sqlfile"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("admit/queries.sql", queriesSQL,
	"MessageAcceptMany", "MessageGet", "MessageAttempts", "CountersSweep", "MessagesLoad", "CountersRead", "CountersAdd", "MessagesDecide", "MessageRefuse")
