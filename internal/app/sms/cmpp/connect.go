package cmpp

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/binary"
	"time"
)

// Connect is CMPP_CONNECT (SP → ISMG), the same in 2.0 and 3.0:
// Source_Addr 6 | AuthenticatorSource 16 | Version 1 | Timestamp 4.
type Connect struct {
	// SourceAddr is Source_Addr: the SP_Id, the SP's 6-digit enterprise code.
	SourceAddr string
	// AuthenticatorSource proves the shared secret; see AuthenticatorSource.
	AuthenticatorSource [16]byte
	// Version is the version the client asks for. Decoding keeps any value;
	// choosing what to answer is the server's business.
	Version Version
	// Timestamp is the MMDDHHMMSS the authenticator was computed over, as a
	// number (see Timestamp).
	Timestamp uint32
}

// NewConnect returns the Connect an SP sends at now: the timestamp and the
// authenticator are computed from now, never from the wall clock, so a test
// or a replay gets the same bytes. now should be in the zone the ISMG expects
// (China Standard Time in practice); its own location is used as it is.
func NewConnect(sourceAddr, secret string, v Version, now time.Time) Connect {
	ts := Timestamp(now)
	return Connect{
		SourceAddr:          sourceAddr,
		AuthenticatorSource: AuthenticatorSource(sourceAddr, secret, ts),
		Version:             v,
		Timestamp:           ts,
	}
}

// Verify reports whether c's authenticator was made with secret (the ISMG's
// check), in constant time.
func (c *Connect) Verify(secret string) bool {
	want := AuthenticatorSource(c.SourceAddr, secret, c.Timestamp)
	return subtle.ConstantTimeCompare(want[:], c.AuthenticatorSource[:]) == 1
}

// Command returns CmdConnect.
func (*Connect) Command() CommandID { return CmdConnect }

// AppendBody implements Packet.
func (c *Connect) AppendBody(dst []byte, v Version) ([]byte, error) {
	w := newWriter(dst, v)
	w.octets("Source_Addr", c.SourceAddr, 6)
	w.raw(c.AuthenticatorSource[:])
	w.u8(uint8(c.Version))
	w.u32(c.Timestamp)
	return w.finish(CmdConnect)
}

// DecodeBody implements Packet.
func (c *Connect) DecodeBody(body []byte, v Version) error {
	r := newReader(body, v)
	r.octets(&c.SourceAddr, 6)
	copy(c.AuthenticatorSource[:], r.take(16))
	c.Version = Version(r.u8())
	c.Timestamp = r.u32()
	return r.finish(CmdConnect)
}

// Connect status values (ConnectResp.Status).
const (
	ConnectOK             = 0 // accepted
	ConnectBadStructure   = 1 // malformed Connect
	ConnectBadSourceAddr  = 2 // unknown Source_Addr
	ConnectAuthFailed     = 3 // AuthenticatorSource does not match
	ConnectVersionTooHigh = 4 // the ISMG does not speak the asked version
	// Values from 5 up are other errors.
)

// ConnectResp is CMPP_CONNECT_RESP (ISMG → SP):
// Status (2.0: 1 byte, 3.0: 4 bytes) | AuthenticatorISMG 16 | Version 1.
type ConnectResp struct {
	// Status is 0 on success, see the Connect… constants. In 2.0 it must fit
	// one byte.
	Status uint32
	// AuthenticatorISMG proves the ISMG knows the secret too; zero on an
	// authentication error. See AuthenticatorISMG.
	AuthenticatorISMG [16]byte
	// Version is the highest version the ISMG supports.
	Version Version
}

// Verify reports whether r's authenticator answers authSource with secret
// (the SP's check of the ISMG), in constant time. v is the layout the
// response came in; it decides the width of Status inside the hash.
func (r *ConnectResp) Verify(v Version, authSource [16]byte, secret string) bool {
	want := AuthenticatorISMG(v, r.Status, authSource, secret)
	return subtle.ConstantTimeCompare(want[:], r.AuthenticatorISMG[:]) == 1
}

// Command returns CmdConnectResp.
func (*ConnectResp) Command() CommandID { return CmdConnectResp }

// AppendBody implements Packet.
func (r *ConnectResp) AppendBody(dst []byte, v Version) ([]byte, error) {
	w := newWriter(dst, v)
	w.status("Status", r.Status)
	w.raw(r.AuthenticatorISMG[:])
	w.u8(uint8(r.Version))
	return w.finish(CmdConnectResp)
}

// connectRespLen20 is the 2.0 body length of ConnectResp (1-byte Status);
// the 3.0 body is 21 bytes.
const connectRespLen20 = 1 + 16 + 1

// DecodeBody implements Packet. The width of Status is taken from the body's
// length (18 bytes: 1, 21 bytes: 4), not from v: the answer to a Connect is
// where the two sides find out they speak different versions, and a 2.0 ISMG
// answers a 3.0 Connect in its own layout ("version too high").
func (r *ConnectResp) DecodeBody(body []byte, v Version) error {
	rd := newReader(body, v)
	if len(body) == connectRespLen20 {
		r.Status = uint32(rd.u8())
	} else {
		r.Status = rd.u32()
	}
	copy(r.AuthenticatorISMG[:], rd.take(16))
	r.Version = Version(rd.u8())
	return rd.finish(CmdConnectResp)
}

// Timestamp returns t as the Connect Timestamp: the decimal number
// MMDDHHMMSS (0102150405 for 2 January 15:04:05 is 102150405), in t's own
// location.
func Timestamp(t time.Time) uint32 {
	_, month, day := t.Date()
	hour, minute, second := t.Clock()
	return uint32(month)*100000000 + uint32(day)*1000000 + uint32(hour)*10000 + uint32(minute)*100 + uint32(second)
}

// AuthenticatorSource returns
// MD5(Source_Addr + 9 bytes of 0x00 + secret + timestamp), the timestamp
// written as its 10 digits MMDDHHMMSS (leading zero kept).
func AuthenticatorSource(sourceAddr, secret string, timestamp uint32) [16]byte {
	var stack [128]byte
	b := append(stack[:0], sourceAddr...)
	b = append(b, make([]byte, 9)...)
	b = append(b, secret...)
	b = appendDigits(b, timestamp, 10)
	return md5.Sum(b)
}

// AuthenticatorISMG returns MD5(Status + AuthenticatorSource + secret), with
// Status in version v's width (1 byte in 2.0, 4 big-endian bytes in 3.0), as
// it stands in the ConnectResp.
func AuthenticatorISMG(v Version, status uint32, authSource [16]byte, secret string) [16]byte {
	var stack [128]byte
	b := stack[:0]
	if v.statusLen() == 4 {
		b = binary.BigEndian.AppendUint32(b, status)
	} else {
		b = append(b, uint8(status))
	}
	b = append(b, authSource[:]...)
	b = append(b, secret...)
	return md5.Sum(b)
}

// appendDigits appends x as exactly n decimal digits, left-padded with '0'
// (the high digits are dropped if x has more than n).
func appendDigits(b []byte, x uint32, n int) []byte {
	start := len(b)
	b = append(b, make([]byte, n)...)
	for i := len(b) - 1; i >= start; i-- {
		b[i] = '0' + byte(x%10)
		x /= 10
	}
	return b
}
