package supervise

import (
	"context"
	"net"
	"strconv"
	"time"
)

// WaitFault waits up to d, or until ctx ends, for one more of the role's
// lives to die at a fault point: a harness that armed a life gives it time
// to reach its point before the next step.
func WaitFault(ctx context.Context, r *Role, d time.Duration) {
	count := func() int {
		n, _ := r.Stats().FaultDeaths()
		return n
	}
	before := count()
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for count() == before {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-tick.C:
		}
	}
}

// Serving reports whether addr accepts TCP connections now (a role's
// listener is up).
func Serving(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// FreePort returns a loopback port free now, for a server in the harness
// that the roles must reach at a fixed address (see FreeAddr's race).
func FreePort() (int, error) {
	a, err := FreeAddr()
	if err != nil {
		return 0, err
	}
	_, p, _ := net.SplitHostPort(a)
	return strconv.Atoi(p)
}
