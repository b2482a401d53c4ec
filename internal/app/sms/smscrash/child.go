package smscrash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/relayhq/relay/internal/faultpoint"
)

// child is one running relay process.
type child struct {
	cmd   *exec.Cmd
	out   *faultpoint.Tail
	began time.Time
	done  chan struct{}
	err   error
}

// startChild starts bin with args, env added to the harness's environment
// and the fault points faults armed (RELAY_FAULTPOINTS, "" for none) with
// the child's random draws seeded by seed.
func startChild(bin string, args, env []string, faults string, seed uint64) (*child, error) {
	c := &child{cmd: exec.Command(bin, args...), out: faultpoint.NewTail(64 << 10), done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Env = append(c.cmd.Env, "RELAY_FAULTPOINTS="+faults, "RELAY_FAULTSEED="+strconv.FormatUint(seed, 10))
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("smscrash: start %s: %w", bin, err)
	}
	c.began = time.Now()
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	return c, nil
}

// runUntil lets the child run until done reports true (asked every poll)
// or max has passed, then kills it with SIGKILL. A child that a fault point
// kills before is fine; one that exits any other way is an error (with its
// output). It returns how long the child lived.
func (c *child) runUntil(ctx context.Context, max, poll time.Duration, done func() bool) (time.Duration, error) {
	deadline := time.After(max)
	for {
		select {
		case <-c.done:
			if c.faultPoint() == "" {
				return time.Since(c.began), fmt.Errorf("exited on its own: %v\n%s", c.err, c.out.String())
			}
			return time.Since(c.began), nil
		case <-deadline:
			c.kill()
			return time.Since(c.began), nil
		case <-ctx.Done():
			c.kill()
			return time.Since(c.began), ctx.Err()
		case <-time.After(poll):
			if done() {
				c.kill()
				return time.Since(c.began), nil
			}
		}
	}
}

// kill ends the child with SIGKILL, unless it already ended, and waits.
func (c *child) kill() {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.done
	}
}

// faultPoint returns the fault point that killed the ended child, or "".
func (c *child) faultPoint() string { return faultpoint.KilledAt(c.cmd.ProcessState, c.out.String()) }

// supplierChild is the supplier simulator's process and its address.
type supplierChild struct {
	*child
	addr string
}

// supplierStart bounds the wait for the supplier's "listening on" line.
const supplierStart = 15 * time.Second

var listeningLine = regexp.MustCompile(`sms supplier: listening on (\S+) `)

// startSupplier runs `relay sms supplier` on a free loopback port with the
// record at record (written before every SubmitResp), SubmitResps after 1 to
// 10 ms (so that Submits are in flight when a gateway is killed), 1% of
// Submits refused (REJECTED) and 0.2% answered with flow control (NOT_SENT,
// claimed again later). The account's secret goes in the environment, not
// the process list.
func startSupplier(ctx context.Context, bin, secret, record string, seed uint64) (*supplierChild, error) {
	args := []string{"sms", "supplier", "--listen", "127.0.0.1:0", "--record", record, "--record-sync", "write",
		"--latency", "uniform:1ms..10ms", "--fail-rate", "0.01", "--flow-control-rate", "0.002",
		"--max-conns", "16", "--stats-every", "0", "--seed", strconv.FormatUint(seed, 10), "--log-level", "error"}
	c, err := startChild(bin, args, []string{"SMS_SUPPLIER_ACCOUNTS=" + spID + ":" + secret}, "", 0)
	if err != nil {
		return nil, err
	}
	deadline := time.After(supplierStart)
	for {
		if m := listeningLine.FindStringSubmatch(c.out.String()); m != nil {
			return &supplierChild{child: c, addr: m[1]}, nil
		}
		select {
		case <-c.done:
			return nil, fmt.Errorf("smscrash: supplier exited: %v\n%s", c.err, c.out.String())
		case <-deadline:
			c.kill()
			return nil, fmt.Errorf("smscrash: supplier not listening after %s\n%s", supplierStart, c.out.String())
		case <-ctx.Done():
			c.kill()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop ends the supplier with SIGTERM (it closes its record) and requires a
// clean exit.
func (s *supplierChild) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.kill()
		return errors.New("smscrash: supplier did not stop within 30s of SIGTERM")
	}
	if s.err != nil {
		return fmt.Errorf("smscrash: supplier did not stop cleanly: %v\n%s", s.err, s.out.String())
	}
	return nil
}
