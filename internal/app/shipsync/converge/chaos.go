package converge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/supervise"
)

// ShorePoints are the fault points the shore process's lives are armed
// with, one in turn (seed 004 §23.3): the applier after the shore
// database committed an uplink write ("shore after MySQL commit"), the
// shore CDC consumer after storing commands, the arbiter with a case
// claimed and leased and no verdict ("arbiter mid-lease"), and after it
// wrote a decision to the shore database.
var ShorePoints = []string{faultpoint.ShipsyncApplyAfterTarget, faultpoint.ShipsyncShoreCDCAfterForward,
	faultpoint.ShipsyncArbiterAfterClaim, faultpoint.ShipsyncArbiterAfterShoreWrite}

// ClientPoints are the ship client's: its remote applier after the ship
// database committed a command's write ("ship applier mid-command"), and
// after the shore answered an ack batch ("client mid-ack").
var ClientPoints = []string{faultpoint.ShipsyncRemoteAfterWrite, faultpoint.ShipsyncClientAfterAcks}

// Defaults of Chaos (the kills': the CLI's).
const (
	ShoreKillsDefault       = 8
	ClientKillsDefault      = 6
	FaultProbabilityDefault = 0.3
	// LeaseDefault is the shore's arbiter lease in a chaos run: short, so
	// that a case claimed by a life that died is taken over within the
	// run.
	LeaseDefault = 2 * time.Second
)

// Chaos makes Run a crash harness.
type Chaos struct {
	// Binary is the relay executable the shore and the client run as.
	// Required.
	Binary string
	// ShoreKills and ClientKills are how many times each is killed with
	// SIGKILL while both sides edit (0: never; the CLI's defaults are
	// ShoreKillsDefault and ClientKillsDefault), one step every 300–900 ms
	// in an order fixed by the seed. Every other kill of a role arms its next
	// life with one of its points (ShorePoints, ClientPoints) in turn at
	// FaultProbability (default FaultProbabilityDefault).
	ShoreKills, ClientKills int
	FaultProbability        float64
	// Lease is the shore's arbiter lease (default LeaseDefault).
	Lease time.Duration
}

func (c *Chaos) defaults() error {
	if c.Binary == "" {
		return errors.New("converge: Chaos.Binary is required")
	}
	c.FaultProbability = cmp.Or(c.FaultProbability, FaultProbabilityDefault)
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	if c.ShoreKills < 0 || c.ClientKills < 0 || c.FaultProbability < 0 || c.FaultProbability > 1 || c.Lease < 0 {
		return errors.New("converge: Chaos: kills ≥ 0, FaultProbability in [0, 1], Lease ≥ 0")
	}
	return nil
}

// armedWait is how long the plan waits for an armed life to die at its
// point before the next step.
const armedWait = 8 * time.Second

// processes are the roles of a chaos run.
type processes struct {
	shore, client *supervise.Role
	shoreAddr     string
}

// startProcesses registers the node and the rules, then starts the shore
// (data API, applier, shore CDC consumer, arbiter) and the ship client
// (with its remote applier) as relay processes, the client reaching the
// shore through the link.
func (r *run) startProcesses(ctx context.Context, cleanup *[]func()) error {
	c := r.o.Chaos
	rng := rand.New(rand.NewPCG(r.o.Seed, 0xc4a0))
	pkiDir := filepath.Join(r.o.Dir, "pki")
	pg, err := shipdemo.SetupShore(ctx, shipdemo.ShoreOptions{PostgresURL: r.o.PostgresURL, PKIDir: pkiDir,
		Node: shipdemo.Node, Rules: shoreRules()})
	if err != nil {
		return err
	}
	*cleanup = append(*cleanup, func() { _ = pg.Close() })
	r.pool = pg.Pool()
	shoreRulesFile, err := rulesFile(r.o.Dir, "shore-rules.json", shipdemo.ShoreSideRules(r.shoreName, normalize.DirectionBoth))
	if err != nil {
		return err
	}
	shipRulesFile, err := rulesFile(r.o.Dir, "ship-rules.json", shipRules(r.shipName))
	if err != nil {
		return err
	}
	p := &processes{}
	if p.shoreAddr, err = supervise.FreeAddr(); err != nil {
		return err
	}
	brokers := strings.Join(r.brokers, ",")
	p.shore = supervise.NewRole("shore", c.Binary, []string{"shipsync", "shore", "--postgres", r.o.PostgresURL,
		"--target", r.shoreDSN, "--addr", p.shoreAddr,
		"--tls-cert", filepath.Join(pkiDir, pki.ServerCertFile), "--tls-key", filepath.Join(pkiDir, pki.ServerKeyFile),
		"--client-ca", filepath.Join(pkiDir, pki.CACertFile), "--instance-id", "converge-shore",
		"--node-rate", "1000", "--node-concurrency", "12",
		"--cdc-brokers", brokers, "--cdc-rules", shoreRulesFile, "--cdc-group", shoreCDCGroup,
		"--cdc-group-instance-id", "converge-shore", "--node-id", ShoreNode,
		"--arbiter", "--arbiter-every", "100ms", "--arbiter-lease", c.Lease.String(), "--log-level", "warn"},
		nil, ShorePoints, rng.Uint64(), r.out)
	if err := p.shore.Start(); err != nil {
		return err
	}
	*cleanup = append(*cleanup, p.shore.Abort)
	// The client's first heartbeat goes at its start: the shore serves by
	// then.
	for !supervise.Serving(p.shoreAddr) {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	link, err := r.startLink(ctx, p.shoreAddr, cleanup)
	if err != nil {
		return err
	}
	cert, key := pki.NodeFiles("node-" + shipdemo.Node)
	p.client = supervise.NewRole("client", c.Binary, []string{"shipsync", "client", "--brokers", brokers,
		"--logical", shipdemo.Logical, "--rules", shipRulesFile, "--state", filepath.Join(r.o.Dir, "client.db"),
		"--url", "https://" + link, "--ca", filepath.Join(pkiDir, pki.CACertFile), "--cert", filepath.Join(pkiDir, cert),
		"--key", filepath.Join(pkiDir, key), "--group", clientGroup, "--group-instance-id", "converge-client",
		"--receipt-every", "200ms", "--command-poll", "200ms", "--backoff-cap", "1s",
		"--ship-db", r.shipDSN, "--shore-node-id", ShoreNode, "--progress-every", "0", "--log-level", "warn"},
		nil, ClientPoints, rng.Uint64(), r.out)
	if err := p.client.Start(); err != nil {
		return err
	}
	*cleanup = append(*cleanup, p.client.Abort)
	r.chaos = p
	return nil
}

// rulesFile writes rules as a rules file in dir and returns its path.
func rulesFile(dir, name string, rules []normalize.Rule) (string, error) {
	b, err := json.Marshal(struct {
		Rules []normalize.Rule `json:"rules"`
	}{rules})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, b, 0o600)
}

