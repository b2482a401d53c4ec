// Package suppliertest is a minimal CMPP SP peer for tests of the supplier
// simulator and of what runs it (the CLI): one connection, synchronous,
// built on the codec alone. It is no client: no window, no retries, no
// keep-alive of its own — a test sends and reads exactly what it means to.
package suppliertest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// Peer is one SP connection. Not safe for concurrent use, except Close.
type Peer struct {
	conn net.Conn
	fr   *cmpp.FrameReader
	buf  []byte
	seq  uint32
	stop func() bool
	// V is the version the peer encodes and decodes in; Login sets it.
	V cmpp.Version
}

// Dial connects to addr. When ctx ends the connection is closed, which
// fails a Read that waits — a test's watchdog.
func Dial(ctx context.Context, addr string) (*Peer, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Peer{conn: conn, fr: cmpp.NewFrameReader(bufio.NewReader(conn)), V: cmpp.V30}
	p.stop = context.AfterFunc(ctx, func() { _ = conn.Close() })
	return p, nil
}

// Close closes the connection.
func (p *Peer) Close() error {
	p.stop()
	return p.conn.Close()
}

// Login sends a Connect for sourceAddr with secret asking for version v,
// timestamped now, and reads the ConnectResp. On Status 0 the peer speaks v
// from then on; it also checks the ISMG's authenticator.
func (p *Peer) Login(sourceAddr, secret string, v cmpp.Version, now time.Time) (cmpp.ConnectResp, error) {
	req := cmpp.NewConnect(sourceAddr, secret, v, now)
	if _, err := p.Send(&req); err != nil {
		return cmpp.ConnectResp{}, err
	}
	h, body, err := p.fr.Next()
	if err != nil {
		return cmpp.ConnectResp{}, err
	}
	if h.CommandID != cmpp.CmdConnectResp {
		return cmpp.ConnectResp{}, fmt.Errorf("suppliertest: got %s, want CONNECT_RESP", h.CommandID)
	}
	var resp cmpp.ConnectResp
	if err := resp.DecodeBody(body, v); err != nil {
		return resp, err
	}
	if resp.Status == 0 {
		p.V = v
		if !resp.Verify(v, req.AuthenticatorSource, secret) {
			return resp, fmt.Errorf("suppliertest: AuthenticatorISMG does not verify")
		}
	}
	return resp, nil
}

// Send writes pkt with the next Sequence_Id and returns it.
func (p *Peer) Send(pkt cmpp.Packet) (uint32, error) {
	p.seq++
	return p.seq, p.SendSeq(p.seq, pkt)
}

// SendSeq writes pkt with Sequence_Id seq.
func (p *Peer) SendSeq(seq uint32, pkt cmpp.Packet) error {
	var err error
	p.buf, err = cmpp.AppendPacket(p.buf[:0], p.V, seq, pkt)
	if err != nil {
		return err
	}
	_, err = p.conn.Write(p.buf)
	return err
}

// Write writes raw bytes: a packet the codec would refuse to encode.
func (p *Peer) Write(b []byte) error {
	_, err := p.conn.Write(b)
	return err
}

// Read reads the next packet and decodes it.
func (p *Peer) Read() (cmpp.Header, cmpp.Packet, error) {
	h, body, err := p.fr.Next()
	if err != nil {
		return h, nil, err
	}
	pkt, err := cmpp.NewPacket(h.CommandID)
	if err != nil {
		return h, nil, err
	}
	return h, pkt, pkt.DecodeBody(body, p.V)
}

// Answer sends the success response to a request the peer read: DeliverResp
// (Result 0, the Deliver's Msg_Id), ActiveTestResp or TerminateResp. Other
// packets need no answer.
func (p *Peer) Answer(h cmpp.Header, pkt cmpp.Packet) error {
	switch x := pkt.(type) {
	case *cmpp.Deliver:
		return p.SendSeq(h.SequenceID, &cmpp.DeliverResp{MsgID: x.MsgID})
	case *cmpp.ActiveTest:
		return p.SendSeq(h.SequenceID, &cmpp.ActiveTestResp{})
	case *cmpp.Terminate:
		return p.SendSeq(h.SequenceID, &cmpp.TerminateResp{})
	}
	return nil
}

// Submit returns a Submit of text (ASCII) to dest asking for a report,
// tagged with key in its Msg_Id field.
func Submit(sourceAddr, dest, text string, key uint64) *cmpp.Submit {
	return &cmpp.Submit{MsgID: key, PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, MsgSrc: sourceAddr,
		SrcID: "1069" + sourceAddr, DestTerminalIDs: []string{dest}, MsgFmt: cmpp.FmtASCII, MsgContent: []byte(text)}
}
