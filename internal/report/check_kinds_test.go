package report

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/import-and-check.md's check kind table from CheckKindTable")

const (
	checkKindPage  = "../../docs/import-and-check.md"
	checkKindBegin = "<!-- check-kind-table:begin -->\n"
	checkKindEnd   = "<!-- check-kind-table:end -->"
)

// The docs' table of violation kinds is CheckKindTable, rendered. After
// changing the table, run `go test -run TestCheckKindTable ./internal/report -update`.
func TestCheckKindTableMatchesTheDocs(t *testing.T) {
	data, err := os.ReadFile(checkKindPage)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, checkKindBegin), strings.Index(s, checkKindEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q section", checkKindPage, checkKindBegin, checkKindEnd)
	}
	want := CheckKindTableMarkdown()
	if got := s[i+len(checkKindBegin) : j]; got != want {
		if *updateDocs {
			if err := os.WriteFile(checkKindPage, []byte(s[:i+len(checkKindBegin)]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("%s's check kind table differs from CheckKindTable: run `go test -run TestCheckKindTable ./internal/report -update`; it should read:\n%s", checkKindPage, want)
	}
}

// Every violation kind the ledger and operator declare (a Kind... string
// constant) is in CheckKindTable exactly once, and the table names no
// other.
func TestCheckKindTableListsEveryKindOnce(t *testing.T) {
	declared := map[string]string{}
	decl := regexp.MustCompile(`\b(Kind[A-Z]\w*)\s*=\s*"([a-z_]+)"`)
	for _, dir := range []string{"../ledger", "."} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range decl.FindAllStringSubmatch(string(data), -1) {
				declared[m[2]] = m[1]
			}
		}
	}
	listed := map[string]int{}
	for _, r := range CheckKindTable {
		for _, k := range r.Kinds {
			listed[k]++
		}
	}
	for k, name := range declared {
		if listed[k] != 1 {
			t.Errorf("kind %q (%s) is listed %d times in CheckKindTable, want once", k, name, listed[k])
		}
	}
	for k := range listed {
		if _, ok := declared[k]; !ok {
			t.Errorf("CheckKindTable lists %q, which no Kind constant declares", k)
		}
	}
}