// killPlan kills the shore and the client, in an order fixed by the seed,
// one step every 300–900 ms; every other kill of a role arms its next life
// with one of its points in turn, and waits up to armedWait for it to die
// there.
// An armed life still running at the end is killed: the last lives run
// clean.
func (r *run) killPlan(ctx context.Context) error {
	c, p := r.o.Chaos, r.chaos
	rng := rand.New(rand.NewPCG(r.o.Seed, 0x9a17))
	var plan []*supervise.Role
	for range c.ShoreKills {
		plan = append(plan, p.shore)
	}
	for range c.ClientKills {
		plan = append(plan, p.client)
	}
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	kills := map[*supervise.Role]int{}
	for i, role := range plan {
		if err := sleep(ctx, time.Duration(300+rng.IntN(600))*time.Millisecond); err != nil {
			return err
		}
		arm, pts := "", role.Points()
		if n := kills[role]; n%2 == 0 {
			arm = fmt.Sprintf("%s=%g", pts[n/2%len(pts)], c.FaultProbability)
		}
		kills[role]++
		what, err := role.Kill(arm)
		if err != nil {
			return err
		}
		name := "shore"
		if role == p.client {
			name = "client"
		}
		next := "unarmed"
		if arm != "" {
			next = "armed " + arm
		}
		r.out("  step %2d: %s killed %s; next life %s; ship %d, shore %d rows changed", i+1, name, what, next,
			r.shipN.Load(), r.shoreN.Load())
		if arm != "" {
			// Most points are passed many times a second; the arbiter's
			// shore write only when a node's version wins, a few times in
			// a run: give the life time to get there.
			supervise.WaitFault(ctx, role, armedWait)
		}
	}
	for _, role := range []*supervise.Role{p.shore, p.client} {
		if role.Armed() {
			if _, err := role.Kill(""); err != nil {
				return err
			}
		}
	}
	r.out("chaos over: the last lives run clean")
	return nil
}

// ready reports whether both processes run and can be asked to stop
// cleanly (their last lives set up their signal handling).
func (p *processes) ready() bool {
	return p.shore.Uptime() > time.Second && p.client.Uptime() > time.Second && supervise.Serving(p.shoreAddr)
}

// stopProcesses stops both processes with SIGTERM (each must exit
// cleanly) and books what happened to them.
func (r *run) stopProcesses(res *Result) {
	p := r.chaos
	for _, role := range []*supervise.Role{p.client, p.shore} {
		if err := role.Stop(30 * time.Second); err != nil {
			res.Problems = append(res.Problems, err.Error())
		}
	}
	res.Shore, res.Client = p.shore.Stats(), p.client.Stats()
	for _, e := range append(res.Shore.OwnExits, res.Client.OwnExits...) {
		res.Problems = append(res.Problems, "a process exited on its own: "+e)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("converge: %w", ctx.Err())
	case <-time.After(d):
		return nil
	}
}
