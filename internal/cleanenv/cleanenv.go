// Package cleanenv keeps an operator's shell out of allot's tests. A shell
// that runs allot has its ALLOT_* and TEMPORAL_* variables exported, and a
// test that passed them on (to the worker or starter it starts, or to the
// config loaders it calls in-process) would run against the operator's task
// queue, ledger or Temporal Cloud namespace instead of its own: it would
// hang, fail, or worse. .ci/run exports such variables (.ci/leak-probe.env)
// so that a test that lets them through fails in CI.
//
// Environ is the environment of every process a test starts; Clear, called
// from a package's TestMain, cleans the test process itself. Both also point
// TEMPORAL_CONFIG_FILE at an empty file, so that envconfig does not read the
// operator's default profile file ($XDG_CONFIG_HOME/temporalio/temporal.toml
// or the platform's equivalent); a test that tests profiles names its own
// file. HOME is left alone: the go command's caches live under it.
//
// The test suites' own settings, ALLOT_TEST_* (ALLOT_TEST_POSTGRES_DSN,
// ALLOT_TEST_PATIENCE), are kept: no binary reads them, and a test binary
// started again needs them.
//
// It imports nothing of allot's, so that unit tests can use it without
// linking the Temporal server (unlike internal/allottest).
package cleanenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ConfigFileEnv is envconfig's variable naming the profile file; Environ
// and Clear set it to NoConfigFile.
const ConfigFileEnv = "TEMPORAL_CONFIG_FILE"

// NoConfigFile is the profile file the tests' processes read: an empty
// one, so no profile and nothing of the operator's.
var NoConfigFile = os.DevNull

// testPrefix marks the test suites' own variables, which are kept.
const testPrefix = "ALLOT_TEST_"

// Dropped reports whether name is one of the caller's variables a test
// must not pass on: ALLOT_* (but ALLOT_TEST_*) and TEMPORAL_*.
func Dropped(name string) bool {
	return strings.HasPrefix(name, "TEMPORAL_") ||
		strings.HasPrefix(name, "ALLOT_") && !strings.HasPrefix(name, testPrefix)
}

// Environ is the caller's environment without any ALLOT_* or TEMPORAL_*
// variable, with TEMPORAL_CONFIG_FILE naming an empty file, and then the
// given "NAME=value" lines, which win over anything before them.
func Environ(given ...string) []string {
	return From(os.Environ(), given...)
}

// From is Environ of environ instead of the caller's environment.
func From(environ []string, given ...string) []string {
	var out []string
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); !Dropped(name) {
			out = append(out, kv)
		}
	}
	out = append(out, ConfigFileEnv+"="+NoConfigFile)
	for _, kv := range given {
		name, _, _ := strings.Cut(kv, "=")
		out = removeName(out, name)
		out = append(out, kv)
	}
	return out
}

func removeName(environ []string, name string) []string {
	out := environ[:0]
	for _, kv := range environ {
		if n, _, _ := strings.Cut(kv, "="); n != name {
			out = append(out, kv)
		}
	}
	return out
}

// Clear removes every ALLOT_* (but ALLOT_TEST_*) and TEMPORAL_* variable
// from the test process's own environment and points TEMPORAL_CONFIG_FILE
// at an empty file. Call it first in TestMain of a package whose tests run
// code that reads the environment (app.ConfigFromEnv, app.TemporalOptions,
// the vendor's credentials): each test then sets (t.Setenv) what it needs
// on top of nothing of the caller's.
func Clear() error {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); Dropped(name) {
			if err := os.Unsetenv(name); err != nil {
				return err
			}
		}
	}
	return os.Setenv(ConfigFileEnv, NoConfigFile)
}

// Run is a TestMain's body for such a package: Clear, then the tests.
// Use it as func TestMain(m *testing.M) { os.Exit(cleanenv.Run(m)) }.
func Run(m interface{ Run() int }) int {
	if err := Clear(); err != nil {
		fmt.Fprintln(os.Stderr, "cleanenv:", err)
		return 1
	}
	return m.Run()
}

// ProbeFile is the operator's shell .ci/run exports, relative to the
// module's root: one NAME=value a line, unquoted, # for comments.
const ProbeFile = ".ci/leak-probe.env"

// Probe is ProbeFile's variables, "NAME=value" lines.
func Probe(t testing.TB) []string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the test's directory: cannot find %s", ProbeFile)
		}
		dir = parent
	}
	data, err := os.ReadFile(filepath.Join(dir, ProbeFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, ok := strings.Cut(line, "=")
		if !ok || !Dropped(name) {
			t.Fatalf("%s:%d: %q is not an ALLOT_* or TEMPORAL_* NAME=value line", ProbeFile, n+1, line)
		}
		out = append(out, line)
	}
	return out
}

// RunWithProbe runs the named tests of the test binary again, in a process
// of their own with the probe's variables exported, and fails unless each
// ran and passed: the proof, in any shell, that the package's TestMain
// keeps an operator's shell out of them.
func RunWithProbe(t *testing.T, tests ...string) {
	t.Helper()
	pattern := "^(" + strings.Join(tests, "|") + ")$"
	args := []string{"-test.run=" + pattern, "-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), Probe(t)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s with %s exported: %v\n%s", pattern, ProbeFile, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Fatalf("%s did not run and pass with %s exported:\n%s", name, ProbeFile, out)
		}
	}
}
