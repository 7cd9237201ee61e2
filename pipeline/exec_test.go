package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// execPipeline is a pipeline with one exec step whose TOML body is given.
func execPipeline(pipelineExtra, stepBody string) string {
	return "[[vendor]]\nname = \"videogen\"\nadapter = \"go\"\napi_key_env = \"VIDEOGEN_KEY\"\n" +
		"[[pipeline]]\nname = \"settle\"\n" + pipelineExtra +
		"  [[pipeline.step]]\n  name = \"run\"\n  kind = \"exec\"\n" + stepBody
}

// Issue 15: an exec step's placeholders are checked when the file is
// loaded (they used to pass and fail the episode for good when it ran): an
// unknown one and a param the step does not have are refused, naming the
// step, the placeholder and the valid ones.
func TestExecPlaceholdersAreCheckedAtLoad(t *testing.T) {
	for name, c := range map[string]struct{ extra, body string }{
		"misspelt":              {"", `  command = ["./settle", "{perod}"]`},
		"undeclared param":      {"", "  command = [\"./settle\", \"{param.nope}\"]\n  params = { region = \"eu\" }"},
		"input without inputs":  {"", `  command = ["./settle", "{input}"]`},
		"unclosed brace":        {"", `  command = ["./settle", "{period"]`},
		"placeholder in a word": {"", `  command = ["./settle", "--date={perod}"]`},
	} {
		_, err := Parse([]byte(execPipeline(c.extra, c.body)), "test")
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !strings.Contains(err.Error(), `step "run"`) {
			t.Errorf("%s: %v does not name the step", name, err)
		}
		if name != "unclosed brace" && (!strings.Contains(err.Error(), "{period}") || !strings.Contains(err.Error(), "{idempotency_key}")) {
			t.Errorf("%s: %v does not list the valid placeholders", name, err)
		}
	}
	_, err := Parse([]byte(execPipeline("", `  command = ["./settle", "{perod}"]`)), "test")
	if err == nil || !strings.Contains(err.Error(), "{perod}") {
		t.Errorf("misspelt: %v does not name {perod}", err)
	}
	_, err = Parse([]byte(execPipeline("", "  command = [\"./settle\", \"{param.nope}\"]\n  params = { region = \"eu\" }")), "test")
	if err == nil || !strings.Contains(err.Error(), "{param.nope}") || !strings.Contains(err.Error(), "{param.region}") || !strings.Contains(err.Error(), "params") {
		t.Errorf("undeclared param: %v, want {param.nope} named, {param.region} offered and params named", err)
	}

	for name, c := range map[string]struct{ extra, body string }{
		"every placeholder": {"", "  command = [\"./settle\", \"{pipeline}/{episode}/{period}/{sequence}/{key}/{nominal_time}/{dir}/{revision}/{step}/{idempotency_key}\", \"{param.region}\"]\n  params = { region = \"eu\" }"},
		"input with inputs": {"  [pipeline.inputs]\n", `  command = ["./settle", "{input}"]`},
		"literal braces":    {"", `  command = ["jq", "{{.total}}"]`},
	} {
		if _, err := Parse([]byte(execPipeline(c.extra, c.body)), "test"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Issue 15: an output must be a file inside the episode's directory: the
// directory itself ("." or "a/..") and paths above it are refused when the
// file is loaded; a name that starts with two dots is a name.
func TestExecOutputsAreFilesInsideTheEpisode(t *testing.T) {
	for _, bad := range []string{"", ".", "./", "a/..", "..", "../x", "a/../../x", "/etc/passwd"} {
		_, err := Parse([]byte(execPipeline("", "  command = [\"x\"]\n  outputs = [\""+bad+"\"]")), "test")
		if err == nil || !strings.Contains(err.Error(), "inside the episode's directory") || !strings.Contains(err.Error(), `step "run"`) {
			t.Errorf("output %q: %v, want a refusal naming the step and the rule", bad, err)
		}
	}
	for _, good := range []string{"..data.csv", "total.csv", "out/total.csv", "a/../b.csv", ".hidden"} {
		if _, err := Parse([]byte(execPipeline("", "  command = [\"x\"]\n  outputs = [\""+good+"\"]")), "test"); err != nil {
			t.Errorf("output %q: %v", good, err)
		}
	}
}

// Issue 15: env lists the worker's variables an exec step gets besides
// the allowed ones; allot's settings, Temporal's and the vendors' keys are
// refused, with the reason. It is not pinned with the plan.
func TestExecEnvNames(t *testing.T) {
	for env, want := range map[string]string{
		`["ALLOT_LEDGER"]`:           "ALLOT_",
		`["ALLOT_VENDOR_API_KEY"]`:   "ALLOT_",
		`["TEMPORAL_API_KEY"]`:       "TEMPORAL_",
		`["VIDEOGEN_KEY"]`:           `vendor "videogen"`,
		`["PATH"]`:                   "every exec step gets",
		`["1DB"]`:                    "not a variable name",
		`["DB-URL"]`:                 "not a variable name",
		`["SETTLE_DB", "SETTLE_DB"]`: "twice",
	} {
		_, err := Parse([]byte(execPipeline("", "  command = [\"x\"]\n  env = "+env)), "test")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `step "run"`) {
			t.Errorf("env = %s: %v, want a refusal naming the step and %q", env, err, want)
		}
	}
	set, err := Parse([]byte(execPipeline("", "  command = [\"x\"]\n  env = [\"SETTLE_DB\", \"PGPASSWORD\"]")), "test")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("settle")
	if st, _ := p.Step("run"); strings.Join(st.Env, ",") != "SETTLE_DB,PGPASSWORD" {
		t.Fatalf("env = %q", st.Env)
	}
	if strings.Contains(p.Plan(), "SETTLE_DB") {
		t.Fatalf("the plan pins env: %s", p.Plan())
	}
	_, err = Parse([]byte("[[pipeline]]\nname = \"p\"\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"go\"\n  env = [\"X\"]\n"), "test")
	if err == nil || !strings.Contains(err.Error(), "takes no env") {
		t.Fatalf("env on a go step: %v", err)
	}
}

// Issue 15: a relative command path is relative to the pipeline file's
// directory, wherever the worker runs; a bare name is left to PATH.
func TestCommandPathIsRelativeToThePipelineFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pipelines.toml")
	if err := os.WriteFile(file, []byte(execPipeline("", `  command = ["./bin/settle"]`)), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("settle")
	realDir, _ := filepath.Abs(dir)
	for program, want := range map[string]string{
		"./bin/settle":  filepath.Join(realDir, "bin", "settle"),
		"bin/settle":    filepath.Join(realDir, "bin", "settle"),
		"../x/settle":   filepath.Join(filepath.Dir(realDir), "x", "settle"),
		"settle":        "settle",
		"/usr/bin/true": "/usr/bin/true",
	} {
		if got := p.CommandPath(program); got != want {
			t.Errorf("CommandPath(%q) = %q, want %q", program, got, want)
		}
	}
	if p.Dir() != realDir {
		t.Errorf("Dir() = %q, want %q", p.Dir(), realDir)
	}
	// A pinned plan keeps where its pipeline came from.
	pinned, err := p.WithPlan(p.Plan())
	if err != nil || pinned.CommandPath("./bin/settle") != filepath.Join(realDir, "bin", "settle") {
		t.Fatalf("pinned plan: %v, %q", err, pinned.CommandPath("./bin/settle"))
	}
	// A file parsed from memory: the working directory.
	parsed, err := Parse([]byte(execPipeline("", `  command = ["./bin/settle"]`)), "test")
	if err != nil {
		t.Fatal(err)
	}
	pp, _ := parsed.Get("settle")
	wd, _ := os.Getwd()
	if got := pp.CommandPath("./bin/settle"); got != filepath.Join(wd, "bin", "settle") {
		t.Errorf("parsed: CommandPath = %q, want it under %s", got, wd)
	}
}
