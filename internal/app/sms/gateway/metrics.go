package gateway

import "github.com/prometheus/client_golang/prometheus"

// Collector returns the gateway's counters as Prometheus metrics, read from
// Stats at each scrape:
//
//	relay_sms_gateway_submits_total               Submits handed to a pool
//	relay_sms_gateway_outcomes_total{outcome}     accepted, rejected, unknown, not_sent
//	relay_sms_gateway_commands_total{kind}        duplicate, stale_claim, busy, malformed, autoclaimed, retried
//	relay_sms_gateway_results_total               results written to the result stream
//	relay_sms_gateway_deliveries_total{kind}      report, mo, undecodable, late_resp
//
// Labels carry no submit id, number or content.
func (g *Gateway) Collector() prometheus.Collector { return collector{g} }

type collector struct{ g *Gateway }

var (
	descSubmits    = prometheus.NewDesc("relay_sms_gateway_submits_total", "Submits the gateway handed to a channel's pool.", nil, nil)
	descOutcomes   = prometheus.NewDesc("relay_sms_gateway_outcomes_total", "Outcomes of Submits, by outcome.", []string{"outcome"}, nil)
	descCommands   = prometheus.NewDesc("relay_sms_gateway_commands_total", "Commands that did not take the plain path, by kind.", []string{"kind"}, nil)
	descResults    = prometheus.NewDesc("relay_sms_gateway_results_total", "Results written to the result stream (re-emissions included).", nil, nil)
	descDeliveries = prometheus.NewDesc("relay_sms_gateway_deliveries_total", "Deliver packets and late SubmitResps from suppliers, by kind.", []string{"kind"}, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSubmits, descOutcomes, descCommands, descResults, descDeliveries} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.g.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descSubmits, st.Submits)
	counter(descOutcomes, st.Accepted, "accepted")
	counter(descOutcomes, st.Rejected, "rejected")
	counter(descOutcomes, st.Unknown, "unknown")
	counter(descOutcomes, st.NotSent, "not_sent")
	counter(descCommands, st.Duplicates, "duplicate")
	counter(descCommands, st.StaleClaims, "stale_claim")
	counter(descCommands, st.Busy, "busy")
	counter(descCommands, st.Malformed, "malformed")
	counter(descCommands, st.Claimed, "autoclaimed")
	counter(descCommands, st.Retries, "retried")
	counter(descResults, st.Results)
	counter(descDeliveries, st.Reports, "report")
	counter(descDeliveries, st.MO, "mo")
	counter(descDeliveries, st.BadReports, "undecodable")
	counter(descDeliveries, st.Late, "late_resp")
}
