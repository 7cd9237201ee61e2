package docs

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's folders table names every folder of the module that holds
// Go code, so that a newcomer finds each package there. A folder is named
// by its own row or by a row of a folder it is in (examples/ covers every
// example).
func TestReadmeFoldersTableNamesEveryPackage(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	named := foldersTable(t, string(data))
	var missing []string
	for _, dir := range goFolders(t) {
		if !slices.ContainsFunc(named, func(n string) bool { return dir == n || strings.HasPrefix(dir, n+"/") }) {
			missing = append(missing, dir+"/")
		}
	}
	if len(missing) > 0 {
		t.Errorf("the README's folders table (| folder | what |) has no row for %s: add one that says what each holds", strings.Join(missing, ", "))
	}
}

// foldersTable returns the folders the README's "| folder | what |" table
// names in its first column, without their trailing slash.
func foldersTable(t *testing.T, readme string) []string {
	t.Helper()
	_, table, ok := strings.Cut(readme, "| folder | what |\n")
	if !ok {
		t.Fatal(`the README has no "| folder | what |" table`)
	}
	folder := regexp.MustCompile("`([a-z0-9_./-]+)/`")
	var named []string
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		for _, m := range folder.FindAllStringSubmatch(first, -1) {
			named = append(named, m[1])
		}
	}
	if len(named) == 0 {
		t.Fatal("the README's folders table names no folder")
	}
	return named
}

// goFolders returns the module's folders that hold a .go file, relative to
// its root: the folders of sources' files (testdata and hidden folders are
// left out there).
func goFolders(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	for path := range sources(t) {
		rel, err := filepath.Rel("..", filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		seen[filepath.ToSlash(rel)] = true
	}
	delete(seen, ".") // the root package has its own row, by its files
	return slices.Sorted(maps.Keys(seen))
}
