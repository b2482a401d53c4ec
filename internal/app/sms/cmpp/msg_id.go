package cmpp

import (
	"fmt"
	"time"
)

// MsgIDParts are the fields the ISMG packs into a 64-bit Msg_Id, from the
// most significant bit down:
//
//	month 4 | day 5 | hour 5 | minute 6 | second 6 | gateway 22 | sequence 16
//
// The time is when the ISMG issued the id, the gateway is the ISMG's code as
// a number (ISMG_Id "001001" is 1001), and the sequence counts up by one and
// wraps. Msg_Id travels as a big-endian unsigned 64-bit integer.
type MsgIDParts struct {
	Month, Day, Hour, Minute, Second uint8
	// Gateway is the ISMG code, below 1<<22.
	Gateway uint32
	// Seq is the ISMG's sequence number.
	Seq uint16
}

// Bit positions (of the least significant bit) and widths of the parts.
const (
	msgIDMonthShift   = 60
	msgIDDayShift     = 55
	msgIDHourShift    = 50
	msgIDMinuteShift  = 44
	msgIDSecondShift  = 38
	msgIDGatewayShift = 16
	// MaxMsgIDGateway is the largest gateway code a Msg_Id can hold.
	MaxMsgIDGateway = 1<<22 - 1
)

// MsgIDPartsAt returns the parts of a Msg_Id issued at t (in t's own
// location) by gateway with sequence seq.
func MsgIDPartsAt(t time.Time, gateway uint32, seq uint16) MsgIDParts {
	_, month, day := t.Date()
	hour, minute, second := t.Clock()
	return MsgIDParts{
		Month: uint8(month), Day: uint8(day), Hour: uint8(hour), Minute: uint8(minute), Second: uint8(second),
		Gateway: gateway, Seq: seq,
	}
}

// Pack returns the Msg_Id; ErrInvalid when a part is out of its calendar or
// bit range (month 1–12, day 1–31, hour 0–23, minute and second 0–59,
// gateway up to MaxMsgIDGateway).
func (p MsgIDParts) Pack() (uint64, error) {
	if p.Month < 1 || p.Month > 12 || p.Day < 1 || p.Day > 31 || p.Hour > 23 || p.Minute > 59 || p.Second > 59 || p.Gateway > MaxMsgIDGateway {
		return 0, fmt.Errorf("cmpp: Msg_Id: %w: parts %02d-%02d %02d:%02d:%02d gateway %d", ErrInvalid,
			p.Month, p.Day, p.Hour, p.Minute, p.Second, p.Gateway)
	}
	return uint64(p.Month)<<msgIDMonthShift |
		uint64(p.Day)<<msgIDDayShift |
		uint64(p.Hour)<<msgIDHourShift |
		uint64(p.Minute)<<msgIDMinuteShift |
		uint64(p.Second)<<msgIDSecondShift |
		uint64(p.Gateway)<<msgIDGatewayShift |
		uint64(p.Seq), nil
}

// ParseMsgID splits a Msg_Id into its parts. It does not validate them: an
// id from a peer that packs it differently still parses, to values that may
// be out of range.
func ParseMsgID(id uint64) MsgIDParts {
	return MsgIDParts{
		Month:   uint8(id >> msgIDMonthShift & 0xf),
		Day:     uint8(id >> msgIDDayShift & 0x1f),
		Hour:    uint8(id >> msgIDHourShift & 0x1f),
		Minute:  uint8(id >> msgIDMinuteShift & 0x3f),
		Second:  uint8(id >> msgIDSecondShift & 0x3f),
		Gateway: uint32(id >> msgIDGatewayShift & MaxMsgIDGateway),
		Seq:     uint16(id),
	}
}
