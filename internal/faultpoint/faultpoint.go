// Package faultpoint lets the crash harness kill a real relay process at named
// places inside the engine — after a commit before the acknowledgement, after
// the sink confirmed before SENT is written, in the middle of a batch — so
// recovery is proven at exactly the instructions where it is hardest, not only
// at random moments.
//
// Fault points are off unless the environment variable RELAY_FAULTPOINTS is
// set when the process starts, e.g.
//
//	RELAY_FAULTPOINTS="fifo.after-commit=0.02,dispatch.after-confirm=0.05"
//
// Each name maps to the probability that passing the point kills the process
// with SIGKILL (no deferred function, no flush: a crash). RELAY_FAULTSEED
// fixes the random sequence. When the variable is unset, Hit is one atomic
// load and a nil check.
package faultpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Names of the fault points the engine passes.
const (
	// FIFOAfterCommit: a FIFO transaction (business writes + terminal state +
	// acknowledgement intent) committed; nothing after it has run.
	FIFOAfterCommit = "fifo.after-commit"
	// FIFOMidBatch: inside a FIFO batch transaction, between two messages.
	FIFOMidBatch = "fifo.mid-batch"
	// DispatchAfterConfirm: the sink confirmed a batch; SENT is not written yet.
	DispatchAfterConfirm = "dispatch.after-confirm"
	// AckAfterWrite: the source mark was written; AckAt is not recorded yet.
	AckAfterWrite = "ack.after-write"

	// The sms gateway's points, one after each durable step of a command.

	// GatewayAfterClaim: the submit ids are claimed in PostgreSQL; nothing
	// is submitted yet.
	GatewayAfterClaim = "sms.gateway.after-claim"
	// GatewayAfterSubmit: the Submits' outcomes are known; nothing is
	// settled yet.
	GatewayAfterSubmit = "sms.gateway.after-submit"
	// GatewayAfterSettle: the outcomes are settled in PostgreSQL; no result
	// is written yet.
	GatewayAfterSettle = "sms.gateway.after-settle"
	// GatewayAfterResult: the results are in the result stream; the
	// commands are not acked yet.
	GatewayAfterResult = "sms.gateway.after-result"

	// The sms admission stage's points, inside its batch transaction.

	// AdmitBeforeFreeze: the attempts, submits and decisions are written;
	// no freeze is posted, no limit counter written, nothing committed.
	AdmitBeforeFreeze = "sms.admit.before-freeze"
	// AdmitAfterFreeze: the freezes and the limit counts are written (the
	// account and counter rows are locked); the gateway commands are not
	// queued and nothing is committed.
	AdmitAfterFreeze = "sms.admit.after-freeze"

	// The sms completion's points, inside its batch transaction, and the
	// intake's.

	// SmsCompleteAfterLock: the batch's work rows are locked (fenced);
	// nothing is written.
	SmsCompleteAfterLock = "sms.complete.after-lock"
	// SmsCompleteBeforeCommit: every write of the batch is done (decisions,
	// retries, settlements, notifications, the work records); not committed.
	SmsCompleteBeforeCommit = "sms.complete.before-commit"
	// SmsIntakeAfterCommit: a batch of facts is committed; its stream
	// entries are not acked.
	SmsIntakeAfterCommit = "sms.intake.after-commit"

	// The shipsync shore's points: ingress, and each step of the target
	// apply workflow (seed 004 §10.3).

	// ShipsyncIngressAfterCommit: an upload batch is committed; no answer
	// has been sent.
	ShipsyncIngressAfterCommit = "shipsync.ingress.after-commit"
	// ShipsyncApplyAfterLock: the batch's record heads are locked and the
	// decisions made; nothing is written anywhere.
	ShipsyncApplyAfterLock = "shipsync.apply.after-lock"
	// ShipsyncApplyAfterTarget: the target database committed the writes;
	// TARGET_COMMITTED is not recorded.
	ShipsyncApplyAfterTarget = "shipsync.apply.after-target-commit"
	// ShipsyncApplyAfterRecorded: TARGET_COMMITTED is recorded; nothing is
	// finalized.
	ShipsyncApplyAfterRecorded = "shipsync.apply.after-target-recorded"
	// ShipsyncApplyBeforeCommit: heads, receipts, conflicts and jobs are
	// written in the engine transaction; not committed.
	ShipsyncApplyBeforeCommit = "shipsync.apply.before-commit"
	// ShipsyncClientAfterRead: the ship client stored the events of a poll
	// and the read positions; nothing is uploaded yet.
	ShipsyncClientAfterRead = "shipsync.client.after-read"
	// ShipsyncClientAfterUpload: the shore answered a batch; the answer is
	// not stored yet (mid-upload, from the client's side).
	ShipsyncClientAfterUpload = "shipsync.client.after-upload"
	// ShipsyncClientAfterReceipts: a page of receipts is pulled; neither
	// the results nor the cursor are stored yet (mid-receipt).
	ShipsyncClientAfterReceipts = "shipsync.client.after-receipts"
	// ShipsyncClientBeforeOffsetCommit: the terminal checkpoint is stored;
	// the consumer group is not committed yet (mid-commit).
	ShipsyncClientBeforeOffsetCommit = "shipsync.client.before-offset-commit"
	// ShipsyncShoreCDCAfterForward: the shore CDC consumer stored a poll's
	// commands; its consumer group position is not committed yet.
	ShipsyncShoreCDCAfterForward = "shipsync.shorecdc.after-forward"
	// ShipsyncArbiterAfterClaim: the arbiter claimed a case and holds its
	// lease; no verdict is stored (seed 004 §23.3, "arbiter mid-lease": a
	// restarted arbiter takes the case over once the lease runs out).
	ShipsyncArbiterAfterClaim = "shipsync.arbiter.after-claim"
	// ShipsyncArbiterAfterShoreWrite: the arbiter wrote a decision to the
	// shore database; the case is not marked dispatched yet.
	ShipsyncArbiterAfterShoreWrite = "shipsync.arbiter.after-shore-write"
	// ShipsyncRemoteAfterWrite: the ship's database committed a downlink
	// command's write (and its ledger row); the result is not recorded in
	// the client's state ("ship applier mid-command": the command is
	// applied again after a restart and answered from the ledger).
	ShipsyncRemoteAfterWrite = "shipsync.remote.after-write"
	// ShipsyncClientAfterAcks: the shore answered a batch of command acks;
	// the client has not marked them answered ("client mid-ack": they are
	// sent again, and the shore keeps the first result).
	ShipsyncClientAfterAcks = "shipsync.client.after-acks"
	// ShipsyncSnapshotAfterPin: a snapshot task's start position is
	// stored; nothing is read.
	ShipsyncSnapshotAfterPin = "shipsync.snapshot.after-pin"
	// ShipsyncSnapshotAfterChunk: a chunk's events and the task's cursor
	// are stored; nothing of the chunk is sent.
	ShipsyncSnapshotAfterChunk = "shipsync.snapshot.after-chunk"
	// ShipsyncSnapshotAfterUpload: the shore answered a chunk's upload;
	// the answer is not recorded (the chunk is sent again).
	ShipsyncSnapshotAfterUpload = "shipsync.snapshot.after-upload"
)

