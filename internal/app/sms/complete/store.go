package complete

import (
	_ "embed"

	"github.com/relayhq/relay/internal/sqlfile"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("complete/queries.sql", queriesSQL, "ResultsRecord", "ReportsRecord", "ParkedMatch", "RejectsRecord", "MessagesLock", "AttemptsOfMessages", "AttemptMessages",
	"SubmitsOfAttempts", "EventsOfAttempts", "AttemptsDecide", "AttemptsNote", "SubmitsFacts", "TimeoutsRecord", "MessagesComplete", "ResendsRecord")
