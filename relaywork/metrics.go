package relaywork

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collectTimeout bounds the needs_review count a scrape reads.
const collectTimeout = 2 * time.Second

// Collector returns a Prometheus collector of the store's metrics, labelled
// by queue only (a constant label, so stores of different queues register
// side by side):
//
//	relay_work_claims_total        rows claimed by this process
//	relay_work_takeovers_total     claims of rows whose lease had expired
//	relay_work_fenced_total        Lock/Done/Fail/Review refused with ErrFenced
//	relay_work_failures_total      failures recorded (Fail)
//	relay_work_needs_review        rows in needs_review now (read at scrape, bounded by 2s)
//
// Counters count this process's calls since New.
func (s *Store) Collector() prometheus.Collector {
	labels := prometheus.Labels{"queue": s.cfg.Queue}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, labels) }
	return &collector{
		s:         s,
		claims:    d("relay_work_claims_total", "Work rows claimed by this process."),
		takeovers: d("relay_work_takeovers_total", "Claims of work rows whose previous lease had expired."),
		fenced:    d("relay_work_fenced_total", "Calls refused because the claim's fence was no longer current."),
		failures:  d("relay_work_failures_total", "Failed attempts recorded."),
		review:    d("relay_work_needs_review", "Work rows waiting for a person (needs_review)."),
	}
}

type collector struct {
	s                                           *Store
	claims, takeovers, fenced, failures, review *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.claims, c.takeovers, c.fenced, c.failures, c.review} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.claims, prometheus.CounterValue, float64(c.s.claims.Load()))
	ch <- prometheus.MustNewConstMetric(c.takeovers, prometheus.CounterValue, float64(c.s.takeovers.Load()))
	ch <- prometheus.MustNewConstMetric(c.fenced, prometheus.CounterValue, float64(c.s.fenced.Load()))
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(c.s.failures.Load()))
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	st, err := c.s.Stats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.review, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.review, prometheus.GaugeValue, float64(st.NeedsReview()))
}
