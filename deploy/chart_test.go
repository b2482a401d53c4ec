package deploy_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert/yaml"
	"github.com/stretchr/testify/require"
)

const chartDir = "helm/shipsync-shore"

// credentialKey and credentialValue recognise what would be a secret in
// values: a key named like one, or a connection string with a password.
var (
	credentialKey   = regexp.MustCompile(`(?i)(password|passwd|token|apikey|api_key|private|dsn|database_url)`)
	credentialValue = regexp.MustCompile(`(?i)(://[^/@\s]+:[^/@\s]+@|[^\s:/]+:[^\s@/]+@tcp\(|-----BEGIN)`)
)

// leaves calls f for every scalar of v with its dotted path.
func leaves(path string, v any, f func(path string, v any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			leaves(path+"."+k, e, f)
		}
	case []any:
		for i, e := range x {
			leaves(fmt.Sprintf("%s[%d]", path, i), e, f)
		}
	default:
		f(path, v)
	}
}

// TestChartValuesHoldNoSecret: values.yaml names Secrets, it never holds
// one: each entry of secrets has only an existingSecret name and a key, and
// no value anywhere is a credential or looks like a connection string with
// a password or a PEM block. The server runs at least three replicas.
func TestChartValuesHoldNoSecret(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(chartDir + "/values.yaml")
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, yaml.Unmarshal(b, &v))
	secrets, ok := v["secrets"].(map[string]any)
	require.True(t, ok, "values has a secrets section")
	require.NotEmpty(t, secrets)
	for name, s := range secrets {
		m, ok := s.(map[string]any)
		require.True(t, ok, "secrets.%s is a map", name)
		require.NotEmpty(t, m["existingSecret"], "secrets.%s names an existing Secret", name)
		for k := range m {
			require.Contains(t, []string{"existingSecret", "key"}, k, "secrets.%s.%s: only a reference", name, k)
		}
	}
	n := 0
	leaves("", v, func(path string, x any) {
		n++
		s, _ := x.(string)
		require.False(t, credentialKey.MatchString(path) && s != "", "%s: a credential in values", path)
		require.False(t, credentialValue.MatchString(s), "%s: looks like a credential", path)
	})
	require.Greater(t, n, 20, "the walk saw the values")
	server := v["server"].(map[string]any)
	require.GreaterOrEqual(t, server["replicas"], 3)
	auto := v["autoscaling"].(map[string]any)
	require.GreaterOrEqual(t, auto["minReplicas"], 3)
}
