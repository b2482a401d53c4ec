// Command protogen compiles the module's .proto files to Go without a system
// protoc: github.com/bufbuild/protocompile parses and links the .proto
// files in pure Go, and protoc-gen-go's own generator
// (google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo, run through
// google.golang.org/protobuf/compiler/protogen) writes the .pb.go files, so
// the output is what `protoc --go_out=paths=source_relative` would write with
// the protoc-gen-go of the module's google.golang.org/protobuf version.
//
// Usage (from a package directory, as its go:generate directive does):
//
//	go run github.com/relayhq/relay/internal/tools/protogen [-check] [-dir DIR]
//
// Every *.proto in DIR (default ".") is compiled, with DIR as the import root
// and the well-known types (google/protobuf/*.proto) available; each x.proto
// gives x.pb.go beside it. With -check nothing is written: protogen exits 1
// naming every .pb.go that differs from what it would generate. The test in
// this directory runs the same check on every .proto of the module, so a
// .proto edited without regenerating fails `go test ./...`.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	dir := flag.String("dir", ".", "directory whose *.proto files are compiled; also the import root")
	check := flag.Bool("check", false, "write nothing; exit 1 if a .pb.go differs from what would be generated")
	flag.Parse()
	if err := run(*dir, *check); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

func run(dir string, check bool) error {
	out, err := Generate(context.Background(), dir)
	if err != nil {
		return err
	}
	if check {
		stale, err := Stale(dir, out)
		if err != nil {
			return err
		}
		if len(stale) > 0 {
			return fmt.Errorf("out of date (run go generate): %s", strings.Join(stale, ", "))
		}
		return nil
	}
	for _, name := range sortedKeys(out) {
		if err := os.WriteFile(filepath.Join(dir, name), out[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Generate compiles every *.proto in dir and returns the generated files by
// name relative to dir (x.proto → x.pb.go). It writes nothing.
func Generate(ctx context.Context, dir string) (map[string][]byte, error) {
	protos, err := filepath.Glob(filepath.Join(dir, "*.proto"))
	if err != nil {
		return nil, err
	}
	if len(protos) == 0 {
		return nil, fmt.Errorf("no .proto files in %s", dir)
	}
	names := make([]string, len(protos))
	for i, p := range protos {
		names[i] = filepath.Base(p)
	}
	slices.Sort(names)

	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			ImportPaths: []string{dir},
		}),
		SourceInfoMode: protocompile.SourceInfoStandard,
		MaxParallelism: 1,
	}
	files, err := c.Compile(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}

	// A CodeGeneratorRequest lists every file the generated ones depend on,
	// dependencies first, as protoc sends it to a plugin.
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: names,
		Parameter:      proto.String("paths=source_relative"),
	}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range files {
		add(f)
	}

	plugin, err := protogen.Options{}.New(req)
	if err != nil {
		return nil, fmt.Errorf("plugin: %w", err)
	}
	plugin.SupportedFeatures = internal_gengo.SupportedFeatures
	plugin.SupportedEditionsMinimum = internal_gengo.SupportedEditionsMinimum
	plugin.SupportedEditionsMaximum = internal_gengo.SupportedEditionsMaximum
	for _, f := range plugin.Files {
		if f.Generate {
			internal_gengo.GenerateFile(plugin, f)
		}
	}
	resp := plugin.Response()
	if resp.Error != nil {
		return nil, errors.New(resp.GetError())
	}
	out := make(map[string][]byte, len(resp.File))
	for _, f := range resp.File {
		out[f.GetName()] = []byte(f.GetContent())
	}
	return out, nil
}

// Stale returns the names (relative to dir) of the generated files whose
// committed copy in dir is missing or differs from out.
func Stale(dir string, out map[string][]byte) ([]string, error) {
	var stale []string
	for _, name := range sortedKeys(out) {
		have, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			stale = append(stale, name+" (missing)")
			continue
		}
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(have, out[name]) {
			stale = append(stale, name)
		}
	}
	return stale, nil
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
