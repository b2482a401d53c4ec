package flightstore

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/sqlfile"
)

//go:embed queries.sql
var queriesSQL string

// statements are the parsed queries.sql.
type statements struct {
	pipelineLock string

	schdLoad, detailsLoad, schdKeys, schdSave, detailsInsert, schdPage string

	historyCandidates, historyArchiveDelete, historyPurge string

	refUpsert, refLoad string

	requestLock, requestExpireOpen, requestInsert, requestMarkSent, requestFindOpen,
	requestDone, requestExpire, requestPending, requestPurgeClosed string

	snapLogAppend, snapLogPurge string
}

var stmts = parseStatements()

func parseStatements() *statements {
	q := sqlfile.MustParse("flightstore/queries.sql", queriesSQL,
		"PipelineLock",
		"SchdLoad", "DetailsLoad", "SchdKeys", "SchdSave", "DetailsInsert", "SchdPage",
		"HistoryCandidates", "HistoryArchiveDelete", "HistoryPurge",
		"RefUpsert", "RefLoad",
		"RequestLock", "RequestExpireOpen", "RequestInsert", "RequestMarkSent", "RequestFindOpen",
		"RequestDone", "RequestExpire", "RequestPending", "RequestPurgeClosed",
		"SnapLogAppend", "SnapLogPurge")
	s := &statements{
		pipelineLock:         q["PipelineLock"],
		schdLoad:             q["SchdLoad"],
		detailsLoad:          q["DetailsLoad"],
		schdKeys:             q["SchdKeys"],
		schdSave:             q["SchdSave"],
		detailsInsert:        q["DetailsInsert"],
		schdPage:             q["SchdPage"],
		historyCandidates:    q["HistoryCandidates"],
		historyArchiveDelete: q["HistoryArchiveDelete"],
		historyPurge:         q["HistoryPurge"],
		refUpsert:            q["RefUpsert"],
		refLoad:              q["RefLoad"],
		requestLock:          q["RequestLock"],
		requestExpireOpen:    q["RequestExpireOpen"],
		requestInsert:        q["RequestInsert"],
		requestMarkSent:      q["RequestMarkSent"],
		requestFindOpen:      q["RequestFindOpen"],
		requestDone:          q["RequestDone"],
		requestExpire:        q["RequestExpire"],
		requestPending:       q["RequestPending"],
		requestPurgeClosed:   q["RequestPurgeClosed"],
		snapLogAppend:        q["SnapLogAppend"],
		snapLogPurge:         q["SnapLogPurge"],
	}
	// A kind added to the flight package without its table and SQL would be
	// silently dropped by DetailsInsert: refuse to start instead.
	for _, tab := range collectionTabs() {
		table := "flight_" + strings.ToLower(tab)
		if tab == flight.ROUT.String() || tab == flight.ERUT.String() {
			table = "flight_route_point"
		}
		for name, stmt := range map[string]string{"SchdSave": s.schdSave, "DetailsLoad": s.detailsLoad, "DetailsInsert": s.detailsInsert} {
			if !strings.Contains(stmt, table) {
				panic(fmt.Sprintf("flightstore/queries.sql: %s does not handle collection %s (table %s)", name, tab, table))
			}
		}
		if table != "flight_route_point" && !strings.Contains(s.detailsInsert, "'"+tab+"'") {
			panic(fmt.Sprintf("flightstore/queries.sql: DetailsInsert does not handle collection %s", tab))
		}
	}
	return s
}

// detailTabs are the names of every detail collection (collectionTabs).
var detailTabs = collectionTabs()

// collectionTabs returns the name of every detail collection of flight.State:
// the resource, service and route kinds and DELY.
func collectionTabs() []string {
	var out []string
	for k := range flight.NumResourceKinds {
		out = append(out, k.String())
	}
	for k := range flight.NumServiceKinds {
		out = append(out, k.String())
	}
	for k := range flight.NumRouteKinds {
		out = append(out, k.String())
	}
	return append(out, tabDelay)
}
