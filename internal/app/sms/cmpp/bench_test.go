package cmpp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// benchSubmit is a typical segment: one destination, a full UCS2 segment.
func benchSubmit() *cmpp.Submit {
	s := submit("13800138000")
	s.RegisteredDelivery, s.TPUDHI, s.MsgFmt, s.FeeType, s.FeeCode = 1, 1, cmpp.FmtUCS2, "02", "10"
	s.MsgContent = make([]byte, 140)
	return s
}

// benchDeliver is a 3.0-sized status report.
func benchDeliver(v cmpp.Version) *cmpp.Deliver {
	rep := cmpp.Report{MsgID: msgID7, Stat: "DELIVRD", SubmitTime: "2603020830", DoneTime: "2603020831", DestTerminalID: "13800138000"}
	content, err := rep.AppendTo(nil, v)
	if err != nil {
		panic(err)
	}
	return &cmpp.Deliver{MsgID: msgID7 + 1, DestID: "106900001", ServiceID: "MXT0001",
		SrcTerminalID: "13800138000", RegisteredDelivery: 1, MsgContent: content}
}

var versions = []cmpp.Version{cmpp.V20, cmpp.V30}

func benchEncode(b *testing.B, p func(cmpp.Version) cmpp.Packet) {
	for _, v := range versions {
		b.Run(v.String(), func(b *testing.B) {
			pkt := p(v)
			buf := make([]byte, 0, cmpp.MaxPacket)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				var err error
				if buf, err = cmpp.AppendPacket(buf[:0], v, uint32(i), pkt); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

func benchDecode(b *testing.B, p func(cmpp.Version) cmpp.Packet) {
	for _, v := range versions {
		b.Run(v.String(), func(b *testing.B) {
			pkt := p(v)
			enc, err := cmpp.AppendPacket(nil, v, 1, pkt)
			require.NoError(b, err)
			body := enc[cmpp.HeaderLen:]
			into, err := cmpp.NewPacket(pkt.Command())
			require.NoError(b, err)
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if err := into.DecodeBody(body, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func submitPacket(cmpp.Version) cmpp.Packet    { return benchSubmit() }
func deliverPacket(v cmpp.Version) cmpp.Packet { return benchDeliver(v) }

func BenchmarkEncodeSubmit(b *testing.B)  { benchEncode(b, submitPacket) }
func BenchmarkDecodeSubmit(b *testing.B)  { benchDecode(b, submitPacket) }
func BenchmarkEncodeDeliver(b *testing.B) { benchEncode(b, deliverPacket) }
func BenchmarkDecodeDeliver(b *testing.B) { benchDecode(b, deliverPacket) }

func BenchmarkSplitUCS2(b *testing.B) {
	text := string([]rune(benchText)[:300])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cmpp.Split(text, cmpp.FmtUCS2, cmpp.SplitOpts{RefFunc: refs(1)}); err != nil {
			b.Fatal(err)
		}
	}
}

const benchText = "短信网关长短信拆分基准测试文本，包含中文字符与标点。" +
	"短信网关长短信拆分基准测试文本，包含中文字符与标点。短信网关长短信拆分基准测试文本，包含中文字符与标点。" +
	"短信网关长短信拆分基准测试文本，包含中文字符与标点。短信网关长短信拆分基准测试文本，包含中文字符与标点。" +
	"短信网关长短信拆分基准测试文本，包含中文字符与标点。短信网关长短信拆分基准测试文本，包含中文字符与标点。" +
	"短信网关长短信拆分基准测试文本，包含中文字符与标点。短信网关长短信拆分基准测试文本，包含中文字符与标点。" +
	"短信网关长短信拆分基准测试文本，包含中文字符与标点。短信网关长短信拆分基准测试文本，包含中文字符与标点。" +
	"短信网关长短信拆分基准测试文本，包含中文字符与标点。短信网关长短信拆分基准测试文本，包含中文字符与标点。"

// TestEncodeDecodeAllocateNothing holds the benchmarks' promise: encoding
// into a buffer with room, and decoding a repeated packet into a reused
// struct, allocate nothing. Not parallel: AllocsPerRun.
func TestEncodeDecodeAllocateNothing(t *testing.T) {
	for _, v := range versions {
		for _, pkt := range []cmpp.Packet{benchSubmit(), benchDeliver(v)} {
			buf := make([]byte, 0, cmpp.MaxPacket)
			require.Zero(t, testing.AllocsPerRun(100, func() {
				var err error
				if buf, err = cmpp.AppendPacket(buf[:0], v, 1, pkt); err != nil {
					panic(err)
				}
			}), "encode %s %s", pkt.Command(), v)
			into, err := cmpp.NewPacket(pkt.Command())
			require.NoError(t, err)
			body := buf[cmpp.HeaderLen:]
			require.NoError(t, into.DecodeBody(body, v))
			require.Zero(t, testing.AllocsPerRun(100, func() {
				if err := into.DecodeBody(body, v); err != nil {
					panic(err)
				}
			}), "decode %s %s", pkt.Command(), v)
		}
	}
}
