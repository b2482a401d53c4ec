package supervise

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/relayhq/relay/internal/faultpoint"
)

// child is one running relay process: one life of a role.
type child struct {
	cmd   *exec.Cmd
	out   *faultpoint.Tail
	armed string // RELAY_FAULTPOINTS of this life; "" unarmed
	// booked: the life's end is counted (role.mu guards it).
	booked bool
	began  time.Time
	done   chan struct{}
	err    error
}

// startChild starts bin with args, env added to the harness's environment,
// the fault points faults armed (RELAY_FAULTPOINTS, "" for none) and the
// child's draws seeded by seed.
func startChild(bin string, args, env []string, faults string, seed uint64) (*child, error) {
	c := &child{cmd: exec.Command(bin, args...), out: faultpoint.NewTail(64 << 10), armed: faults, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Env = append(c.cmd.Env, "RELAY_FAULTPOINTS="+faults, "RELAY_FAULTSEED="+strconv.FormatUint(seed, 10))
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("supervise: start %s: %w", bin, err)
	}
	c.began = time.Now()
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	return c, nil
}

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill ends the child with SIGKILL, unless it already ended, and waits.
func (c *child) kill() {
	if !c.exited() {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-c.done
}

// stop ends the child with SIGTERM and waits up to d for it (then kills
// it); nil when it exited cleanly.
func (c *child) stop(d time.Duration) error {
	if c.exited() {
		return fmt.Errorf("had already exited: %v", c.err)
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return c.err
	case <-time.After(d):
		c.kill()
		return fmt.Errorf("still running %s after SIGTERM", d)
	}
}

// faultPoint returns the fault point that killed the ended child, or "".
func (c *child) faultPoint() string { return faultpoint.KilledAt(c.cmd.ProcessState, c.out.String()) }
