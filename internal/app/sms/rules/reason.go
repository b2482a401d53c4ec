package rules

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/relayhq/relay/relaytype"
)

// Reason is why a message was refused: a stable, lower-case code an API
// returns to its caller as it is. The set is closed; Reasons lists it.
type Reason string

// The reasons, grouped by what the caller must change.
const (
	// ReasonAppInactive: the app is unknown or suspended.
	ReasonAppInactive Reason = "app_inactive"
	// ReasonEnterpriseInactive: the app's enterprise is suspended.
	ReasonEnterpriseInactive Reason = "enterprise_inactive"
	// ReasonBadNumber: the destination is not an 11-digit mainland mobile
	// number (optionally prefixed +86, 0086 or 86).
	ReasonBadNumber Reason = "bad_number"
	// ReasonUnknownCarrier: no number segment covers the number.
	ReasonUnknownCarrier Reason = "unknown_carrier"
	// ReasonBlacklisted: the number is on the platform's or the
	// enterprise's blacklist.
	ReasonBlacklisted Reason = "blacklisted"
	// ReasonSignatureMissing: the content has no 【signature】 at its start
	// or end, and the request names none.
	ReasonSignatureMissing Reason = "signature_missing"
	// ReasonSignatureInvalid: a signature that is malformed (length,
	// characters), or two different ones at the start and the end.
	ReasonSignatureInvalid Reason = "signature_invalid"
	// ReasonSignatureUnknown: the enterprise has no such signature, or it is
	// disabled.
	ReasonSignatureUnknown Reason = "signature_unknown"
	// ReasonTemplateUnknown: the enterprise has no such template.
	ReasonTemplateUnknown Reason = "template_unknown"
	// ReasonTemplateNotApproved: the template exists but is not approved.
	ReasonTemplateNotApproved Reason = "template_not_approved"
	// ReasonTemplateParam: a parameter is missing, unused, too long or
	// holds characters a parameter may not (【】, ${, control characters).
	ReasonTemplateParam Reason = "template_param"
	// ReasonTemplateMalformed: the stored template does not parse (an
	// unclosed or empty placeholder); an operator must fix it.
	ReasonTemplateMalformed Reason = "template_malformed"
	// ReasonContentEmpty: nothing to send after the signature.
	ReasonContentEmpty Reason = "content_empty"
	// ReasonContentTooLong: the content is over MaxContentChars or needs
	// more segments than a message may have.
	ReasonContentTooLong Reason = "content_too_long"
	// ReasonContentEncoding: the content holds characters the chosen coding
	// cannot carry.
	ReasonContentEncoding Reason = "content_encoding"
	// ReasonNoPrice: the app has no price for the number's carrier.
	ReasonNoPrice Reason = "no_price"
	// ReasonNoRoute: no route for the app, carrier and signature.
	ReasonNoRoute Reason = "no_route"
	// ReasonNoChannel: routes exist but none of their channels may carry
	// the message now (inactive, another carrier, signature not approved on
	// it, not connected).
	ReasonNoChannel Reason = "no_channel"
	// ReasonDailyLimit: the app's daily message limit is reached (decided by
	// the stage that counts under DailyKey).
	ReasonDailyLimit Reason = "daily_limit"
	// ReasonFrequencyLimit: the per-number frequency limit is reached
	// (decided by the stage that counts under FrequencyKeys).
	ReasonFrequencyLimit Reason = "frequency_limit"
	// ReasonInsufficientBalance: the enterprise's available balance does
	// not cover the price (decided by the billing freeze).
	ReasonInsufficientBalance Reason = "insufficient_balance"
)

// Reasons lists every Reason, in declaration order.
var Reasons = []Reason{
	ReasonAppInactive, ReasonEnterpriseInactive, ReasonBadNumber, ReasonUnknownCarrier, ReasonBlacklisted,
	ReasonSignatureMissing, ReasonSignatureInvalid, ReasonSignatureUnknown, ReasonTemplateUnknown,
	ReasonTemplateNotApproved, ReasonTemplateParam, ReasonTemplateMalformed, ReasonContentEmpty,
	ReasonContentTooLong, ReasonContentEncoding, ReasonNoPrice, ReasonNoRoute, ReasonNoChannel,
	ReasonDailyLimit, ReasonFrequencyLimit, ReasonInsufficientBalance,
}

// Status is the HTTP status an API answers a refusal with: 403 for what the
// tenant may not do (inactive app, blacklist, signature or template not
// theirs or not approved), 429 for limits, 402 for money, 422 for content
// and numbers that cannot be sent as given, 503 when no channel can take
// it now (routes exist; try later).
func (r Reason) Status() int {
	switch r {
	case ReasonAppInactive, ReasonEnterpriseInactive, ReasonBlacklisted, ReasonSignatureUnknown,
		ReasonTemplateUnknown, ReasonTemplateNotApproved:
		return http.StatusForbidden
	case ReasonDailyLimit, ReasonFrequencyLimit:
		return http.StatusTooManyRequests
	case ReasonInsufficientBalance:
		return http.StatusPaymentRequired
	case ReasonNoChannel:
		return http.StatusServiceUnavailable
	}
	return http.StatusUnprocessableEntity
}

// ErrRefused is the class of every refusal: errors.Is(err, ErrRefused)
// holds for each *Error.
var ErrRefused = errors.New("sms: refused")

// maxDetail bounds an Error's detail text.
const maxDetail = 160

// Error is a refusal: its Reason and a short detail that names what was
// wrong (a field, a parameter name, a count) and never holds a phone number,
// content, a parameter value or a secret.
type Error struct {
	Reason Reason
	Detail string
}

// Error returns "sms: <reason>: <detail>", bounded.
func (e *Error) Error() string {
	if e.Detail == "" {
		return "sms: " + string(e.Reason)
	}
	return "sms: " + string(e.Reason) + ": " + relaytype.BoundText(e.Detail, maxDetail)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *Error) Is(target error) bool { return target == ErrRefused }

// refuse builds an *Error; detail is a format over safe values only.
func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf returns the Reason of a refusal anywhere in err's chain, and
// false when err is not one.
func ReasonOf(err error) (Reason, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason, true
	}
	return "", false
}
