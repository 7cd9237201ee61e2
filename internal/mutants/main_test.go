package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseReadsEachBlockWithItsTabs(t *testing.T) {
	list := writeFile(t, t.TempDir(), "mutants.txt", "# a comment\n"+
		"mutant: first\nfile: a.go\nfrom: \treturn a + b\nto: \treturn a - b\ntest: ./ TestAdd\n"+
		"\n\n"+
		"mutant: second\nfile: rules.yml\nfrom: limit: 3\nto: limit: 4\ntest: ./internal/x/ TestRules|TestLimit\n")
	ms, err := parse(list)
	if err != nil {
		t.Fatal(err)
	}
	want := []mutant{
		{Name: "first", File: "a.go", From: "\treturn a + b", To: "\treturn a - b", Package: "./", Run: "TestAdd", Line: 2},
		{Name: "second", File: "rules.yml", From: "limit: 3", To: "limit: 4", Package: "./internal/x/", Run: "TestRules|TestLimit", Line: 9},
	}
	if len(ms) != len(want) {
		t.Fatalf("parse: %d mutants %+v, want %d", len(ms), ms, len(want))
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("mutant %d: %+v, want %+v", i, ms[i], want[i])
		}
	}
}

// A list the tool cannot read is refused with what to write instead.
func TestParseRefusesABadListNamingTheFix(t *testing.T) {
	for _, c := range []struct{ name, list, want string }{
		{"a field missing", "mutant: m\nfile: a.go\nfrom: x\nto: y\n", "needs mutant, file, from, to and test"},
		{"two of one name", "mutant: m\nfile: a.go\nfrom: x\nto: y\ntest: ./ T\n\nmutant: m\nfile: b.go\nfrom: x\nto: y\ntest: ./ T\n", `two mutants are named "m"`},
		{"an unknown key", "mutant: m\nfiel: a.go\n", `unknown key "fiel" (mutant, file, from, to, test)`},
		{"a test without a pattern", "mutant: m\ntest: ./pkg/\n", "test takes a package and a -run pattern"},
		{"a line that is no key", "mutant m\n", `want "key: value"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(writeFile(t, t.TempDir(), "mutants.txt", c.list))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("parse: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// Each verdict of run, on a module of its own: a mutant the named test
// catches is killed, one it misses survives, and an entry that does not
// match the code, does not compile or names no test is broken, never
// killed. A data file's mutant runs in a copy of the tree. The tree is
// never written.
func TestRunGivesEachVerdictAndLeavesTheTreeAsItWas(t *testing.T) {
	dir := newModule(t)
	code := "package m\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n\nfunc Twice(a int) int {\n\treturn a * 2\n}\n\nfunc Same(a int) int {\n\treturn a\n}\n\nfunc Again(a int) int {\n\treturn a\n}\n"
	writeFile(t, dir, "m.go", code)
	writeFile(t, dir, "limit.txt", "limit 3\n")
	writeFile(t, dir, "m_test.go", "package m\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\n"+
		"func TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add(2, 3) != 5\")\n\t}\n}\n\n"+
		"func TestLimit(t *testing.T) {\n\tb, err := os.ReadFile(\"limit.txt\")\n\tif err != nil || string(b) != \"limit 3\\n\" {\n\t\tt.Fatalf(\"limit.txt: %q %v\", b, err)\n\t}\n}\n")
	git(t, dir, "init", "-q")
	t.Chdir(dir)

	for _, c := range []struct {
		m       mutant
		verdict string
		detail  string
	}{
		{mutant{Name: "caught", File: "m.go", From: "\treturn a + b", To: "\treturn a - b", Package: "./", Run: "TestAdd"}, "killed", ""},
		{mutant{Name: "missed", File: "m.go", From: "\treturn a * 2", To: "\treturn a * 3", Package: "./", Run: "TestAdd"}, "survived", ""},
		{mutant{Name: "data", File: "limit.txt", From: "limit 3", To: "limit 4", Package: "./", Run: "TestLimit"}, "killed", ""},
		{mutant{Name: "gone", File: "m.go", From: "\treturn a / 2", To: "\treturn 0", Package: "./", Run: "TestAdd", Line: 7}, "broken", "line 7 of the list: its from-line is not in m.go (the code changed): update the entry"},
		{mutant{Name: "twice", File: "m.go", From: "\treturn a", To: "\treturn 0", Package: "./", Run: "TestAdd"}, "broken", "more than once (lines 12 and 16): make it unique"},
		{mutant{Name: "no build", File: "m.go", From: "\treturn a + b", To: "\treturn a +", Package: "./", Run: "TestAdd"}, "broken", "the mutated code does not compile"},
		{mutant{Name: "no test", File: "m.go", From: "\treturn a + b", To: "\treturn a - b", Package: "./", Run: "TestNothing", Line: 3}, "broken", `line 3 of the list: -run "TestNothing" matches no test in ./`},
	} {
		t.Run(c.m.Name, func(t *testing.T) {
			o := run(context.Background(), c.m, t.TempDir())
			if o.verdict != c.verdict || !strings.Contains(o.detail, c.detail) {
				t.Fatalf("verdict %q (%s), want %q with %q", o.verdict, o.detail, c.verdict, c.detail)
			}
		})
	}
	for name, want := range map[string]string{"m.go": code, "limit.txt": "limit 3\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s after the mutants: %q %v, want it as it was", name, b, err)
		}
	}
}

// The mutated file's package, and only it, is compiled without
// optimizations, whether it is the module's root or a folder in it.
func TestUnoptimizedNamesTheMutatedFilesPackage(t *testing.T) {
	for file, want := range map[string]string{
		"internal/ledger/budgets.go": "-gcflags=./internal/ledger=-N -l",
		"budget_admission.go":        "-gcflags=./.=-N -l",
	} {
		if got := unoptimized(file); got != want {
			t.Errorf("unoptimized(%q) = %q, want %q", file, got, want)
		}
	}
}

// newModule is an empty module in a folder of its own, for tests that
// build test binaries with the go command and list files with git; it
// skips under -short or without git.
func newModule(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds test binaries with the go command")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	dir := t.TempDir()
	writeFile(t, dir, "go.mod", "module example.com/m\n\ngo 1.26\n")
	return dir
}

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
