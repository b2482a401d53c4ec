// Package rules is the send chain's decision logic for one message, pure: no
// I/O, no clock, no randomness (docs/sms/model.md). Given a Snapshot of the
// tenancy tables (loaded once per batch by package tenancy and used
// read-only) and a Request, Check normalises the number, finds its carrier,
// refuses blacklisted numbers, renders the template or takes the content,
// checks the signature, counts the segments with the CMPP splitter, prices
// them and selects the channel candidates; FrequencyKeys and DailyKey give
// the stable keys under which a later stage counts sends in the database.
//
// Every refusal is an *Error carrying a Reason, a small closed set of codes
// an HTTP API returns as they are (Reason.Status gives the 4xx status). No
// error text ever holds a phone number, message content, a template
// parameter's value or a secret: only names, counts and ids.
//
// A Snapshot is immutable once built and safe for concurrent use.
package rules
