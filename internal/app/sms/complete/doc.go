// Package complete is stage D of the SMS send chain: it takes what the
// gateway and the suppliers report back — submit results, status reports,
// late SubmitResps — into a durable event log (the intake), and decides each
// supplier attempt from its facts under a fenced work record (the
// completion): delivered, failed (and then retried once through another
// channel, or released), or unknown; settles every number of a message with
// a charge or a release keyed to the message and number; completes the
// message and queues its customer notification. See docs/sms/send.md.
package complete
