package demo

import (
	"crypto/rand"
	"encoding/hex"
)

// UniqueName returns prefix, a '-' and 8 random hex digits: the queue (or
// target, stream) name of one demo, harness or bench run, so that runs on a
// shared store or broker never meet and each can be rerun.
func UniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return prefix + "-" + hex.EncodeToString(b[:])
}
