package deploy_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeRelay writes an executable standing in for the relay binary of
// version v: it prints v, or fails when broken (a build that does not run on
// the ship).
func fakeRelay(t *testing.T, dir, v string, broken bool) string {
	t.Helper()
	p := filepath.Join(dir, "relay-"+v)
	body := "#!/bin/sh\necho relay " + v + "\n"
	if broken {
		body = "#!/bin/sh\necho 'relay: cannot execute' >&2\nexit 1\n"
	}
	require.NoError(t, os.WriteFile(p, []byte(body), 0o755))
	return p
}

// script runs a bash script with args and env, returning its exit code and
// output.
func script(t *testing.T, env []string, path string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{path}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	}
	require.NoError(t, err, out.String())
	return 0, out.String()
}

// link reads a symlink of prefix ("" when absent).
func link(t *testing.T, prefix, name string) string {
	t.Helper()
	s, err := os.Readlink(filepath.Join(prefix, name))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return s
}

// running is what the current binary says.
func running(t *testing.T, prefix string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(prefix, "current", "bin", "relay")).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// TestOfflinePackage: packages of three versions are laid out with their
// checksums; installing the first, then the second, switches current and
// keeps the previous; an altered package is refused with nothing changed;
// a version that fails its health check is switched back automatically;
// rollback.sh returns to the previous version; the operator's config and
// the state are never touched.
func TestOfflinePackage(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	dist, prefix := filepath.Join(tmp, "dist"), filepath.Join(tmp, "opt")
	pkg := func(v string, broken bool) string {
		code, out := script(t, []string{"BINARY=" + fakeRelay(t, tmp, v, broken), "GOOS=linux", "GOARCH=amd64"},
			"shipsync/package/package.sh", v, dist)
		require.Zero(t, code, out)
		dir := filepath.Join(dist, "shipsync-client-"+v+"-linux-amd64")
		for _, f := range []string{"VERSION", "bin/relay", "install.sh", "rollback.sh", "SHA256SUMS", "config/rules.example.json"} {
			_, err := os.Stat(filepath.Join(dir, f))
			require.NoError(t, err, f)
		}
		_, err := os.Stat(dir + ".tar.gz")
		require.NoError(t, err)
		return dir
	}
	v1, v2, v3 := pkg("1.0.0", false), pkg("1.1.0", false), pkg("1.2.0", true)
	code, out := script(t, []string{"BINARY=/bin/true"}, "shipsync/package/package.sh", "1.0.0", dist)
	require.Equal(t, 2, code, "a released package is never rebuilt in place: %s", out)
	sums, err := os.ReadFile(filepath.Join(v1, "SHA256SUMS"))
	require.NoError(t, err)
	require.Contains(t, string(sums), "  bin/relay\n")
	tarList, err := exec.Command("tar", "-tzf", v1+".tar.gz").Output()
	require.NoError(t, err)
	require.Contains(t, string(tarList), "shipsync-client-1.0.0-linux-amd64/SHA256SUMS")

	install := func(dir string, args ...string) (int, string) {
		return script(t, nil, filepath.Join(dir, "install.sh"), append([]string{"--prefix", prefix}, args...)...)
	}
	code, out = install(v1)
	require.Zero(t, code, out)
	require.Equal(t, "releases/1.0.0", link(t, prefix, "current"))
	require.Equal(t, "relay 1.0.0", running(t, prefix))
	// The operator configures the node and the client keeps state.
	cfg := filepath.Join(prefix, "etc", "rules.example.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"rules": []}`), 0o644))
	state := filepath.Join(prefix, "data", "client.db")
	require.NoError(t, os.WriteFile(state, []byte("state"), 0o600))

	code, out = install(v2)
	require.Zero(t, code, out)
	require.Equal(t, "releases/1.1.0", link(t, prefix, "current"))
	require.Equal(t, "releases/1.0.0", link(t, prefix, "previous"))
	require.Equal(t, "relay 1.1.0", running(t, prefix))

	// An altered package: refused, nothing changed.
	altered := filepath.Join(tmp, "altered")
	require.NoError(t, exec.Command("cp", "-a", v3, altered).Run())
	require.NoError(t, os.WriteFile(filepath.Join(altered, "bin", "relay"), []byte("#!/bin/sh\necho evil\n"), 0o755))
	code, out = install(altered)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "checksum mismatch")
	require.Equal(t, "releases/1.1.0", link(t, prefix, "current"))
	// A file slipped in beside the listed ones is refused too.
	require.NoError(t, exec.Command("cp", "-a", v2, altered+"-extra").Run())
	require.NoError(t, os.WriteFile(filepath.Join(altered+"-extra", "config", "extra.sh"), []byte("x"), 0o644))
	code, out = install(altered + "-extra")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "not in SHA256SUMS")

	// A version that fails its health check is switched back.
	code, out = install(v3, "--health-timeout", "1")
	require.Equal(t, 3, code, out)
	require.Contains(t, out, "switching back to 1.1.0")
	require.Equal(t, "releases/1.1.0", link(t, prefix, "current"))
	require.Equal(t, "releases/1.0.0", link(t, prefix, "previous"), "the previous version is as before")
	require.Equal(t, "relay 1.1.0", running(t, prefix))

	code, out = script(t, nil, filepath.Join(prefix, "current", "rollback.sh"), "--prefix", prefix)
	require.Zero(t, code, out)
	require.Equal(t, "releases/1.0.0", link(t, prefix, "current"))
	require.Equal(t, "releases/1.1.0", link(t, prefix, "previous"))
	require.Equal(t, "relay 1.0.0", running(t, prefix))

	got, err := os.ReadFile(cfg)
	require.NoError(t, err)
	require.Equal(t, `{"rules": []}`, string(got), "the operator's config is never overwritten")
	got, err = os.ReadFile(state)
	require.NoError(t, err)
	require.Equal(t, "state", string(got), "the state is never touched")
	entries, err := os.ReadDir(filepath.Join(prefix, "releases"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"1.0.0", "1.1.0", "1.2.0"}, names,
		"a failed install leaves its files until the next good install prunes them")

	// Installing again prunes every release but the current and the previous.
	code, out = install(v2)
	require.Zero(t, code, out)
	entries, err = os.ReadDir(filepath.Join(prefix, "releases"))
	require.NoError(t, err)
	names = names[:0]
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"1.0.0", "1.1.0"}, names)
	require.Equal(t, "relay 1.1.0", running(t, prefix))
}
