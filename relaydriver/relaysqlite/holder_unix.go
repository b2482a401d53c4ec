//go:build unix

package relaysqlite

import (
	"errors"
	"syscall"
)

// processGone reports whether no process with pid exists (in this PID
// namespace). A process that exists but belongs to another user answers
// EPERM and counts as alive.
func processGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
