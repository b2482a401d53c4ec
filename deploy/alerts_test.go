package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert/yaml"
	"github.com/stretchr/testify/require"
)

// TestAlertRules: the alerting rules parse, every rule has an expression,
// a severity and a summary, and every series they name is one the code
// exports (a renamed metric would otherwise leave an alert that never
// fires).
func TestAlertRules(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("shipsync", "prometheus", "alerts.yaml"))
	require.NoError(t, err)
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &file))
	require.NotEmpty(t, file.Groups)
	exported := exportedMetrics(t)
	series := regexp.MustCompile(`relay_[a-z_]+`)
	seen := map[string]bool{}
	for _, g := range file.Groups {
		require.NotEmpty(t, g.Name)
		for _, r := range g.Rules {
			require.Regexp(t, `^Shipsync[A-Za-z]+$`, r.Alert)
			require.False(t, seen[r.Alert], "alert %s twice", r.Alert)
			seen[r.Alert] = true
			require.NotEmpty(t, r.Expr, r.Alert)
			require.Contains(t, []string{"info", "warning", "critical"}, r.Labels["severity"], r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			require.Regexp(t, `^[0-9]+[smh]$`, r.For, r.Alert)
			names := series.FindAllString(r.Expr, -1)
			require.NotEmpty(t, names, r.Alert)
			for _, n := range names {
				require.True(t, exported[n], "%s: %s is not a metric the code exports", r.Alert, n)
			}
		}
	}
}

// exportedMetrics collects the relay_shipsync_* names written as string
// literals in the shipsync Go code (not tests).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	lit := regexp.MustCompile(`"(relay_shipsync_[a-z_]+)"`)
	root := filepath.Join("..", "internal", "app", "shipsync")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	require.NoError(t, err)
	require.True(t, out["relay_shipsync_connected_nodes"], "the walk found the shore's metrics")
	return out
}
