package pki_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/relayclock"
)

// Example_devPKI makes a CA, the shore's certificate and a node certificate,
// and reads the node id back the way the shore does.
func Example_devPKI() {
	tmp, err := os.MkdirTemp("", "pki-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	d := pki.Dir{Path: filepath.Join(tmp, "pki"), Clock: relayclock.NewFake(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))}
	if _, err := d.InitCA(); err != nil {
		panic(err)
	}
	srv, err := d.IssueServer(nil) // localhost, 127.0.0.1
	if err != nil {
		panic(err)
	}
	node, err := d.IssueNode("ship-0042", "")
	if err != nil {
		panic(err)
	}
	id, err := pki.NodeID(node)
	fmt.Println(srv.DNSNames, srv.IPAddresses, id, err, node.URIs[0])
	_, err = d.IssueNode("ship-0042", "")
	fmt.Println(err != nil)
	// Output:
	// [localhost] [127.0.0.1] ship-0042 <nil> urn:shipsync:node:ship-0042
	// true
}
