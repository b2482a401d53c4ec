package rules

import (
	"fmt"
	"sort"
	"time"
)

// Carrier is a mobile network operator (sms_carrier).
type Carrier struct {
	Code string // "mobile", "unicom", "telecom"
	Name string
}

// NumberSegment maps the leading digits of a number to its carrier.
type NumberSegment struct {
	Prefix  string // 3 to 7 digits starting 13–19
	Carrier string
}

// Enterprise is a tenant.
type Enterprise struct {
	ID     int64
	Name   string
	Active bool
}

// App is an enterprise's API client. Its HMAC secret is not part of a
// snapshot.
type App struct {
	ID           int64
	EnterpriseID int64
	Name         string
	APIKey       string
	Active       bool
	// DailyLimit is the most messages the app may send per day in China
	// Standard Time; 0: no limit.
	DailyLimit int
}

// ConnState is a channel's connection state as the gateway last reported it.
type ConnState string

// The connection states.
const (
	ConnDisconnected ConnState = "disconnected"
	ConnConnecting   ConnState = "connecting"
	ConnConnected    ConnState = "connected"
)

// Channel is a supplier account: one CMPP login (sms_channel). SecretRef is
// a reference (file:/path), never the secret.
type Channel struct {
	ID          int64
	Name        string
	Supplier    string
	Carrier     string // "" reaches every carrier
	Address     string
	CMPPVersion string // "2.0" or "3.0"
	SPID        string
	SecretRef   string
	SrcID       string
	ServiceID   string
	Connections int
	Window      int
	RateLimit   int    // Submits per second; 0: unbounded
	ReceiptMode string // "per_segment" or "message_level"
	Active      bool
	ConnState   ConnState
}

// Signature is an enterprise's 【signature】.
type Signature struct {
	ID           int64
	EnterpriseID int64
	Text         string
	Active       bool
}

// RegState is a signature's registration state with one channel.
type RegState string

// The registration states; only RegApproved lets the channel carry the
// signature.
const (
	RegPending  RegState = "pending"
	RegApproved RegState = "approved"
	RegRejected RegState = "rejected"
)

// Registration is a signature's registration (报备) with one channel.
type Registration struct {
	SignatureID int64
	ChannelID   int64
	State       RegState
	ExtCode     string // digits appended to the channel's SrcID
}

// TemplateState is a template's review state.
type TemplateState string

// The template states; only TemplateApproved may be sent.
const (
	TemplatePending  TemplateState = "pending"
	TemplateApproved TemplateState = "approved"
	TemplateRejected TemplateState = "rejected"
	TemplateDisabled TemplateState = "disabled"
)

// Template is an enterprise's message template with ${name} placeholders.
type Template struct {
	ID           int64
	EnterpriseID int64
	Code         string
	Kind         string // "verification", "notification" or "marketing"
	Body         string
	State        TemplateState
}

// BlacklistEntry blocks a number for one enterprise, or for all when
// EnterpriseID is 0.
type BlacklistEntry struct {
	EnterpriseID int64
	Number       string
}

// GroupMember is a channel in a group: lower Priority first, Weight shares
// the load within one priority.
type GroupMember struct {
	ChannelID int64
	Priority  int
	Weight    int
}

// ChannelGroup is a named, ordered set of channels a route points at.
type ChannelGroup struct {
	ID      int64
	Name    string
	Members []GroupMember
}

// Route sends an app's messages to one carrier with one signature (or any,
// SignatureID 0) to a channel group; lower Priority first.
type Route struct {
	ID          int64
	AppID       int64
	Carrier     string
	SignatureID int64
	GroupID     int64
	Priority    int
}

// PriceRule is the price of one segment of an app's message to a carrier.
type PriceRule struct {
	AppID   int64
	Carrier string
	Unit    Money
}

// FrequencyRule allows at most Max messages of an app to one number per
// Window.
type FrequencyRule struct {
	AppID  int64
	Window time.Duration
	Max    int
}

// Data is the content of a Snapshot, as read from the tables.
type Data struct {
	// TakenAt is when the rows were read (the loader's clock).
	TakenAt       time.Time
	Carriers      []Carrier
	Segments      []NumberSegment
	Enterprises   []Enterprise
	Apps          []App
	Channels      []Channel
	Signatures    []Signature
	Registrations []Registration
	Templates     []Template
	Blacklist     []BlacklistEntry
	Groups        []ChannelGroup
	Routes        []Route
	Prices        []PriceRule
	Frequency     []FrequencyRule
}

type entKey struct {
	ent  int64
	name string
}

type routeKey struct {
	app     int64
	carrier string
	sig     int64
}

type priceKey struct {
	app     int64
	carrier string
}

type regKey struct{ sig, channel int64 }