var (
	once   sync.Once
	points map[string]float64
	mu     sync.Mutex
	rng    *rand.Rand
)

func load() {
	spec := os.Getenv("RELAY_FAULTPOINTS")
	if spec == "" {
		return
	}
	points = map[string]float64{}
	for _, part := range strings.Split(spec, ",") {
		name, p, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		prob, err := strconv.ParseFloat(p, 64)
		if err != nil || prob < 0 || prob > 1 {
			fmt.Fprintf(os.Stderr, "faultpoint: ignoring %q: probability must be in [0,1]\n", part)
			continue
		}
		points[name] = prob
	}
	seed, _ := strconv.ParseUint(os.Getenv("RELAY_FAULTSEED"), 10, 64)
	rng = rand.New(rand.NewPCG(seed, uint64(os.Getpid())))
}

// Hit passes the named fault point: with the configured probability it kills
// the process at once with SIGKILL. Without RELAY_FAULTPOINTS it does nothing.
func Hit(name string) {
	once.Do(load)
	if points == nil {
		return
	}
	p, ok := points[name]
	if !ok || p == 0 {
		return
	}
	mu.Lock()
	fire := rng.Float64() < p
	mu.Unlock()
	if fire {
		fmt.Fprintf(os.Stderr, "faultpoint: %s: SIGKILL\n", name)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never returns: the signal ends the process
	}
}

// killedLine is the line Hit writes before it kills the process.
var killedLine = regexp.MustCompile(`(?m)^faultpoint: (\S+): SIGKILL$`)

// KilledBySIGKILL reports whether an ended child process (its ProcessState;
// nil: not ended) died of SIGKILL — a fault point's death or a harness's
// kill.
func KilledBySIGKILL(ps *os.ProcessState) bool {
	if ps == nil {
		return false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// KilledAt returns the fault point that killed a child process, read from
// the end of its standard error (what Hit writes before the SIGKILL), or ""
// when it did not die at one.
func KilledAt(ps *os.ProcessState, stderr string) string {
	if !KilledBySIGKILL(ps) {
		return ""
	}
	m := killedLine.FindStringSubmatch(stderr)
	if m == nil {
		return ""
	}
	return m[1]
}

// Tail keeps the last bytes written to it — a child process's standard
// error, whose last line is the one Hit writes before it kills the process
// (KilledAt reads it). Safe for concurrent use.
type Tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// NewTail returns a Tail keeping the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String returns what is kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
