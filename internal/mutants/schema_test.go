package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// schemaCode is a package with a line of each kind a schema switches,
// and of kinds it must leave to a build of their own.
const schemaCode = "package m\n\nimport \"strings\"\n\n" +
	"func Add(a, b int) (n int) {\n\tn = a + b // the sum\n\treturn n\n}\n\n" +
	"func Pos(a int) bool {\n\tif a > 0 {\n\t\treturn true\n\t} else if a == 0 {\n\t\treturn false\n\t}\n\treturn false\n}\n\n" +
	"func Sign(a int) string {\n\tswitch {\n\tcase a < 0, a == -0:\n\t\treturn \"-\"\n\t}\n\treturn \"+\"\n}\n\n" +
	"func Kind(a int) string {\n\tswitch a {\n\tcase 1:\n\t\treturn \"one\"\n\t}\n\treturn \"many\"\n}\n\n" +
	"func Query() string {\n\treturn strings.TrimSpace(`SELECT n\n\tFROM t\n\tWHERE n > 0`)\n}\n\n" +
	"const Limit = `limit\n3`\n\n" +
	"func Double(a int) int {\n\td := a * 2\n\treturn d\n}\n\n" +
	"func Loop(xs []int) (c int) {\n\tfor _, x := range xs {\n\t\tif x < 0 {\n\t\t\tbreak\n\t\t}\n\t\tc++\n\t}\n\treturn c\n}\n"

const schemaTests = "package m\n\nimport \"testing\"\n\n" +
	"func TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add\")\n\t}\n}\n\n" +
	"func TestPos(t *testing.T) {\n\tif !Pos(1) || Pos(0) || Pos(-1) {\n\t\tt.Fatal(\"Pos\")\n\t}\n}\n\n" +
	"func TestSign(t *testing.T) {\n\tif Sign(-1) != \"-\" || Sign(1) != \"+\" {\n\t\tt.Fatal(\"Sign\")\n\t}\n}\n\n" +
	"func TestKind(t *testing.T) {\n\tif Kind(1) != \"one\" {\n\t\tt.Fatal(\"Kind\")\n\t}\n}\n\n" +
	"func TestQuery(t *testing.T) {\n\tif Query() != \"SELECT n\\n\\tFROM t\\n\\tWHERE n > 0\" || Limit != \"limit\\n3\" {\n\t\tt.Fatalf(\"%q %q\", Query(), Limit)\n\t}\n}\n\n" +
	"func TestDouble(t *testing.T) {\n\tif Double(2) != 4 {\n\t\tt.Fatal(\"Double\")\n\t}\n}\n\n" +
	"func TestLoop(t *testing.T) {\n\tif Loop([]int{1, -1, 1}) != 1 {\n\t\tt.Fatal(\"Loop\")\n\t}\n}\n"

// Each line a schema can carry gets the kind of choice that means what
// the line meant; any other is left to a build of its own.
func TestSchemaChoiceSwitchesOnlyLinesThatKeepTheirMeaning(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "m.go", schemaCode)
	t.Chdir(dir)
	for _, c := range []struct {
		name, from, to, kind string
	}{
		{"a statement, its comment dropped", "\tn = a + b // the sum", "\tn = a - b", "stmt"},
		{"a return for a return", "\treturn n", "\treturn 0", "stmt"},
		{"a break", "\t\t\tbreak", "", "stmt"},
		{"an if's condition", "\tif a > 0 {", "\tif a >= 0 {", "if"},
		{"an else if's condition", "\t} else if a == 0 {", "\t} else if a != 0 {", "if"},
		{"a case of a switch without a tag", "\tcase a < 0, a == -0:", "\tcase false:", "case"},
		{"a line inside a raw string", "\tFROM t", "\tFROM u", "text"},
		{"a raw string's last line", "\tWHERE n > 0`)", "\tWHERE n >= 0`)", "text"},
		{"a constant's raw string", "3`", "4`", "text"},
		{"a declaration with :=", "\td := a * 2", "\td := a * 3", ""},
		{"a return for a statement", "\treturn d", "\t_ = d", ""},
		{"a case of a switch with a tag", "\tcase 1:", "\tcase 2:", ""},
		{"an if made into something else", "\tif a > 0 {", "\tfor a > 0 {", ""},
		{"a raw string's end moved", "\tWHERE n > 0`)", "\tWHERE n > 0`) + `x`", ""},
		{"a function's header", "func Double(a int) int {", "func Double(a int) int { _ = a", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := mutant{File: "m.go", From: c.from, To: c.to}
			loc, why := locate(m)
			if why != "" {
				t.Fatal(why)
			}
			ch, ok := schemaChoice(m, loc)
			if ok != (c.kind != "") || ch.kind != c.kind {
				t.Fatalf("schemaChoice: kind %q (ok %v), want %q", ch.kind, ok, c.kind)
			}
		})
	}
	m := mutant{File: "m_test.go", From: "x", To: "y"}
	if _, ok := schemaChoice(m, located{lines: []string{"x\n"}}); ok {
		t.Error("a test file's mutant is in a schema: want it built on its own")
	}
}

