package complete

import "github.com/prometheus/client_golang/prometheus"

// Collector returns the intake's and the completer's counters as Prometheus
// metrics, read from their Stats at each scrape (either may be nil):
//
//	relay_sms_intake_entries_total           stream entries read
//	relay_sms_intake_events_total            facts stored (new events)
//	relay_sms_intake_matched_total           parked reports matched
//	relay_sms_intake_unusable_total          entries that do not parse (kept in sms_intake_reject)
//	relay_sms_intake_raced_total             batches run again: a submit they write changed under them
//	relay_sms_completion_claims_total        work records claimed
//	relay_sms_completion_fenced_total        claims found lapsed at lock time
//	relay_sms_completion_decided_total       attempts decided
//	relay_sms_completion_retries_total       retries made
//	relay_sms_completion_completed_total     messages completed
//	relay_sms_completion_refunds_total       refunds posted
//	relay_sms_completion_failures_total      claims failed back to the work store
//	relay_sms_completion_resends_total       commands without a result published again
//
// Labels carry no id, number or content.
func Collector(in *Intake, c *Completer) prometheus.Collector { return collector{in, c} }

type collector struct {
	in *Intake
	c  *Completer
}

func desc(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }

var (
	descEntries   = desc("relay_sms_intake_entries_total", "Result and report stream entries the intake read.")
	descEvents    = desc("relay_sms_intake_events_total", "Facts the intake stored as new events.")
	descMatched   = desc("relay_sms_intake_matched_total", "Parked reports matched to their submit.")
	descUnusable  = desc("relay_sms_intake_unusable_total", "Stream entries that did not parse (kept in sms_intake_reject).")
	descRaced     = desc("relay_sms_intake_raced_total", "Intake batches run again because a submit they write changed under them.")
	descClaims    = desc("relay_sms_completion_claims_total", "Completion work records claimed.")
	descFenced    = desc("relay_sms_completion_fenced_total", "Claims found lapsed when locked (another worker took them over).")
	descDecided   = desc("relay_sms_completion_decided_total", "Attempts decided.")
	descRetries   = desc("relay_sms_completion_retries_total", "Retries through another channel.")
	descCompleted = desc("relay_sms_completion_completed_total", "Messages completed.")
	descRefunds   = desc("relay_sms_completion_refunds_total", "Refunds of numbers charged as unknown and reported failed later.")
	descFailures  = desc("relay_sms_completion_failures_total", "Claims failed back to the work store (retried with backoff).")
	descResends   = desc("relay_sms_completion_resends_total", "Attempts whose commands without a result were published again.")
)

func (x collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descEntries, descEvents, descMatched, descUnusable, descRaced, descClaims, descFenced,
		descDecided, descRetries, descCompleted, descRefunds, descFailures, descResends} {
		ch <- d
	}
}

func (x collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	if x.in != nil {
		st := x.in.Stats()
		counter(descEntries, st.Entries)
		counter(descEvents, st.Events)
		counter(descMatched, st.Matched)
		counter(descUnusable, st.Malformed)
		counter(descRaced, st.Raced)
	}
	if x.c != nil {
		st := x.c.Stats()
		counter(descClaims, st.Claims)
		counter(descFenced, st.Fenced)
		counter(descDecided, st.Decided)
		counter(descRetries, st.Retries)
		counter(descCompleted, st.Completed)
		counter(descRefunds, st.Refunds)
		counter(descFailures, st.Failures)
		counter(descResends, st.Resends)
	}
}
