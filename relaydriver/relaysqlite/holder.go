package relaysqlite

import (
	"os"
	"sync"
)

// A SQLite store is a file on this machine, so the process holding one of its
// lock rows can be asked whether it still exists. TryLock records this
// process in the rows it takes (holder, holder_pid) and takes a held row at
// once when its holder is on this machine, in this PID namespace, and its
// process is gone — a restart after kill -9 then does not wait for the lease
// to expire. Anything it cannot establish (no hostname, no PID namespace, a
// row from before the columns, a PID that is alive, even if reused by an
// unrelated process) leaves the row to expire as before.

// holderID names this machine and PID namespace: "<hostname>|<pid ns>", or
// "" when either is unknown (the takeover is then never attempted).
var holderID = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return ""
	}
	ns := pidNamespace()
	if ns == "" {
		return ""
	}
	return host + "|" + ns
})

// pidNamespace identifies the PID namespace of this process ("pid:[…]" on
// Linux), "" where there is none to read.
func pidNamespace() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
}
