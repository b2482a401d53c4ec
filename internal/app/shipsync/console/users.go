package console

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/relayhq/relay/relayhttp"
)

// Roles, each allowed what the one before it is.
const (
	// RoleViewer reads.
	RoleViewer = "viewer"
	// RoleOperator also decides and cancels conflict cases.
	RoleOperator = "operator"
	// RoleAdmin also releases and rolls back rules and approves expiries.
	RoleAdmin = "admin"
)

// rank orders the roles.
var rank = map[string]int{RoleViewer: 1, RoleOperator: 2, RoleAdmin: 3}

// User is who a token belongs to.
type User struct {
	// Actor is the name audit entries record.
	Actor string
	// Role is RoleViewer, RoleOperator or RoleAdmin.
	Role string
}

// may reports whether u has role or a higher one.
func (u User) may(role string) bool { return rank[u.Role] >= rank[role] }

// Users maps tokens (by their SHA-256, so the map holds no token) to users.
type Users map[[sha256.Size]byte]User

// ParseUsers reads a users file: one user a line, "TOKEN ACTOR ROLE"
// separated by white space; blank lines and lines starting with # are
// skipped. A token is 16 to 1024 visible ASCII characters (relayhttp's
// rule), used once; an actor is 1 to 64 visible characters; ROLE is viewer,
// operator or admin. Errors name the line, never its token.
func ParseUsers(data []byte) (Users, error) {
	users := Users{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 8192)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("console: users line %d: want TOKEN ACTOR ROLE, found %d fields", n, len(f))
		}
		tok, err := relayhttp.ParseToken([]byte(f[0]))
		if err != nil {
			return nil, fmt.Errorf("console: users line %d: %w", n, err)
		}
		if len(f[1]) > 64 {
			return nil, fmt.Errorf("console: users line %d: the actor is longer than 64 bytes", n)
		}
		role := strings.ToLower(f[2])
		if rank[role] == 0 {
			return nil, fmt.Errorf("console: users line %d: role %q is not viewer, operator or admin", n, f[2])
		}
		sum := sha256.Sum256(tok)
		if _, dup := users[sum]; dup {
			return nil, fmt.Errorf("console: users line %d: the token is used on an earlier line", n)
		}
		users[sum] = User{Actor: f[1], Role: role}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("console: users: %w", err)
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("console: users: no user")
	}
	return users, nil
}

// lookup returns the user of the request's bearer token.
func (us Users) lookup(header string) (User, bool) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return User{}, false
	}
	u, ok := us[sha256.Sum256([]byte(strings.TrimSpace(tok)))]
	return u, ok
}
