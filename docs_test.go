package allot_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

// anchorOf is the anchor GitHub gives a heading.
func anchorOf(heading string) string {
	a := strings.ToLower(strings.TrimSpace(heading))
	a = regexp.MustCompile(`[^\w\- ]`).ReplaceAllString(a, "")
	return strings.ReplaceAll(a, " ", "-")
}

func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(string(data), -1) {
		out[anchorOf(m[1])] = true
	}
	return out
}

// TestDocsAreLinkedAndTheirLinksResolve: every page of docs/ is linked from
// the README, and every relative link of the README and the pages names a
// file that exists and, with a #fragment, a heading it has.
func TestDocsAreLinkedAndTheirLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if !strings.Contains(string(readme), "]("+p+")") {
			t.Errorf("README.md does not link %s", p)
		}
	}
	for _, file := range append(pages, "README.md") {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s links %s, which does not exist", file, target)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(resolved, ".md") && !anchors(t, resolved)[frag] {
				t.Errorf("%s links %s: %s has no heading #%s", file, target, resolved, frag)
			}
		}
	}
}

// The README's first screens say how to start over and what the dev
// stack's simulated vendor key is (issue 15: a newcomer's first hour).
func TestREADMESaysHowToStartOverAndTheDevVendorKey(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, want := range []string{"**Start over.**", "--data-dir data-2", "rm -rf data", "ALLOT_VENDOR_API_KEY=dev-vendor-key"} {
		if !strings.Contains(s, want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
	if lines := strings.Count(s, "\n"); lines > 250 {
		t.Errorf("README.md has %d lines; the front door holds at most 250 (the rest goes in docs/)", lines)
	}
	head := strings.Join(strings.SplitN(s, "\n", 16)[:15], "\n")
	for _, want := range []string{"go run ./devserver", "go test", "exactly as often"} {
		if !strings.Contains(head, want) {
			t.Errorf("README.md's first 15 lines do not say %q: they say what allot is and give the two commands", want)
		}
	}
}
