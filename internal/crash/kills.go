package crash

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"
)

// Kills is one kill loop: Kills children of Binary with Args, each killed by
// SIGKILL after MinWait plus a random part of Spread, or earlier by a named
// fault point (armed with FaultProbability on every other child).
type Kills struct {
	Binary           string
	Args             []string
	Kills            int
	FaultProbability float64
	MinWait, Spread  time.Duration
	Rand             *rand.Rand
	// Before runs before child i starts (e.g. writes the next rows); After
	// reports child i's end.
	Before func(i int) error
	After  func(i int, wait time.Duration, faultKilled bool)
}

// faultPoints arms every engine fault point with probability p.
func faultPoints(p float64) string {
	s := fmt.Sprintf("%g", p)
	return "fifo.after-commit=" + s + ",fifo.mid-batch=" + s + ",dispatch.after-confirm=" + s + ",ack.after-write=" + s
}

// Run executes the loop and reports how many children were killed and how
// many of those by a fault point. A child that exits on its own is an error.
func (k Kills) Run(ctx context.Context) (killed, faultKilled int, err error) {
	for i := 0; i < k.Kills; i++ {
		if k.Before != nil {
			if err := k.Before(i); err != nil {
				return killed, faultKilled, err
			}
		}
		faults := ""
		if k.FaultProbability > 0 && i%2 == 1 {
			faults = faultPoints(k.FaultProbability)
		}
		c, err := start(k.Binary, k.Args, faults, k.Rand.Uint64())
		if err != nil {
			return killed, faultKilled, err
		}
		wait := k.MinWait + time.Duration(k.Rand.Int64N(int64(k.Spread)))
		select {
		case <-c.done: // a fault point killed it
			if c.faultKilled() {
				faultKilled++
			} else if !c.killed() {
				return killed, faultKilled, fmt.Errorf("crash: child exited on its own in round %d: %v\n%s", i, c.err, c.out.String())
			}
		case <-time.After(wait):
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
		case <-ctx.Done():
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
			return killed, faultKilled, ctx.Err()
		}
		killed++
		if k.After != nil {
			k.After(i, wait, c.faultKilled())
		}
	}
	return killed, faultKilled, nil
}

// KillKind labels a kill in progress lines.
func KillKind(fault bool) string {
	if fault {
		return "(fault point)"
	}
	return "(SIGKILL)    "
}

// Drain runs a last child without fault points until settled reports true
// (polled every 100ms, at most 3 minutes), then stops it with SIGTERM and
// requires a clean exit within 30s. progress describes the state for an error.
func Drain(ctx context.Context, bin string, args []string, settled func() (bool, error), progress func() string) error {
	c, err := start(bin, args, "", 0)
	if err != nil {
		return err
	}
	deadline := time.After(3 * time.Minute)
	// The child must have been up long enough to install its signal handler
	// before it gets SIGTERM, even when everything was already settled by the
	// children before it (a SIGTERM during start-up kills it uncleanly).
	upSince := time.Now()
	for {
		ok, err := settled()
		if err != nil {
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
			return err
		}
		if ok && time.Since(upSince) >= time.Second {
			break
		}
		select {
		case <-deadline:
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
			return fmt.Errorf("crash: pipeline did not drain within 3 minutes (%s)\n%s", progress(), c.out.String())
		case <-c.done:
			return fmt.Errorf("crash: final child exited: %v\n%s", c.err, c.out.String())
		case <-ctx.Done():
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		if c.err != nil {
			return fmt.Errorf("crash: final child did not stop cleanly: %v\n%s", c.err, c.out.String())
		}
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		return errors.New("crash: final child did not stop within 30s of SIGTERM")
	}
	return nil
}
