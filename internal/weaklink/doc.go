// Package weaklink is a TCP proxy that behaves like a weak satellite link,
// for tests of the ship sync client and anything else that must survive one:
// a byte-rate limit per direction (a flow.TokenBucket shared by all
// connections, as on one link), an added one-way latency that preserves byte
// order and adds to the transfer time rather than dividing the throughput
// (a delay line after the rate limit), random mid-stream cuts that are
// reproducible from a seed, and outages (SetDown). Stats counts what went
// through.
//
//	p, _ := weaklink.New(weaklink.Config{Target: "127.0.0.1:8443", Rate: 128 << 10, Latency: 300 * time.Millisecond})
//	addr, _ := p.Start(ctx) // point the client at addr
//	defer p.Stop(context.Background())
//
// It runs in real time on relayclock.System by default: a test tool, not
// engine code. The seed fixes which connections are cut and after how many
// bytes, in accept order; when exactly a cut lands depends on the
// connections' own timing.
package weaklink