// A schema gives each mutant the verdict a build of its own gives it,
// and leaves out the one whose choice does not compile, so that it is
// still reported broken; with no mutant chosen, its binary passes.
func TestSchemaGivesTheVerdictsOfBuildsOnTheirOwn(t *testing.T) {
	dir := newModule(t)
	writeFile(t, dir, "m.go", schemaCode)
	writeFile(t, dir, "m_test.go", schemaTests)
	// A package whose named test fails with no mutant: its schema's
	// control run fails, and its mutant is built on its own.
	if err := os.Mkdir(filepath.Join(dir, "red"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "red/red.go", "package red\n\nfunc One() int {\n\treturn 1\n}\n")
	writeFile(t, dir, "red/red_test.go", "package red\n\nimport \"testing\"\n\nfunc TestRed(t *testing.T) {\n\tt.Fatal(\"red, mutant or not\")\n}\n")
	git(t, dir, "init", "-q")
	t.Chdir(dir)
	ms := []mutant{
		{Name: "stmt", File: "m.go", From: "\tn = a + b // the sum", To: "\tn = a - b", Package: "./", Run: "TestAdd"},
		{Name: "stmt missed", File: "m.go", From: "\tn = a + b // the sum", To: "\tn = b + a", Package: "./", Run: "TestAdd"},
		{Name: "break", File: "m.go", From: "\t\t\tbreak", To: "", Package: "./", Run: "TestLoop"},
		{Name: "if", File: "m.go", From: "\tif a > 0 {", To: "\tif a >= 0 {", Package: "./", Run: "TestPos"},
		{Name: "else if", File: "m.go", From: "\t} else if a == 0 {", To: "\t} else if a == 1 {", Package: "./", Run: "TestPos"},
		{Name: "case", File: "m.go", From: "\tcase a < 0, a == -0:", To: "\tcase false:", Package: "./", Run: "TestSign"},
		{Name: "case missed", File: "m.go", From: "\tcase a < 0, a == -0:", To: "\tcase a < 0:", Package: "./", Run: "TestSign"},
		{Name: "query", File: "m.go", From: "\tFROM t", To: "\tFROM u", Package: "./", Run: "TestQuery"},
		{Name: "query end", File: "m.go", From: "\tWHERE n > 0`)", To: "\tWHERE n >= 0`)", Package: "./", Run: "TestQuery"},
		{Name: "constant", File: "m.go", From: "3`", To: "4`", Package: "./", Run: "TestQuery"},
		{Name: "no build", File: "m.go", From: "\treturn n", To: "\treturn nothing", Package: "./", Run: "TestAdd"},
		{Name: "own", File: "m.go", From: "\td := a * 2", To: "\td := a * 3", Package: "./", Run: "TestDouble"},
		{Name: "red", File: "red/red.go", From: "\treturn 1", To: "\treturn 2", Package: "./red/", Run: "TestRed"},
	}
	want := map[string]string{}
	for _, m := range ms {
		want[m.Name] = run(context.Background(), m, t.TempDir()).verdict
	}
	// What a build of its own says, to be sure the comparison means
	// something.
	for name, verdict := range map[string]string{"stmt": "killed", "stmt missed": "survived", "case missed": "survived", "constant": "killed", "no build": "broken"} {
		if want[name] != verdict {
			t.Fatalf("%s on its own: %s, want %s", name, want[name], verdict)
		}
	}
	plan := buildSchemata(context.Background(), ms, t.TempDir(), 2)
	var s *schema
	for i, m := range ms {
		o, how := runPlanned(context.Background(), i, m, plan[i], t.TempDir())
		if o.verdict != want[m.Name] {
			t.Errorf("%s (%s): %s, want %s as on its own", m.Name, how, o.verdict, want[m.Name])
		}
		wantHow := "schema"
		switch m.Name {
		case "no build", "constant": // left out: a call is no constant
			wantHow = "build"
		case "own", "red": // no choice; a control run that fails
			wantHow = "build"
		}
		if how != wantHow {
			t.Errorf("%s: run by %s, want %s", m.Name, how, wantHow)
		}
		if plan[i] != nil && m.Package == "./" {
			s = plan[i]
		}
	}
	if s == nil {
		t.Fatal("no schema was built")
	}
	cmd := exec.Command(s.bin, "-test.count=1")
	cmd.Env = append(os.Environ(), schemaEnv+"=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the schema with no mutant chosen fails its tests: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "m.go")); err != nil || string(b) != schemaCode {
		t.Errorf("m.go after the schema: %v, want it as it was", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "zz_mutant_schema.go")); !os.IsNotExist(err) {
		t.Errorf("the schema's switch is in the tree: %v", err)
	}
	if strings.Contains(schemaCode, schemaVar) {
		t.Fatal("the package already names the switch")
	}
}
