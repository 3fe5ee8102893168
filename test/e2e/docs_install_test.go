package e2e

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const (
	nfpmFile = "../../packaging/nfpm.yaml"
	docRoot  = "/usr/share/doc/zoneproxy"
)

type nfpmEntry struct {
	Src, Dst, Type, Packager string
}

// installedTree is what one packager installs: each file's repository
// source by its installed path, and the directories.
type installedTree struct {
	files map[string]string
	dirs  map[string]bool
}

func (t installedTree) has(p string) bool {
	if _, ok := t.files[p]; ok || t.dirs[p] {
		return true
	}
	for f := range t.files { // a directory holding installed files
		if strings.HasPrefix(f, p+"/") {
			return true
		}
	}
	return false
}

// packagedTree reads nfpm.yaml's contents for packager (deb or rpm): an
// entry for every packager or that one; a directory source brings its
// files; the rpm's examples are listed by build-packages.sh, one entry per
// file of examples/ in place of the @rpm-examples@ line.
func packagedTree(t *testing.T, packager string) installedTree {
	t.Helper()
	raw, err := os.ReadFile(nfpmFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct{ Contents []nfpmEntry }
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	entries := cfg.Contents
	if packager == "rpm" && strings.Contains(string(raw), "# @rpm-examples@") {
		entries = append(entries, nfpmEntry{Src: "examples", Dst: docRoot + "/examples", Packager: "rpm"})
	}
	tree := installedTree{files: map[string]string{}, dirs: map[string]bool{}}
	for _, e := range entries {
		if e.Packager != "" && e.Packager != packager {
			continue
		}
		if e.Type == "dir" {
			tree.dirs[e.Dst] = true
			continue
		}
		src := filepath.Join("../..", e.Src)
		if fi, err := os.Stat(src); err == nil && fi.IsDir() {
			err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(src, p)
				tree.files[path.Join(e.Dst, filepath.ToSlash(rel))] = p
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		tree.files[e.Dst] = src // generated (dist/…, ${…}) sources need not exist here
	}
	return tree
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	notInSlug = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// anchors are the fragment ids GitHub gives a Markdown file's headings.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(md, -1) {
		slug := strings.ReplaceAll(notInSlug.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		id := slug
		for n := 1; out[id]; n++ {
			id = slug + "-" + strconv.Itoa(n)
		}
		out[id] = true
	}
	return out
}

// The guides ship in the packages under /usr/share/doc/zoneproxy, and
// every relative link in an installed Markdown file leads to a file (and
// heading) installed there: a VM has no repository to fall back on.
func TestInstalledDocsLinksResolve(t *testing.T) {
	for _, packager := range []string{"deb", "rpm"} {
		t.Run(packager, func(t *testing.T) {
			tree := packagedTree(t, packager)
			for _, want := range []string{"README.md", "docs/operator-guide.md", "examples/README.md", "examples/prometheus/alerts.yaml", "examples/cloud-init/README.md"} {
				if _, ok := tree.files[docRoot+"/"+want]; !ok {
					t.Errorf("%s/%s is not installed", docRoot, want)
				}
			}
			var docs []string
			for dst := range tree.files {
				if strings.HasPrefix(dst, docRoot+"/") && strings.HasSuffix(dst, ".md") {
					docs = append(docs, dst)
				}
			}
			slices.Sort(docs)
			links := 0
			for _, dst := range docs {
				raw, err := os.ReadFile(tree.files[dst])
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
					target := m[1]
					if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
						continue
					}
					links++
					file, frag, _ := strings.Cut(target, "#")
					resolved := dst
					if file != "" {
						resolved = path.Join(path.Dir(dst), file)
					}
					switch {
					case !strings.HasPrefix(resolved, docRoot+"/"):
						t.Errorf("%s: %s leads out of %s, to %s", dst, target, docRoot, resolved)
					case !tree.has(resolved):
						t.Errorf("%s: %s: %s is not installed", dst, target, resolved)
					case frag != "" && strings.HasSuffix(resolved, ".md"):
						if text, err := os.ReadFile(tree.files[resolved]); err == nil && !anchors(string(text))[frag] {
							t.Errorf("%s: %s: %s has no heading #%s", dst, target, resolved, frag)
						}
					}
				}
			}
			if links < 20 {
				t.Errorf("only %d relative links found in %v", links, docs)
			}
		})
	}
}
