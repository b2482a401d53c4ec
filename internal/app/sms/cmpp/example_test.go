package cmpp_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// Example_connect logs an SP in: the Connect carries an authenticator made
// from the injected time, the ISMG checks it and proves the secret back.
func Example_connect() {
	now := time.Date(2026, 3, 2, 8, 30, 15, 0, time.FixedZone("CST", 8*3600))
	c := cmpp.NewConnect("901234", "secret", cmpp.V30, now)
	pkt, _ := cmpp.AppendPacket(nil, cmpp.V30, 1, &c)

	// The ISMG side.
	h, body, _ := cmpp.NewFrameReader(bytes.NewReader(pkt)).Next()
	var got cmpp.Connect
	_ = got.DecodeBody(body, cmpp.V30)
	fmt.Println(h.CommandID, got.SourceAddr, got.Version, got.Verify("secret"))
	resp := cmpp.ConnectResp{Status: cmpp.ConnectOK, Version: cmpp.V30,
		AuthenticatorISMG: cmpp.AuthenticatorISMG(cmpp.V30, cmpp.ConnectOK, got.AuthenticatorSource, "secret")}

	// The SP checks the answer against what it sent.
	fmt.Println(resp.Verify(cmpp.V30, c.AuthenticatorSource, "secret"))
	// Output:
	// CONNECT 901234 3.0 true
	// true
}

// Example_submit splits a long UCS2 text into segments, encodes one Submit
// per segment into a single reused buffer, and reads them back: 84
// characters are 67 + 17, and a 3.0 Submit to one number is 195 bytes plus
// its content (6 bytes of UDH and 2 per character).
func Example_submit() {
	text := strings.Repeat("您的验证码是 123456，请勿告诉他人。", 4)
	ref := uint16(0x2a)
	segs, err := cmpp.Split(text, cmpp.FmtUCS2, cmpp.SplitOpts{RefFunc: func() uint16 { ref++; return ref }})
	if err != nil {
		panic(err)
	}
	s := cmpp.Submit{RegisteredDelivery: 1, ServiceID: "MXT0001", MsgFmt: cmpp.FmtUCS2, MsgSrc: "901234",
		SrcID: "106900001", DestTerminalIDs: []string{"13800138000"}}
	stream := make([]byte, 0, len(segs)*cmpp.MaxPacket)
	for i, seg := range segs {
		s.PkTotal, s.PkNumber, s.TPUDHI, s.MsgContent = seg.PkTotal, seg.PkNumber, seg.TPUDHI, seg.Content
		if stream, err = cmpp.AppendPacket(stream, cmpp.V30, uint32(100+i), &s); err != nil {
			panic(err)
		}
	}

	fr := cmpp.NewFrameReader(bytes.NewReader(stream))
	var got cmpp.Submit // one struct, reused for every packet
	for {
		h, body, err := fr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err := got.DecodeBody(body, cmpp.V30); err != nil {
			panic(err)
		}
		udh, payload, _ := cmpp.ParseUDH(got.MsgContent)
		fmt.Printf("seq=%d %d/%d ref=%#x bytes=%d chars=%d\n", h.SequenceID, got.PkNumber, got.PkTotal, udh.Ref, h.TotalLength, len(payload)/2)
	}
	// Output:
	// seq=100 1/2 ref=0x2b bytes=335 chars=67
	// seq=101 2/2 ref=0x2b bytes=235 chars=17
}

// ExampleReassembler joins the parts of a long MO, in whatever order the
// Delivers bring them.
func ExampleReassembler() {
	r, _ := cmpp.NewReassembler(cmpp.ReassemblerConfig{TTL: 5 * time.Minute})
	now := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	parts := []string{"\x05\x00\x03\x07\x02\x02world", "\x05\x00\x03\x07\x02\x01hello "}
	for _, content := range parts {
		d := cmpp.Deliver{SrcTerminalID: "13800138000", DestID: "106900001", TPUDHI: 1, MsgContent: []byte(content)}
		msg, done, err := r.Add(now, cmpp.Part{SrcTerminalID: d.SrcTerminalID, DestID: d.DestID, MsgFmt: d.MsgFmt, Content: d.MsgContent})
		if err != nil {
			panic(err)
		}
		if done {
			text, _ := cmpp.DecodeText(msg.Content, msg.MsgFmt)
			fmt.Printf("%q in %d parts\n", text, msg.Parts)
		}
	}
	fmt.Println("expired:", r.Expire(now.Add(5*time.Minute)))
	// Output:
	// "hello world" in 2 parts
	// expired: 0
}
