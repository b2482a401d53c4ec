package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGeneratedUpToDate regenerates every directory of the module that holds
// a .proto file and fails if a committed .pb.go differs: a .proto edited
// without `go generate` does not pass.
func TestGeneratedUpToDate(t *testing.T) {
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	var dirs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && filepath.Ext(path) == ".proto" && !slices.Contains(dirs, filepath.Dir(path)) {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, dirs, filepath.Join(root, "internal/app/shipsync/shipsyncpb"))
	for _, dir := range dirs {
		out, err := Generate(context.Background(), dir)
		require.NoError(t, err, dir)
		stale, err := Stale(dir, out)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, dir)
		require.Empty(t, stale, "%s: generated code is out of date; run go generate ./%s", rel, rel)
	}
}

// TestStaleNoticesAnEdit checks that the comparison is not vacuous: a
// .proto changed after generation makes its .pb.go stale.
func TestStaleNoticesAnEdit(t *testing.T) {
	dir := t.TempDir()
	src := "syntax = \"proto3\";\npackage x.v1;\noption go_package = \"example.com/x\";\nmessage A { string a = 1; }\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.proto"), []byte(src), 0o644))
	require.NoError(t, run(dir, false))
	require.NoError(t, run(dir, true))

	edited := src + "message B { int64 b = 1; }\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.proto"), []byte(edited), 0o644))
	out, err := Generate(context.Background(), dir)
	require.NoError(t, err)
	stale, err := Stale(dir, out)
	require.NoError(t, err)
	require.Equal(t, []string{"x.pb.go"}, stale)
	require.ErrorContains(t, run(dir, true), "out of date")

	require.NoError(t, os.Remove(filepath.Join(dir, "x.pb.go")))
	stale, err = Stale(dir, out)
	require.NoError(t, err)
	require.Equal(t, []string{"x.pb.go (missing)"}, stale)
}

func TestCompileErrorIsReported(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.proto"), []byte("syntax = \"proto3\"; message {"), 0o644))
	_, err := Generate(context.Background(), dir)
	require.ErrorContains(t, err, "compile")
}
