// Package docs holds allot's design document; its test keeps the document
// and the code pointing at each other.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sources reads every Go file of the module, but this one.
func sources(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || filepath.Base(path) == "design_test.go" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func design(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Every invariant the code cites by number is one docs/design.md defines,
// and the code cites the design by its path.
func TestInvariantCitationsResolve(t *testing.T) {
	doc := design(t)
	defined := map[int]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(\d+)\. \*\*`).FindAllStringSubmatch(doc, -1) {
		n, _ := strconv.Atoi(m[1])
		defined[n] = true
	}
	if len(defined) < 15 {
		t.Fatalf("design.md defines %d numbered invariants, want at least 15", len(defined))
	}
	cite := regexp.MustCompile(`(?i)invariants? (\d+)(?:\s*(?:-|–|and|,)\s*(\d+))*`)
	num := regexp.MustCompile(`\d+`)
	for path, src := range sources(t) {
		if strings.Contains(src, "DESIGN.md") {
			t.Errorf("%s cites DESIGN.md: cite docs/design.md", path)
		}
		for _, m := range cite.FindAllString(src, -1) {
			for _, n := range num.FindAllString(m, -1) {
				i, _ := strconv.Atoi(n)
				if !defined[i] {
					t.Errorf("%s cites invariant %d, which docs/design.md does not define", path, i)
				}
			}
		}
	}
}

// Every test the design names as a guard exists (a test function, or a
// named case of a conformance suite).
func TestGuardingTestsExist(t *testing.T) {
	var all strings.Builder
	for _, src := range sources(t) {
		all.WriteString(src)
	}
	code := all.String()
	names := regexp.MustCompile("`([A-Z][A-Za-z0-9]+)`")
	guards := regexp.MustCompile(`Tests?:([^.]*)\.`)
	found := 0
	for _, clause := range guards.FindAllStringSubmatch(design(t), -1) {
		for _, name := range names.FindAllStringSubmatch(clause[1], -1) {
			n := name[1]
			found++
			// A test function, or a conformance case registered as
			// {"Name", fn}.
			if !strings.Contains(code, "func "+n+"(") && !strings.Contains(code, `{"`+n+`", `) {
				t.Errorf("design.md names %s as a guard, but no such test exists", n)
			}
		}
	}
	if found < 20 {
		t.Fatalf("design.md names %d guarding tests, want at least 20", found)
	}
}
