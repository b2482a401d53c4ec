package cli

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/shipsync/shipbench"
)

// chainCPU is the CPU used so far by this process, by each PostgreSQL
// backend of a send chain (by pid, with its role), and by the Redis server.
type chainCPU struct {
	self     time.Duration
	backends map[int]roleCPU
	redis    time.Duration // -1: not known
}

type roleCPU struct {
	role string
	cpu  time.Duration
}

// sampleChainCPU reads the CPU so far of this process (/proc), of every
// PostgreSQL backend whose application_name is "<prefix>/<role>" (the
// chain's pools; /proc again, so only a server on this machine counts: a
// pid that is not a postgres process here is left out), and of the Redis
// server (INFO cpu: every client of that server counts).
func sampleChainCPU(ctx context.Context, pool *pgxpool.Pool, rdb *redis.Client, prefix string) (chainCPU, error) {
	s := chainCPU{self: shipbench.ProcessCPU(os.Getpid()), backends: map[int]roleCPU{}, redis: -1}
	rows, err := pool.Query(ctx, `SELECT pid, substr(application_name, length($1) + 2) FROM pg_stat_activity
		WHERE left(application_name, length($1) + 1) = $1 || '/'`, prefix)
	if err != nil {
		return s, fmt.Errorf("sms load: find the chain's backends: %w", err)
	}
	var pid int
	var role string
	if _, err := pgx.ForEachRow(rows, []any{&pid, &role}, func() error {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err == nil && strings.TrimSpace(string(comm)) == "postgres" {
			s.backends[pid] = roleCPU{role: role, cpu: shipbench.ProcessCPU(pid)}
		}
		return nil
	}); err != nil {
		return s, fmt.Errorf("sms load: find the chain's backends: %w", err)
	}
	if info, err := rdb.Info(ctx, "cpu").Result(); err == nil {
		s.redis = redisCPU(info)
	}
	return s, nil
}

// redisCPU is used_cpu_sys + used_cpu_user of an INFO cpu answer; -1 when
// either is missing.
func redisCPU(info string) time.Duration {
	var total float64
	seen := 0
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return -1
		}
		total += f
		seen++
	}
	if seen != 2 {
		return -1
	}
	return time.Duration(total * float64(time.Second))
}

// perMessage formats the CPU used from s0 to s per message (n messages):
// this process, the chain's backends by role (a backend absent from s0
// started in between and counts whole; one that ended in between is not
// counted), and Redis.
func (s chainCPU) perMessage(s0 chainCPU, n int) string {
	if n <= 0 {
		return "no messages"
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	byRole := map[string]time.Duration{}
	var pg time.Duration
	for pid, b := range s.backends {
		d := b.cpu - s0.backends[pid].cpu
		byRole[b.role] += d
		pg += d
	}
	roles := make([]string, 0, len(byRole))
	for r := range byRole {
		roles = append(roles, r)
	}
	slices.SortFunc(roles, func(a, b string) int { return cmp.Compare(byRole[b], byRole[a]) })
	parts := make([]string, len(roles))
	for i, r := range roles {
		parts[i] = fmt.Sprintf("%s %.0f", r, us(byRole[r]))
	}
	out := fmt.Sprintf("CPU µs per message: this process %.0f; PostgreSQL %.0f (%s)", us(s.self-s0.self), us(pg),
		strings.Join(parts, ", "))
	if s.redis >= 0 && s0.redis >= 0 {
		out += fmt.Sprintf("; Redis %.0f", us(s.redis-s0.redis))
	}
	return out
}
