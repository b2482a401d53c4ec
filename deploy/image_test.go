package deploy_test

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// instruction is one Dockerfile instruction: its keyword (upper case) and
// the rest, continuation lines joined.
type instruction struct {
	Cmd, Args string
	Line      int
}

// parseDockerfile reads path's instructions (comments and blank lines
// dropped, "\" continuations joined).
func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start})
		cur.Reset()
	}
	require.NoError(t, sc.Err())
	require.Zero(t, cur.Len(), "a continuation runs past the end")
	return out
}

// stages splits instructions at each FROM, keyed by the stage's name (AS).
func stages(ins []instruction) (names []string, by map[string][]instruction) {
	by = map[string][]instruction{}
	var name string
	for _, in := range ins {
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			name = f[0]
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				name = f[2]
			}
			names = append(names, name)
		}
		by[name] = append(by[name], in)
	}
	return names, by
}

// TestDockerfile: the image's last stage (what `docker build` produces
// without --target) is distroless static pinned by tag or digest, runs as
// a numeric non-root user, has relay as its ENTRYPOINT in exec form and
// copies only the binary and the state directory from the build stage;
// nothing in the file ADDs files or COPYs a key, certificate or secret.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	ins := parseDockerfile(t, "shipsync/Dockerfile")
	names, by := stages(ins)
	require.GreaterOrEqual(t, len(names), 2, "multi-stage")
	final := by[names[len(names)-1]]
	from := strings.Fields(final[0].Args)[0]
	require.Regexp(t, `^gcr\.io/distroless/static-debian\d+(:[\w.-]+|@sha256:[0-9a-f]{64})$`, from,
		"the runtime is distroless static, pinned")
	require.NotRegexp(t, `:latest$`, from)

	var user, entry string
	for _, in := range final {
		switch in.Cmd {
		case "USER":
			user = in.Args
		case "ENTRYPOINT":
			entry = in.Args
		case "RUN":
			t.Errorf("line %d: RUN in the runtime stage (distroless has no shell)", in.Line)
		case "COPY":
			require.Contains(t, in.Args, "--from=build", "line %d: the runtime copies only from the build stage", in.Line)
		}
	}
	require.Regexp(t, `^[1-9]\d*:[1-9]\d*$`, user, "a numeric non-root USER (Kubernetes' runAsNonRoot needs a number)")
	require.Equal(t, `["/usr/local/bin/relay"]`, entry)

	secretish := regexp.MustCompile(`(?i)(\.key|\.pem|\.crt|secret|password|token|id_rsa)`)
	for _, in := range ins {
		require.NotEqual(t, "ADD", in.Cmd, "line %d: ADD (use COPY; nothing is fetched or unpacked)", in.Line)
		if in.Cmd == "COPY" || in.Cmd == "ENV" || in.Cmd == "ARG" {
			require.False(t, secretish.MatchString(in.Args), "line %d: %s looks like it carries a secret: %s",
				in.Line, in.Cmd, in.Args)
		}
	}
	// The build is static: no cgo, so the binary runs on distroless static.
	var built bool
	for _, in := range by["build"] {
		if in.Cmd == "RUN" && strings.Contains(in.Args, "go build") {
			require.Contains(t, in.Args, "CGO_ENABLED=0")
			require.Contains(t, in.Args, "./cmd/relay")
			built = true
		}
	}
	require.True(t, built, "the build stage builds ./cmd/relay")
	_, err := os.Stat("../cmd/relay/main.go")
	require.NoError(t, err, "the package the image builds exists")

	ignore, err := os.ReadFile("shipsync/Dockerfile.dockerignore")
	require.NoError(t, err)
	require.Contains(t, string(ignore), "deploy/shipsync/secrets", "development secrets stay out of the build context")
}
