package supervise

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// restartDelay is how long a dead role stays down before its next life.
const restartDelay = 150 * time.Millisecond

// Role keeps one role of a crash harness running as OS processes: a life
// after another until stopped, each life possibly armed with fault points
// (internal/faultpoint). Its methods are safe for concurrent use.
type Role struct {
	name   string
	points []string
	bin    string
	args   []string
	env    []string
	out    func(format string, a ...any)

	mu       sync.Mutex
	rng      *rand.Rand
	cur      *child
	arm      string // RELAY_FAULTPOINTS of the next life
	stopping bool
	// Counters, see RoleStats.
	lives, kills, armedLives int
	faults                   map[string]int
	ownExits                 []string
}

// RoleStats are what happened to one role's processes.
type RoleStats struct {
	// Lives counts the processes started; ArmedLives those started with
	// fault points armed.
	Lives, ArmedLives int
	// Kills counts the SIGKILLs the harness sent: at random moments (an
	// armed life among them when it had not died at a point yet), and to
	// an armed life still running when the chaos ends.
	Kills int
	// Faults counts the lives a fault point ended, per point.
	Faults map[string]int
	// OwnExits describes lives that ended on their own (neither killed nor
	// at a fault point): each is a problem.
	OwnExits []string
}

// FaultDeaths returns how many lives a fault point ended and, sorted,
// "point ×n" for each point.
func (s RoleStats) FaultDeaths() (int, []string) {
	n := 0
	var pts []string
	for p, c := range s.Faults {
		n += c
		pts = append(pts, fmt.Sprintf("%s ×%d", p, c))
	}
	slices.Sort(pts)
	return n, pts
}

// NewRole returns a role named name that runs bin with args and env added
// to the harness's environment; points are the fault points its lives pass
// (ArmSpec arms them), seed seeds its lives' fault draws, out reports what
// happens (a progress line per event).
func NewRole(name, bin string, args, env, points []string, seed uint64, out func(string, ...any)) *Role {
	return &Role{name: name, points: points, bin: bin, args: args, env: env, out: out,
		rng: rand.New(rand.NewPCG(seed, 0x7a1e)), faults: map[string]int{}}
}

// Points are the fault points the role's lives pass.
func (r *Role) Points() []string { return r.points }

// Start begins the next life (armed as planned).
func (r *Role) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := startChild(r.bin, r.args, r.env, r.arm, r.rng.Uint64())
	if err != nil {
		return err
	}
	if r.arm != "" {
		r.armedLives++
	}
	r.arm = ""
	r.cur = c
	r.lives++
	go r.watch(c)
	return nil
}

// watch waits for c to end, books how, and starts the next life unless
// the role is stopping or the harness killed c (then Kill restarts it).
func (r *Role) watch(c *child) {
	<-c.done
	r.mu.Lock()
	if r.stopping || r.cur != c {
		r.mu.Unlock()
		return
	}
	c.booked = true
	if p := c.faultPoint(); p != "" {
		r.faults[p]++
		r.mu.Unlock()
		r.out("  %-9s died at fault point %s after %s", r.name, p, time.Since(c.began).Round(time.Millisecond))
	} else {
		tail := c.out.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		r.ownExits = append(r.ownExits, fmt.Sprintf("%s exited on its own after %s: %v\n%s", r.name,
			time.Since(c.began).Round(time.Millisecond), c.err, strings.TrimSpace(tail)))
		r.mu.Unlock()
		r.out("  %-9s exited on its own: %v", r.name, c.err)
	}
	time.Sleep(restartDelay)
	r.mu.Lock()
	stopping := r.stopping || r.cur != c
	r.mu.Unlock()
	if !stopping {
		if err := r.Start(); err != nil {
			r.mu.Lock()
			r.ownExits = append(r.ownExits, fmt.Sprintf("%s: restart: %v", r.name, err))
			r.mu.Unlock()
		}
	}
}

// Kill ends the current life with SIGKILL and, after restartDelay, starts
// the next one, armed with faults ("" unarmed). It returns a description of
// the life it ended.
func (r *Role) Kill(faults string) (string, error) {
	r.mu.Lock()
	c := r.cur
	r.cur = nil // watch leaves the restart to us
	r.mu.Unlock()
	what := "down"
	if c != nil {
		was := ""
		if c.armed != "" {
			was = ", armed, no point reached"
		}
		c.kill()
		r.mu.Lock()
		switch p := c.faultPoint(); {
		case c.booked: // watch saw it die first
			was = ", had died already"
		case p != "":
			r.faults[p]++
			was = ", had died at " + p
		default:
			r.kills++
		}
		c.booked = true
		r.mu.Unlock()
		what = fmt.Sprintf("after %s%s", time.Since(c.began).Round(time.Millisecond), was)
	}
	time.Sleep(restartDelay)
	r.mu.Lock()
	r.arm = faults
	r.mu.Unlock()
	return what, r.Start()
}

// ArmSpec is the RELAY_FAULTPOINTS value arming every point of the role
// with probability p; "" when the role has none.
func (r *Role) ArmSpec(p float64) string {
	pts := r.points
	parts := make([]string, len(pts))
	for i, pt := range pts {
		parts[i] = fmt.Sprintf("%s=%g", pt, p)
	}
	return strings.Join(parts, ",")
}

// Armed reports whether the current life runs with fault points.
func (r *Role) Armed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur != nil && r.cur.armed != ""
}

// Uptime is how long the current life has run (0 when none runs). A life
// asked to Stop must have had time to set up its signal handling first.
func (r *Role) Uptime() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return 0
	}
	return time.Since(r.cur.began)
}

// Stop ends the current life with SIGTERM and requires a clean exit; no
// life follows.
func (r *Role) Stop(d time.Duration) error {
	r.mu.Lock()
	r.stopping = true
	c := r.cur
	r.mu.Unlock()
	if c == nil {
		return fmt.Errorf("%s: not running", r.name)
	}
	if err := c.stop(d); err != nil {
		tail := c.out.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("%s: did not stop cleanly: %w\n%s", r.name, err, tail)
	}
	return nil
}

// Abort kills the current life; no life follows.
func (r *Role) Abort() {
	r.mu.Lock()
	r.stopping = true
	c := r.cur
	r.mu.Unlock()
	if c != nil {
		c.kill()
	}
}

// Tail returns the last n bytes of the current life's output (stdout and
// stderr), "" when none runs: for a harness to show why a role is stuck.
func (r *Role) Tail(n int) string {
	r.mu.Lock()
	c := r.cur
	r.mu.Unlock()
	if c == nil {
		return ""
	}
	t := c.out.String()
	if len(t) > n {
		t = t[len(t)-n:]
	}
	return strings.TrimSpace(t)
}

// Stats returns the counters.
func (r *Role) Stats() RoleStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := make(map[string]int, len(r.faults))
	for k, v := range r.faults {
		f[k] = v
	}
	return RoleStats{Lives: r.lives, ArmedLives: r.armedLives, Kills: r.kills, Faults: f,
		OwnExits: append([]string(nil), r.ownExits...)}
}
