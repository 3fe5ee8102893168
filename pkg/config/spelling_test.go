package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// notYetFromKeys are product files and directories (relative to the
// repository root) whose string literals may spell a setting's flag or
// variable, each with why.
var notYetFromKeys = map[string]string{
	// Envoy's own command line: its --concurrency and --log-level share
	// our flags' names (the advice beside them uses Keys).
	"pkg/envoy/args.go": "Envoy's own flags",
}

// othersFlags match text in a literal that names another program's flag
// of the same name as ours: Envoy's (`Envoy's --concurrency`) and
// kumactl's (a `kumactl …` command, up to its closing backtick).
var othersFlags = regexp.MustCompile("Envoy's --[a-z-]+|kumactl [^`]*")

// isHelpProse is a cobra.Command's Long or Example: --help's prose and
// command lines, read as an operator types them, not messages.
func isHelpProse(key ast.Expr) bool {
	id, ok := key.(*ast.Ident)
	return ok && (id.Name == "Long" || id.Name == "Example")
}

// A setting's name is spelled once, in its declaration: every message
// builds "--<key>" and "ZONEPROXY_<KEY>" from the Key, so that renaming
// or removing a setting cannot leave a message naming a flag that is gone.
func TestNoProductLiteralSpellsASettingsName(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range Settings() {
		names = append(names, regexp.QuoteMeta(s.Key.Flag()), regexp.QuoteMeta(s.Key.Env()))
	}
	// A name ends where the next character cannot continue it: Envoy's
	// --drain-time-s is not our --drain-time.
	spelled := regexp.MustCompile(`(` + strings.Join(names, "|") + `)([^A-Za-z0-9_-]|$)`)

	fset := token.NewFileSet()
	var found []string
	walk := func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if _, skip := notYetFromKeys[filepath.ToSlash(rel)]; skip {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") ||
			strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, ".pb.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if kv, ok := n.(*ast.KeyValueExpr); ok && isHelpProse(kv.Key) {
				return false
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			text, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			text = othersFlags.ReplaceAllString(text, "")
			if m := spelled.FindStringSubmatch(text); m != nil {
				pos := fset.Position(lit.Pos())
				rel, _ := filepath.Rel(root, pos.Filename)
				found = append(found, rel+":"+strconv.Itoa(pos.Line)+": "+m[1])
			}
			return true
		})
		return nil
	}
	for _, dir := range []string{"cmd", "pkg"} {
		if err := filepath.WalkDir(filepath.Join(root, dir), walk); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range found {
		t.Errorf("%s is spelled in a string literal: build it from its Key (Key.Flag(), Key.Env())", f)
	}
}
