package metric_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/metric"
)

func TestRegisterSharesExisting(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	opts := prometheus.GaugeOpts{Name: "relay_test_gauge", Help: "h"}
	a, err := metric.Register(reg, prometheus.NewGaugeVec(opts, []string{"queue"}))
	require.NoError(t, err)
	b, err := metric.Register(reg, prometheus.NewGaugeVec(opts, []string{"queue"}))
	require.NoError(t, err)
	require.Same(t, a, b, "the second registration returns the first collector")

	// Same name, different labels: a real conflict is an error.
	_, err = metric.Register(reg, prometheus.NewGaugeVec(opts, []string{"state"}))
	require.Error(t, err)

	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "relay_test_total", Help: "h"})
	got, err := metric.Register(nil, c)
	require.NoError(t, err)
	require.Same(t, c, got)
}