// Snapshot is the rules of every tenant at one moment, indexed for the
// lookups of one message. It is immutable and safe for concurrent use: the
// pointers and slices its methods return point into it and must be treated
// as read-only. A stage loads one per batch and never keeps it across
// batches, since channels, registrations and states change.
type Snapshot struct {
	data        Data
	segments    map[string]string // prefix → carrier
	minPrefix   int
	maxPrefix   int
	enterprises map[int64]*Enterprise
	apps        map[int64]*App
	appsByKey   map[string]*App
	channels    map[int64]*Channel
	signatures  map[entKey]*Signature
	regs        map[regKey]*Registration
	templates   map[entKey]*Template
	blacklist   map[entKey]bool // ent 0: every enterprise
	groups      map[int64]*ChannelGroup
	routes      map[routeKey][]Route // sorted by priority
	prices      map[priceKey]Money
	frequency   map[int64][]FrequencyRule
}

// NewSnapshot indexes d and checks that its references hold (every app's
// enterprise, every route's app, group and signature, every member's
// channel, every price's carrier exist, and a route's signature belongs to
// its app's enterprise). d's slices are kept, not copied: the caller must
// not change them afterwards.
func NewSnapshot(d Data) (*Snapshot, error) {
	s := &Snapshot{data: d, segments: map[string]string{}, enterprises: map[int64]*Enterprise{},
		apps: map[int64]*App{}, appsByKey: map[string]*App{}, channels: map[int64]*Channel{},
		signatures: map[entKey]*Signature{}, regs: map[regKey]*Registration{}, templates: map[entKey]*Template{},
		blacklist: map[entKey]bool{}, groups: map[int64]*ChannelGroup{}, routes: map[routeKey][]Route{},
		prices: map[priceKey]Money{}, frequency: map[int64][]FrequencyRule{}}
	carriers := map[string]bool{}
	for _, c := range d.Carriers {
		carriers[c.Code] = true
	}
	for _, g := range d.Segments {
		if !carriers[g.Carrier] {
			return nil, fmt.Errorf("sms: snapshot: segment %s: unknown carrier %q", g.Prefix, g.Carrier)
		}
		s.segments[g.Prefix] = g.Carrier
		if s.minPrefix == 0 || len(g.Prefix) < s.minPrefix {
			s.minPrefix = len(g.Prefix)
		}
		s.maxPrefix = max(s.maxPrefix, len(g.Prefix))
	}
	for i := range d.Enterprises {
		s.enterprises[d.Enterprises[i].ID] = &d.Enterprises[i]
	}
	for i := range d.Apps {
		a := &d.Apps[i]
		if s.enterprises[a.EnterpriseID] == nil {
			return nil, fmt.Errorf("sms: snapshot: app %d: unknown enterprise %d", a.ID, a.EnterpriseID)
		}
		s.apps[a.ID], s.appsByKey[a.APIKey] = a, a
	}
	for i := range d.Channels {
		c := &d.Channels[i]
		if c.Carrier != "" && !carriers[c.Carrier] {
			return nil, fmt.Errorf("sms: snapshot: channel %s: unknown carrier %q", c.Name, c.Carrier)
		}
		s.channels[c.ID] = c
	}
	sigByID := map[int64]*Signature{}
	for i := range d.Signatures {
		g := &d.Signatures[i]
		s.signatures[entKey{g.EnterpriseID, g.Text}] = g
		sigByID[g.ID] = g
	}
	for i := range d.Registrations {
		r := &d.Registrations[i]
		s.regs[regKey{r.SignatureID, r.ChannelID}] = r
	}
	for i := range d.Templates {
		t := &d.Templates[i]
		s.templates[entKey{t.EnterpriseID, t.Code}] = t
	}
	for _, b := range d.Blacklist {
		s.blacklist[entKey{b.EnterpriseID, b.Number}] = true
	}
	for i := range d.Groups {
		g := &d.Groups[i]
		for _, m := range g.Members {
			if s.channels[m.ChannelID] == nil {
				return nil, fmt.Errorf("sms: snapshot: group %s: unknown channel %d", g.Name, m.ChannelID)
			}
		}
		s.groups[g.ID] = g
	}
	for _, r := range d.Routes {
		a := s.apps[r.AppID]
		switch {
		case a == nil:
			return nil, fmt.Errorf("sms: snapshot: route %d: unknown app %d", r.ID, r.AppID)
		case s.groups[r.GroupID] == nil:
			return nil, fmt.Errorf("sms: snapshot: route %d: unknown group %d", r.ID, r.GroupID)
		case !carriers[r.Carrier]:
			return nil, fmt.Errorf("sms: snapshot: route %d: unknown carrier %q", r.ID, r.Carrier)
		case r.SignatureID != 0 && (sigByID[r.SignatureID] == nil || sigByID[r.SignatureID].EnterpriseID != a.EnterpriseID):
			return nil, fmt.Errorf("sms: snapshot: route %d: signature %d is not of app %d's enterprise", r.ID, r.SignatureID, r.AppID)
		}
		k := routeKey{r.AppID, r.Carrier, r.SignatureID}
		s.routes[k] = append(s.routes[k], r)
	}
	for k := range s.routes {
		rs := s.routes[k]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Priority < rs[j].Priority })
	}
	for _, p := range d.Prices {
		if s.apps[p.AppID] == nil || !carriers[p.Carrier] {
			return nil, fmt.Errorf("sms: snapshot: price of app %d for %q: unknown app or carrier", p.AppID, p.Carrier)
		}
		s.prices[priceKey{p.AppID, p.Carrier}] = p.Unit
	}
	for _, f := range d.Frequency {
		s.frequency[f.AppID] = append(s.frequency[f.AppID], f)
	}
	return s, nil
}

