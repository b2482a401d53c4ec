package relaypgx_test

import (
	"testing"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaydrivertest"
)

func TestConformance(t *testing.T) {
	relaydrivertest.Exercise(t, func(t *testing.T) relaydriver.Driver { return testdb.PGDriver(t) })
}
