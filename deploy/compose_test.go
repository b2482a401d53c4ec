package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert/yaml"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
)

// composeFile is the part of a compose file the checks read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
	Volumes map[string]any `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       map[string]any    `yaml:"build"`
	User        string            `yaml:"user"`
	ReadOnly    bool              `yaml:"read_only"`
	CapDrop     []string          `yaml:"cap_drop"`
	Environment map[string]string `yaml:"environment"`
	Secrets     []string          `yaml:"secrets"`
	Volumes     []string          `yaml:"volumes"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Restart string   `yaml:"restart"`
	Command []string `yaml:"command"`
}

// relayFileEnv are the NAME_FILE variables relay reads (internal/cli
// secretEnv).
var relayFileEnv = []string{"DATABASE_URL_FILE", "SHIPSYNC_TARGET_DSN_FILE", "SHIPSYNC_SHIP_DB_FILE", "CAPTURE_DB_FILE"}

// TestCompose: the development compose file parses; every dependency names
// a service, one waited for as healthy has a health check and one waited
// for as completed does not restart; every secret a service mounts is
// defined as a file that dev/secrets.sh makes; no environment value carries
// a credential (only *_FILE paths into /run/secrets of a secret the service
// mounts); named volumes are declared and bind-mounted files exist; the
// relay containers run as non-root on a read-only root with every
// capability dropped; the rules files load.
func TestCompose(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("shipsync/compose.yaml")
	require.NoError(t, err)
	var c composeFile
	require.NoError(t, yaml.Unmarshal(b, &c))
	require.NotEmpty(t, c.Services)
	script, err := os.ReadFile("shipsync/dev/secrets.sh")
	require.NoError(t, err)

	for name, sec := range c.Secrets {
		require.True(t, strings.HasPrefix(sec.File, "./secrets/"), "secret %s: a file under secrets/", name)
		require.Contains(t, string(script), "put "+filepath.Base(sec.File)+" ", "secret %s: dev/secrets.sh makes it", name)
	}
	credential := regexp.MustCompile(`(?i)(password|passwd|secret|token|dsn|database_url|_key$)`)
	for name, s := range c.Services {
		require.True(t, s.Image != "" || s.Build != nil, "%s: an image or a build", name)
		for dep, d := range s.DependsOn {
			other, ok := c.Services[dep]
			require.True(t, ok, "%s depends on %s, which is not a service", name, dep)
			switch d.Condition {
			case "service_healthy":
				require.NotNil(t, other.Healthcheck, "%s waits for %s to be healthy: it needs a health check", name, dep)
				require.NotEmpty(t, other.Healthcheck.Test)
			case "service_completed_successfully":
				require.Equal(t, "no", other.Restart, "%s waits for %s to complete: it must not restart", name, dep)
			default:
				t.Errorf("%s depends on %s with condition %q", name, dep, d.Condition)
			}
		}
		for _, sec := range s.Secrets {
			_, ok := c.Secrets[sec]
			require.True(t, ok, "%s mounts secret %s, which is not defined", name, sec)
		}
		for k, v := range s.Environment {
			if !credential.MatchString(k) {
				continue
			}
			require.True(t, strings.HasSuffix(k, "_FILE"), "%s: %s carries a credential in the environment", name, k)
			sec, ok := strings.CutPrefix(v, "/run/secrets/")
			require.True(t, ok, "%s: %s points into /run/secrets", name, k)
			require.Contains(t, s.Secrets, sec, "%s: %s names a secret the service mounts", name, k)
			if strings.HasPrefix(s.Image, "relay:") {
				require.Contains(t, relayFileEnv, k, "%s: relay reads %s", name, k)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				_, err := os.Stat(filepath.Join("shipsync", src))
				require.NoError(t, err, "%s: bind mount %s", name, src)
				continue
			}
			_, ok := c.Volumes[src]
			require.True(t, ok, "%s: volume %s is declared", name, src)
		}
		if s.Image == "relay:dev" {
			require.Equal(t, "65532:65532", s.User, name)
			require.True(t, s.ReadOnly, "%s: read-only root file system", name)
			require.Equal(t, []string{"ALL"}, s.CapDrop, name)
			require.Equal(t, "runtime", s.Build["target"], "%s: the distroless image", name)
		}
	}
	shore := c.Services["shore"]
	require.NotNil(t, shore.Healthcheck)
	require.Equal(t, []string{"CMD", "/usr/local/bin/relay", "shipsync", "probe"}, shore.Healthcheck.Test[:4],
		"the shore's health check runs relay itself (no shell in the image)")
	require.True(t, strings.HasSuffix(shore.Healthcheck.Test[4], "/readyz"))
	require.True(t, slices.ContainsFunc(shore.Command, func(a string) bool { return strings.HasPrefix(a, "--metrics-addr=") }),
		"the probe's listener is on")

	for _, f := range []string{"shipsync/dev/ship-rules.json", "shipsync/dev/shore-rules.json"} {
		r, err := os.Open(f)
		require.NoError(t, err)
		_, err = normalize.LoadRules(r)
		_ = r.Close()
		require.NoError(t, err, f)
	}
}