// Data returns what the snapshot holds. Its slices are shared: read only.
func (s *Snapshot) Data() Data { return s.data }

// TakenAt is when the snapshot's rows were read.
func (s *Snapshot) TakenAt() time.Time { return s.data.TakenAt }

// App returns the app with id, or nil.
func (s *Snapshot) App(id int64) *App { return s.apps[id] }

// AppByKey returns the app whose API key is key, or nil.
func (s *Snapshot) AppByKey(key string) *App { return s.appsByKey[key] }

// Enterprise returns the enterprise with id, or nil.
func (s *Snapshot) Enterprise(id int64) *Enterprise { return s.enterprises[id] }

// Channel returns the channel with id, or nil.
func (s *Snapshot) Channel(id int64) *Channel { return s.channels[id] }

// ActiveApp returns app id when it and its enterprise are active;
// otherwise ReasonAppInactive or ReasonEnterpriseInactive.
func (s *Snapshot) ActiveApp(id int64) (*App, error) {
	a := s.apps[id]
	if a == nil || !a.Active {
		return nil, refuse(ReasonAppInactive, "app %d is unknown or suspended", id)
	}
	if e := s.enterprises[a.EnterpriseID]; e == nil || !e.Active {
		return nil, refuse(ReasonEnterpriseInactive, "enterprise %d is suspended", a.EnterpriseID)
	}
	return a, nil
}

// CarrierOf returns the carrier of a normalised number by the longest
// matching segment prefix; ReasonUnknownCarrier when none matches.
func (s *Snapshot) CarrierOf(number string) (string, error) {
	for n := min(s.maxPrefix, len(number)); n >= s.minPrefix && n > 0; n-- {
		if c, ok := s.segments[number[:n]]; ok {
			return c, nil
		}
	}
	return "", refuse(ReasonUnknownCarrier, "no number segment covers the number")
}

// Blacklisted reports whether a normalised number is blocked for
// enterprise ent, by the platform's list or by ent's own.
func (s *Snapshot) Blacklisted(ent int64, number string) bool {
	return s.blacklist[entKey{0, number}] || (ent != 0 && s.blacklist[entKey{ent, number}])
}

// Signature returns enterprise ent's active signature text;
// ReasonSignatureUnknown when it has none or it is disabled.
func (s *Snapshot) Signature(ent int64, text string) (*Signature, error) {
	g := s.signatures[entKey{ent, text}]
	if g == nil || !g.Active {
		return nil, refuse(ReasonSignatureUnknown, "the enterprise has no active signature of %d characters by that text", len([]rune(text)))
	}
	return g, nil
}

// Template returns enterprise ent's approved template code;
// ReasonTemplateUnknown or ReasonTemplateNotApproved otherwise.
func (s *Snapshot) Template(ent int64, code string) (*Template, error) {
	t := s.templates[entKey{ent, code}]
	switch {
	case t == nil:
		return nil, refuse(ReasonTemplateUnknown, "no template %s", quoteCode(code))
	case t.State != TemplateApproved:
		return nil, refuse(ReasonTemplateNotApproved, "template %s is %s", quoteCode(code), t.State)
	}
	return t, nil
}

// UnitPrice returns the price of one segment of app's message to carrier;
// ReasonNoPrice when none is set.
func (s *Snapshot) UnitPrice(app int64, carrier string) (Money, error) {
	p, ok := s.prices[priceKey{app, carrier}]
	if !ok || p < 1 {
		return 0, refuse(ReasonNoPrice, "app %d has no price for carrier %s", app, carrier)
	}
	return p, nil
}

// FrequencyRules returns app's per-number frequency rules.
func (s *Snapshot) FrequencyRules(app int64) []FrequencyRule { return s.frequency[app] }

// quoteCode shows a template code only when it is a plausible code (the
// request's text may be anything).
func quoteCode(code string) string {
	if len(code) > 0 && len(code) <= 64 && validCode(code) {
		return code
	}
	return fmt.Sprintf("(a code of %d bytes)", len(code))
}

func validCode(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
