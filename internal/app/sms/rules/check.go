package rules

import (
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// Request is one message as an API hands it over: to one number, either a
// template with its parameters and the signature to put in front, or
// content carrying its own 【signature】.
type Request struct {
	AppID  int64
	Number string // as given: +86, 0086, 86 prefixes, spaces and hyphens allowed
	// SignName is the signature's text (without 【】). Required with
	// TemplateCode; with Content, optional, and then it must be the
	// content's signature.
	SignName     string
	TemplateCode string
	Params       map[string]string
	// Content is the whole text with its 【signature】 at the start or the
	// end; used when TemplateCode is empty.
	Content string
}

// Plan is what Check decided for a Request that may be sent.
type Plan struct {
	App       *App
	Number    string // normalised, 11 digits
	Carrier   string
	Signature *Signature
	// Text is the message as sent: "【signature】" then the body.
	Text       string
	MsgFmt     cmpp.MsgFmt
	Segments   int
	UnitPrice  Money
	Amount     Money // Segments × UnitPrice: what the billing stage freezes
	Candidates []Candidate
	// Limits are the counters the admitting stage must increment (daily,
	// then per-number frequency), each under its unique key.
	Limits []LimitKey
}

// Check applies the rules to req at now (the caller's clock; it only
// chooses the limit windows) and returns the Plan, or the first refusal, in
// this order: app and enterprise active, number, carrier, blacklist,
// template or content, signature, segments, price, route. Limits and the
// balance are not decided here: they need the database's counters and
// account, and are checked by the stage that writes them, under the keys
// and amount of the Plan.
func (s *Snapshot) Check(req Request, now time.Time, opts RouteOpts) (*Plan, error) {
	app, err := s.ActiveApp(req.AppID)
	if err != nil {
		return nil, err
	}
	number, err := NormalizeNumber(req.Number)
	if err != nil {
		return nil, err
	}
	carrier, err := s.CarrierOf(number)
	if err != nil {
		return nil, err
	}
	if s.Blacklisted(app.EnterpriseID, number) {
		return nil, refuse(ReasonBlacklisted, "the number is on a blacklist")
	}

	var sigText, body string
	if req.TemplateCode != "" {
		t, err := s.Template(app.EnterpriseID, req.TemplateCode)
		if err != nil {
			return nil, err
		}
		if body, err = Render(t.Body, req.Params); err != nil {
			return nil, err
		}
		if req.SignName == "" {
			return nil, refuse(ReasonSignatureMissing, "a template message needs a signature name")
		}
		if err := CheckSignatureText(req.SignName); err != nil {
			return nil, err
		}
		sigText = req.SignName
	} else {
		if req.Content == "" {
			return nil, refuse(ReasonContentEmpty, "neither a template nor content")
		}
		if sigText, body, err = SplitSignature(req.Content); err != nil {
			return nil, err
		}
		if req.SignName != "" && req.SignName != sigText {
			return nil, refuse(ReasonSignatureInvalid, "the content's signature is not the one named")
		}
	}
	if body == "" {
		return nil, refuse(ReasonContentEmpty, "nothing besides the signature")
	}
	sig, err := s.Signature(app.EnterpriseID, sigText)
	if err != nil {
		return nil, err
	}
	text := sigOpen + sigText + sigClose + body
	f := Coding(text)
	segs, err := Segments(text, f)
	if err != nil {
		return nil, err
	}
	unit, err := s.UnitPrice(app.ID, carrier)
	if err != nil {
		return nil, err
	}
	amount, err := Price(segs, unit)
	if err != nil {
		return nil, err
	}
	cands, err := s.Candidates(app.ID, carrier, sig.ID, opts)
	if err != nil {
		return nil, err
	}
	var limits []LimitKey
	if k, ok := DailyKey(app.ID, app.DailyLimit, now); ok {
		limits = append(limits, k)
	}
	limits = append(limits, FrequencyKeys(app.ID, number, s.FrequencyRules(app.ID), now)...)
	return &Plan{App: app, Number: number, Carrier: carrier, Signature: sig, Text: text, MsgFmt: f, Segments: segs,
		UnitPrice: unit, Amount: amount, Candidates: cands, Limits: limits}, nil
}
