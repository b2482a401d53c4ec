//go:build deploycheck

package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert/yaml"
	"github.com/stretchr/testify/require"
)

// TestChartRendered checks the chart as `helm template` renders it with its
// default values (make deploy-check renders it and sets
// SHIPSYNC_RENDERED_CHART; this file builds only with -tags deploycheck):
// the server Deployment and its HPA keep at least three replicas, a PDB and
// an HPA select it, every pod runs non-root on a read-only root with all
// capabilities dropped, with resources, liveness and readiness probes (the
// server's readiness on /readyz) and a termination grace, the server and the
// console spread by anti-affinity, and no environment variable carries a
// literal credential.
func TestChartRendered(t *testing.T) {
	b, kinds := rendered(t, "SHIPSYNC_RENDERED_CHART")
	require.Len(t, kinds["Deployment"], 3, "server, cdc, console")
	get := func(m any, keys ...string) any {
		for _, k := range keys {
			mm, ok := m.(map[string]any)
			if !ok {
				return nil
			}
			m = mm[k]
		}
		return m
	}
	for _, d := range kinds["Deployment"] {
		name := get(d, "metadata", "name").(string)
		pod := get(d, "spec", "template", "spec")
		require.Equal(t, true, get(pod, "securityContext", "runAsNonRoot"), name)
		require.NotNil(t, get(pod, "terminationGracePeriodSeconds"), name)
		require.Equal(t, false, get(pod, "automountServiceAccountToken"), name)
		for _, c := range get(pod, "containers").([]any) {
			require.Equal(t, true, get(c, "securityContext", "readOnlyRootFilesystem"), name)
			require.Equal(t, false, get(c, "securityContext", "allowPrivilegeEscalation"), name)
			require.Equal(t, []any{"ALL"}, get(c, "securityContext", "capabilities", "drop"), name)
			require.NotNil(t, get(c, "resources", "requests"), name)
			require.NotNil(t, get(c, "resources", "limits"), name)
			require.NotNil(t, get(c, "livenessProbe"), name)
			require.NotNil(t, get(c, "readinessProbe"), name)
			for _, e := range get(c, "env").([]any) {
				n := get(e, "name").(string)
				if v, ok := get(e, "value").(string); ok && credentialKey.MatchString(n) {
					require.True(t, strings.HasSuffix(n, "_FILE") && strings.HasPrefix(v, "/run/secrets/"),
						"%s: %s carries a literal credential", name, n)
				}
			}
		}
		if strings.HasSuffix(name, "-server") {
			c := get(pod, "containers").([]any)[0]
			require.Equal(t, "/readyz", get(c, "readinessProbe", "httpGet", "path"))
			require.NotNil(t, get(c, "startupProbe"))
			require.NotNil(t, get(pod, "affinity", "podAntiAffinity"))
			require.NotNil(t, get(c, "lifecycle", "preStop"))
		}
		if strings.HasSuffix(name, "-console") {
			require.NotNil(t, get(pod, "affinity", "podAntiAffinity"))
		}
	}
	require.Len(t, kinds["HorizontalPodAutoscaler"], 1)
	hpa := kinds["HorizontalPodAutoscaler"][0]
	require.GreaterOrEqual(t, get(hpa, "spec", "minReplicas"), 3)
	require.True(t, strings.HasSuffix(get(hpa, "spec", "scaleTargetRef", "name").(string), "-server"))
	var serverPDB bool
	for _, p := range kinds["PodDisruptionBudget"] {
		if get(p, "spec", "selector", "matchLabels", "app.kubernetes.io/component") == "server" {
			serverPDB = true
		}
	}
	require.True(t, serverPDB, "a PDB selects the server")
	require.Empty(t, kinds["Secret"], "the chart makes no Secret: it references existing ones")
	require.False(t, bytes.Contains(b, []byte("-----BEGIN")), "no PEM in the manifests")
}

// rendered reads the manifests the file named by env var holds, by kind.
func rendered(t *testing.T, env string) ([]byte, map[string][]map[string]any) {
	t.Helper()
	path := os.Getenv(env)
	require.NotEmpty(t, path, "%s names the output of helm template (make deploy-check)", env)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	kinds := map[string][]map[string]any{}
	for _, part := range strings.Split(string(b), "\n---") {
		var d map[string]any
		if err := yaml.Unmarshal([]byte(part), &d); err != nil && !errors.Is(err, io.EOF) {
			require.NoError(t, err)
		}
		if d != nil {
			kinds[d["kind"].(string)] = append(kinds[d["kind"].(string)], d)
		}
	}
	return b, kinds
}

// TestChartRenderedFull: with every optional part on (ci/full-values.yaml)
// the manifests parse, the Ingress is there with its TLS Secret by name,
// the image is pinned by digest and the HPA scales on all three metrics.
func TestChartRenderedFull(t *testing.T) {
	b, kinds := rendered(t, "SHIPSYNC_RENDERED_FULL")
	require.Len(t, kinds["Ingress"], 1)
	require.Contains(t, string(b), "secretName: shipsync-console-tls")
	require.Contains(t, string(b), "@sha256:")
	metrics := kinds["HorizontalPodAutoscaler"][0]["spec"].(map[string]any)["metrics"].([]any)
	require.Len(t, metrics, 3)
	require.Contains(t, string(b), "requiredDuringSchedulingIgnoredDuringExecution")
}
