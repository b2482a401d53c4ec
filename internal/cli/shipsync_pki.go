package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncPKI runs `relay shipsync pki init|server|node`.
func runShipsyncPKI(_ context.Context, env *Env, args []string) error {
	const synopsis = "shipsync pki init|server|node [--dir DIR] [--hosts localhost,127.0.0.1] [--node ID] [--name FILE]"
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(env.Stdout, "usage: relay %s\n\n  init    make a CA (ca.crt, ca.key) in a new directory of mode 0700\n"+
			"  server  the shore's server certificate (server.crt, server.key) for --hosts\n"+
			"  node    a node certificate (node-ID.crt/.key, or --name) for --node ID\n", synopsis)
		return nil
	}
	sub := args[0]
	fs := newFlags(env, "shipsync pki "+sub, synopsis)
	dir := fs.String("dir", "shipsync-pki", "the PKI directory (mode 0700; keys mode 0600)")
	hosts := fs.String("hosts", "localhost,127.0.0.1", "server: comma-separated DNS names and IP addresses of the shore")
	node := fs.String("node", "", "node: the node id the certificate names (CN and URI SAN "+pki.NodeURIPrefix+"ID)")
	name := fs.String("name", "", "node: file name without extension (default node-ID; a rotation needs a new one)")
	validity := fs.Duration("validity", pki.CertValidityDefault, "server, node: how long the certificate is valid")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync pki: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	d := pki.Dir{Path: *dir, Clock: relayclock.System{}, Validity: *validity}
	switch sub {
	case "init":
		if _, err := d.InitCA(); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shipsync pki: CA written to %s\n", filepath.Join(*dir, pki.CACertFile))
	case "server":
		c, err := d.IssueServer(splitList(*hosts))
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shipsync pki: server certificate %s (DNS %v, IP %v), valid until %s\n",
			filepath.Join(*dir, pki.ServerCertFile), c.DNSNames, c.IPAddresses, c.NotAfter.Format("2006-01-02"))
	case "node":
		if *node == "" {
			return fmt.Errorf("shipsync pki node: --node is required")
		}
		c, err := d.IssueNode(*node, *name)
		if err != nil {
			return err
		}
		n := *name
		if n == "" {
			n = "node-" + *node
		}
		cf, _ := pki.NodeFiles(n)
		fmt.Fprintf(env.Stdout, "shipsync pki: node %s certificate %s fingerprint %s, valid until %s\n",
			*node, filepath.Join(*dir, cf), pki.Fingerprint(c), c.NotAfter.Format("2006-01-02"))
	default:
		return fmt.Errorf("shipsync pki: unknown action %q (init, server or node)", sub)
	}
	return nil
}
