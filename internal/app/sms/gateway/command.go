package gateway

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// CommandVersion is the only command format version this gateway reads.
const CommandVersion = "1"

// ErrMalformed classifies a command that cannot be submitted as it is: a
// missing or bad field, an unknown version. The gateway acks it with a
// REJECTED result ("malformed: …") and never blocks the stream on it.
var ErrMalformed = errors.New("malformed submit command")

// Command is one submit command: one Submit of one segment to one to
// MaxDestUsers numbers. The send chain decides everything — splitting,
// coding, the UDH, the channel; the gateway only submits (issue "sms
// (1/2)" item 4: the gateway makes no business decision). A long message
// arrives as PkTotal commands, each with its own SubmitID, its UDH already
// at the start of Content and TPUDHI 1.
type Command struct {
	// SubmitID is the submitId: unique per segment and never 0. It is the
	// dedupe key and goes in the Submit's Msg_Id field (docs/sms/cmpp.md §9:
	// the supplier's record counts submits by it).
	SubmitID uint64
	// Channel names a configured channel (ChannelConfig.Name).
	Channel string
	// SrcID is Src_Id, the sender the handset shows (at most 21 characters).
	SrcID string
	// ServiceID is Service_Id (at most 10 characters).
	ServiceID string
	// Dests are the destination numbers: 1 to cmpp.MaxDestUsers, digits only.
	Dests []string
	// MsgFmt is Msg_Fmt, the coding of Content.
	MsgFmt cmpp.MsgFmt
	// Content is Msg_Content, UDH included, at most cmpp.MaxContent(MsgFmt).
	Content []byte
	// TPUDHI is 1 when Content starts with a UDH.
	TPUDHI uint8
	// PkTotal and PkNumber are Pk_total and Pk_number, from 1.
	PkTotal, PkNumber uint8
	// RegisteredDelivery is 1 to ask for a status report.
	RegisteredDelivery uint8
	// LinkID is the 3.0 LinkID (at most 20 characters); optional.
	LinkID string
}

// The stream field names of a command.
const (
	fieldSubmitID           = "submit_id"
	fieldChannel            = "channel"
	fieldVersion            = "version"
	fieldSrcID              = "src_id"
	fieldServiceID          = "service_id"
	fieldDests              = "dests"
	fieldMsgFmt             = "msg_fmt"
	fieldContent            = "content"
	fieldTPUDHI             = "tp_udhi"
	fieldPkTotal            = "pk_total"
	fieldPkNumber           = "pk_number"
	fieldRegisteredDelivery = "registered_delivery"
	fieldLinkID             = "link_id"
)

// Values returns c as stream entry fields (XADD): decimal numbers, dests
// comma-separated, content in standard base64, version CommandVersion.
func (c Command) Values() map[string]any {
	v := map[string]any{
		fieldSubmitID:           strconv.FormatUint(c.SubmitID, 10),
		fieldChannel:            c.Channel,
		fieldVersion:            CommandVersion,
		fieldSrcID:              c.SrcID,
		fieldServiceID:          c.ServiceID,
		fieldDests:              strings.Join(c.Dests, ","),
		fieldMsgFmt:             strconv.Itoa(int(c.MsgFmt)),
		fieldContent:            base64.StdEncoding.EncodeToString(c.Content),
		fieldTPUDHI:             strconv.Itoa(int(c.TPUDHI)),
		fieldPkTotal:            strconv.Itoa(int(c.PkTotal)),
		fieldPkNumber:           strconv.Itoa(int(c.PkNumber)),
		fieldRegisteredDelivery: strconv.Itoa(int(c.RegisteredDelivery)),
	}
	if c.LinkID != "" {
		v[fieldLinkID] = c.LinkID
	}
	return v
}

// FieldPayload is the field of a command that came through the engine's
// outbox: the relayredis sink writes an event's payload there (beside its
// own key, event id, seq and type fields), and the send chain's payload is
// the command's fields as one JSON object of strings (Command.Payload).
const FieldPayload = "payload"

// Payload returns c's fields (Values) as a JSON object of strings: the
// payload of an outbox event that a relayredis dispatcher publishes to the
// command stream, read back by ParseCommand.
func (c Command) Payload() []byte {
	b, err := json.Marshal(c.Values())
	if err != nil {
		panic("gateway: encode command: " + err.Error()) // cannot happen: a map of strings
	}
	return b
}

// ParseCommand reads and checks a stream entry's fields. Its error wraps
// ErrMalformed and names the field, never its value (which may be a phone
// number or content). The SubmitID is returned whenever it parsed, also
// with an error. An entry written by the engine's outbox (no submit_id
// field, a payload field) is read from its payload (Command.Payload).
func ParseCommand(values map[string]any) (Command, error) {
	if _, direct := values[fieldSubmitID]; !direct {
		if raw, ok := values[FieldPayload]; ok {
			s, _ := raw.(string)
			var fields map[string]string
			if err := json.Unmarshal([]byte(s), &fields); err != nil {
				return Command{}, fmt.Errorf("%w: %s: not a JSON object of strings", ErrMalformed, FieldPayload)
			}
			inner := make(map[string]any, len(fields))
			for k, v := range fields {
				inner[k] = v
			}
			return parseFields(inner) // one level: a payload inside a payload is not a command
		}
	}
	return parseFields(values)
}

