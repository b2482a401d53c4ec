// Package testbin builds the relay binary for tests that run it as a real
// child process (crash harnesses, role tests).
package testbin

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Relay builds cmd/relay into the test's temporary directory and returns its
// path; the test fails when the build does. Go's build cache makes every
// build after the first in a run quick.
func Relay(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "relay")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/relayhq/relay/cmd/relay").CombinedOutput()
	if err != nil {
		t.Fatalf("testbin: go build cmd/relay: %v\n%s", err, out)
	}
	return bin
}
