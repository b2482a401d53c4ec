package cli

import (
	"os"
	"runtime/debug"
)

// serverGOGCDefault is the garbage collector target the msgx service, the
// shipsync shore, the sms chain's roles (and the API, the gateway, the demo
// and the load run) and their benches run with when the environment sets
// no GOGC. All allocate per message or event (decoded messages, states,
// documents; decoded batches, statements, answers) and keep a small live
// heap, so a higher target trades a few times that heap for CPU. Measured
// with relay bench msgx (docs/benchmarks.md#msgx): at 300 the GC's mark
// workers took about a third of the CPU they took at 100, the process about
// 8 % less CPU per message; with relay bench shipsync-ingress the shore's
// process took 39-40 µs per applied event instead of 46-47; in relay sms
// load the GC's mark workers and assists fell from 5-7 % of the process's
// CPU to 2-2.5 %. Set GOGC (and GOMEMLIMIT on a small host) in the
// environment to choose otherwise.
const serverGOGCDefault = 300

// setServerGOGC applies serverGOGCDefault unless GOGC is in the environment.
func setServerGOGC() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(serverGOGCDefault)
	}
}
