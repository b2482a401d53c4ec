// Package route is stage B of the SMS send chain: it turns an admitted
// message into supplier attempts — one per number, through a channel chosen
// among the rules' candidates — and each attempt into one submit per
// segment, written with their gateway commands as engine outbox events in
// the caller's transaction. The admission stage calls it for a batch's
// first attempts; the completion calls it for a retry. See docs/sms/send.md.
package route