// parseFields reads a command from its fields.
func parseFields(values map[string]any) (Command, error) {
	var c Command
	p := parser{values: values}
	c.SubmitID = p.uint("submit_id", 64, 1)
	if p.err != nil {
		return c, p.err
	}
	if v := p.str(fieldVersion, 1, 8); p.err == nil && v != CommandVersion {
		p.fail(fieldVersion, "unsupported version")
	}
	c.Channel = p.str(fieldChannel, 1, 64)
	c.SrcID = p.str(fieldSrcID, 0, 21)
	c.ServiceID = p.str(fieldServiceID, 0, 10)
	if d := p.str(fieldDests, 1, cmpp.MaxDestUsers*33); p.err == nil {
		c.Dests = strings.Split(d, ",")
		if len(c.Dests) > cmpp.MaxDestUsers {
			p.fail(fieldDests, "too many numbers")
		}
		for _, n := range c.Dests {
			if !digits(n, 21) {
				p.fail(fieldDests, "a number is not 1-21 digits")
				break
			}
		}
	}
	c.MsgFmt = cmpp.MsgFmt(p.uint(fieldMsgFmt, 8, 0))
	if p.err == nil && !knownFmt(c.MsgFmt) {
		p.fail(fieldMsgFmt, "unknown coding")
	}
	if s := p.str(fieldContent, 1, 400); p.err == nil {
		b, err := base64.StdEncoding.DecodeString(s)
		switch {
		case err != nil:
			p.fail(fieldContent, "not base64")
		case len(b) == 0 || len(b) > cmpp.MaxContent(c.MsgFmt):
			p.fail(fieldContent, "length out of range for msg_fmt")
		}
		c.Content = b
	}
	c.TPUDHI = uint8(p.uint(fieldTPUDHI, 8, 0))
	c.PkTotal = uint8(p.uint(fieldPkTotal, 8, 1))
	c.PkNumber = uint8(p.uint(fieldPkNumber, 8, 1))
	c.RegisteredDelivery = uint8(p.uint(fieldRegisteredDelivery, 8, 0))
	switch {
	case p.err != nil:
	case c.TPUDHI > 1:
		p.fail(fieldTPUDHI, "not 0 or 1")
	case c.RegisteredDelivery > 1:
		p.fail(fieldRegisteredDelivery, "not 0 or 1")
	case c.PkNumber > c.PkTotal:
		p.fail(fieldPkNumber, "past pk_total")
	case c.PkTotal > 1 && c.TPUDHI != 1:
		p.fail(fieldTPUDHI, "a segment of a long message needs its UDH")
	}
	if _, ok := values[fieldLinkID]; ok {
		c.LinkID = p.str(fieldLinkID, 0, 20)
	}
	return c, p.err
}

// submit builds the CMPP Submit of c for an account with SP_Id spID.
func (c Command) submit(spID string) *cmpp.Submit {
	return &cmpp.Submit{
		MsgID:              c.SubmitID, // the submit key (docs/sms/cmpp.md §9)
		PkTotal:            c.PkTotal,
		PkNumber:           c.PkNumber,
		RegisteredDelivery: c.RegisteredDelivery,
		ServiceID:          c.ServiceID,
		TPUDHI:             c.TPUDHI,
		MsgFmt:             c.MsgFmt,
		MsgSrc:             spID,
		SrcID:              c.SrcID,
		DestTerminalIDs:    c.Dests,
		MsgContent:         c.Content,
		LinkID:             c.LinkID,
	}
}

func knownFmt(f cmpp.MsgFmt) bool {
	switch f {
	case cmpp.FmtASCII, cmpp.FmtSIMWrite, cmpp.FmtBinary, cmpp.FmtUCS2, cmpp.FmtGB:
		return true
	}
	return false
}

func digits(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parser reads fields, keeping the first error.
type parser struct {
	values map[string]any
	err    error
}

func (p *parser) fail(field, why string) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: %s: %s", ErrMalformed, field, why)
	}
}

func (p *parser) str(field string, minLen, maxLen int) string {
	if p.err != nil {
		return ""
	}
	raw, ok := p.values[field]
	if !ok {
		p.fail(field, "missing")
		return ""
	}
	s, ok := raw.(string)
	if !ok {
		p.fail(field, "not a string")
		return ""
	}
	if len(s) < minLen || len(s) > maxLen {
		p.fail(field, fmt.Sprintf("length %d not in %d-%d", len(s), minLen, maxLen))
		return ""
	}
	return s
}

func (p *parser) uint(field string, bits int, minVal uint64) uint64 {
	s := p.str(field, 1, 20)
	if p.err != nil {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		p.fail(field, "not a decimal number in range")
		return 0
	}
	if n < minVal {
		p.fail(field, fmt.Sprintf("below %d", minVal))
		return 0
	}
	return n
}
