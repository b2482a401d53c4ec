// Package metric holds what relay's Prometheus metrics share: registering a
// collector on a registry that several queues (or a restarted component)
// use at once.
package metric

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg, or returns the collector already registered
// under the same description (another queue's component, or a restarted
// one, on the same registry), so label children of one vector are shared. A
// nil reg registers nothing and returns c.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("register metrics: %w", err)
	}
	return c, nil
}
