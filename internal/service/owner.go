package service

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// NewOwner returns a lock and lease owner name for one running part:
// "<hostname>/<pid>/<random>". The random part keeps two parts of one
// process apart (a SQLite lease lets its own owner take it again), and a
// restarted process never reuses its predecessor's name.
func NewOwner() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
