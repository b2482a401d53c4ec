package supervise

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Printer returns a function that prints one progress line (format + a
// newline) to w; it is safe for concurrent use, so a harness and its roles
// can share it.
func Printer(w io.Writer) func(format string, a ...any) {
	var mu sync.Mutex
	return func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, format+"\n", a...)
	}
}

// FreeAddr returns a loopback address with a port free now, for a role to
// listen on (another process may take it first: a harness on a shared
// machine accepts that small race).
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
