// Command protogen generates the Go code of the product's .proto files as
// protoc-gen-go does, without protoc: bufbuild/protocompile compiles the
// file, protoc-gen-go's own generator writes the code. It lives in its own
// module so the product's go.mod does not grow.
//
//	protogen [-check] [-root DIR] FILE.proto...
//
// FILE is relative to root (the repository); its directory is its import
// path, and FILE.pb.go is written beside it. With -check nothing is
// written: it exits 1 naming every stale or missing .pb.go.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	gengo "google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	check := flag.Bool("check", false, "write nothing; fail when a committed .pb.go differs from what would be generated")
	root := flag.String("root", ".", "the repository's root, which the .proto paths are relative to")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "protogen: name at least one .proto file")
		os.Exit(2)
	}
	stale := false
	for _, name := range flag.Args() {
		out, code, err := generate(*root, name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "protogen: %s: %v\n", name, err)
			os.Exit(1)
		}
		path := filepath.Join(*root, out)
		if !*check {
			if err := os.WriteFile(path, code, 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "protogen: %v\n", err)
				os.Exit(1)
			}
			continue
		}
		if have, err := os.ReadFile(path); err != nil || !bytes.Equal(have, code) {
			fmt.Fprintf(os.Stderr, "protogen: %s is stale or missing: run `make generate` and commit it\n", out)
			stale = true
		}
	}
	if stale {
		os.Exit(1)
	}
}

// generate returns the path (relative to root) and content of name's .pb.go.
func generate(root, name string) (string, []byte, error) {
	dir, file := filepath.Split(filepath.ToSlash(name))
	compiler := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			ImportPaths: []string{filepath.Join(root, dir)},
		}),
		// Comments of the .proto become the generated code's doc comments.
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	files, err := compiler.Compile(context.Background(), file)
	if err != nil {
		return "", nil, err
	}
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: []string{file},
		Parameter:      proto.String("paths=source_relative"),
		ProtoFile:      withImports(files[0]),
	}
	plugin, err := protogen.Options{}.New(req)
	if err != nil {
		return "", nil, err
	}
	for _, f := range plugin.Files {
		if f.Generate {
			gengo.GenerateFile(plugin, f)
		}
	}
	plugin.SupportedFeatures = gengo.SupportedFeatures
	resp := plugin.Response()
	if resp.Error != nil {
		return "", nil, errors.New(resp.GetError())
	}
	for _, f := range resp.File {
		if strings.HasSuffix(f.GetName(), ".pb.go") {
			return dir + f.GetName(), []byte(f.GetContent()), nil
		}
	}
	return "", nil, errors.New("protoc-gen-go generated no .pb.go")
}

// withImports lists f after everything it imports, as protoc hands files
// to a plugin.
func withImports(f protoreflect.FileDescriptor) []*descriptorpb.FileDescriptorProto {
	var out []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		imports := f.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		out = append(out, protodesc.ToFileDescriptorProto(f))
	}
	add(f)
	return out
}
