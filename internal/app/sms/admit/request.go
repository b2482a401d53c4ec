package admit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"unicode/utf8"
)

// Code is the reason an API request was answered with an error before it
// reached the inbox: a stable, lower-case code in the JSON error body
// ({"reason": code, "error": text}). The admission stage's refusals are
// rules.Reason codes, reported by GET /v1/messages/{id}.
type Code string

// The API's codes, each with its status (Code.Status).
const (
	// CodeMalformedJSON: the body is not one JSON object of the request's
	// shape (unknown fields, wrong types, trailing data). 400.
	CodeMalformedJSON Code = "malformed_json"
	// CodeBadRequest: a field is missing or out of bounds (client_msg_id,
	// numbers, content or template). 400.
	CodeBadRequest Code = "bad_request"
	// CodeUnauthenticated: a signature header is missing or malformed, or
	// the API key names no active app. 401.
	CodeUnauthenticated Code = "unauthenticated"
	// CodeBadSignature: the signature does not match. 401.
	CodeBadSignature Code = "bad_signature"
	// CodeStaleTimestamp: the timestamp is further than the allowed skew
	// from the server's clock (a replayed or badly clocked request). 401.
	CodeStaleTimestamp Code = "stale_timestamp"
	// CodeNotFound: no message with that id for this app. 404.
	CodeNotFound Code = "not_found"
	// CodeTooLarge: the body is over the API's limit. 413.
	CodeTooLarge Code = "body_too_large"
	// CodeUnavailable: the store could not be reached; nothing was
	// accepted, send the same request again. 503.
	CodeUnavailable Code = "unavailable"
)

// Codes lists every Code, in declaration order.
var Codes = []Code{CodeMalformedJSON, CodeBadRequest, CodeUnauthenticated, CodeBadSignature, CodeStaleTimestamp,
	CodeNotFound, CodeTooLarge, CodeUnavailable}

// Status is the HTTP status answered with c.
func (c Code) Status() int {
	switch c {
	case CodeMalformedJSON, CodeBadRequest:
		return http.StatusBadRequest
	case CodeUnauthenticated, CodeBadSignature, CodeStaleTimestamp:
		return http.StatusUnauthorized
	case CodeNotFound:
		return http.StatusNotFound
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	default:
		return http.StatusServiceUnavailable
	}
}

// Bounds of a request.
const (
	// MaxNumbers is the most numbers one request may name.
	MaxNumbers = 100
	// maxNumberLen bounds one number as given (prefixes, spaces, hyphens).
	maxNumberLen = 32
	// maxContentBytes bounds content (rules refuse over 670 characters).
	maxContentBytes = 4096
	// maxParams bounds the template parameters (rules allow 16).
	maxParams = 32
	// maxNameLen bounds sign_name, template and parameter names and values.
	maxNameLen = 256
)

// clientIDRE is what a client message id may be (the column's CHECK).
var clientIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// Request is the body of POST /v1/messages. Exactly one of Content and
// Template is set.
type Request struct {
	// ClientMsgID is the client's idempotency key, unique per app: 1 to 64
	// of A-Z a-z 0-9 . _ : -.
	ClientMsgID string `json:"client_msg_id"`
	// Numbers are the destinations, 1 to MaxNumbers, as the client has them
	// (+86, 0086 or 86 prefixes, spaces and hyphens allowed).
	Numbers []string `json:"numbers"`
	// Content is the whole text with its 【signature】 at its start or end.
	Content string `json:"content,omitempty"`
	// Template is the code of one of the enterprise's templates; Params fill
	// its ${name} placeholders and SignName is the signature put in front.
	Template string            `json:"template,omitempty"`
	Params   map[string]string `json:"params,omitempty"`
	// SignName is the signature's text without 【】: required with a
	// template, optional with content (then it must be the content's).
	SignName string `json:"sign_name,omitempty"`
}

// RequestError is a request refused before the inbox, with its Code.
// Its text names fields and counts, never a number, content or secret.
type RequestError struct {
	Code   Code
	Detail string
}

func (e *RequestError) Error() string { return string(e.Code) + ": " + e.Detail }

func bad(code Code, format string, args ...any) *RequestError {
	return &RequestError{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// ParseRequest decodes and checks body: one JSON object of Request's shape,
// no unknown fields, no trailing data, fields within bounds. The rules
// (numbers, signature, template, content) are decided later by the stage.
func ParseRequest(body []byte) (*Request, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var r Request
	if err := dec.Decode(&r); err != nil {
		return nil, bad(CodeMalformedJSON, "the body is not a JSON request object")
	}
	if dec.More() {
		return nil, bad(CodeMalformedJSON, "data after the JSON object")
	}
	if !utf8.Valid(body) {
		return nil, bad(CodeMalformedJSON, "the body is not UTF-8")
	}
	switch {
	case !clientIDRE.MatchString(r.ClientMsgID):
		return nil, bad(CodeBadRequest, "client_msg_id must be 1 to 64 of A-Z a-z 0-9 . _ : -")
	case len(r.Numbers) == 0 || len(r.Numbers) > MaxNumbers:
		return nil, bad(CodeBadRequest, "numbers: %d given, want 1 to %d", len(r.Numbers), MaxNumbers)
	case (r.Content == "") == (r.Template == ""):
		return nil, bad(CodeBadRequest, "exactly one of content and template is required")
	case r.Content != "" && len(r.Params) > 0:
		return nil, bad(CodeBadRequest, "params go with a template, not with content")
	case len(r.Content) > maxContentBytes:
		return nil, bad(CodeBadRequest, "content: %d bytes, at most %d", len(r.Content), maxContentBytes)
	case len(r.Params) > maxParams:
		return nil, bad(CodeBadRequest, "params: %d given, at most %d", len(r.Params), maxParams)
	case len(r.Template) > maxNameLen || len(r.SignName) > maxNameLen:
		return nil, bad(CodeBadRequest, "template or sign_name over %d bytes", maxNameLen)
	}
	for i, n := range r.Numbers {
		if n == "" || len(n) > maxNumberLen {
			return nil, bad(CodeBadRequest, "numbers[%d]: %d bytes, want 1 to %d", i, len(n), maxNumberLen)
		}
	}
	for k, v := range r.Params {
		if len(k) > maxNameLen || len(v) > maxNameLen {
			return nil, bad(CodeBadRequest, "a parameter name or value is over %d bytes", maxNameLen)
		}
	}
	if r.Params == nil {
		r.Params = map[string]string{}
	}
	return &r, nil
}
