package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"allot/internal/docstest"
	"allot/workflows"
)

// docVariables are the shell variables the docs' commands take from the
// command before them (README's tour: T=$(date ...), EP=$(starter run ...
// --print-episode), WEEK=$(date ...)), each with a value of what it holds.
var docVariables = map[string]string{"$T": "2026-12-01T09:00:00Z", "$EP": "2026-W49-0", "$WEEK": "2026-W49"}

var shellVariable = regexp.MustCompile(`\$[A-Z_]+`)

// TestDocsStarterCommandsParse: every starter command the README and the
// docs show is one the starter takes: its subcommand and flags exist and
// its values parse (not a usage error, exit 2). Each runs against nothing
// (Temporal at a closed port, a context already cancelled, a ledger that
// does not exist), so nothing is contacted or written; the integration
// tests run the commands that matter end to end.
func TestDocsStarterCommandsParse(t *testing.T) {
	cmds, err := docstest.StarterCommands("..")
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 50 {
		t.Fatalf("found %d starter commands in the README and docs/, fewer than there are", len(cmds))
	}
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("TEMPORAL_CONFIG_FILE", "/nonexistent/temporal.toml")
	t.Setenv("ALLOT_VENDOR_URL", "http://127.0.0.1:1")
	t.Setenv("ALLOT_VENDOR_API_KEY", "docs-test-key")
	dir := t.TempDir()
	t.Setenv("ALLOT_LEDGER", "sqlite:"+filepath.Join(dir, "none", "allot.db"))
	t.Chdir("..") // the docs' paths are the repository's
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, cmd := range cmds {
		where, line := cmd.Where, cmd.Line
		for _, v := range shellVariable.FindAllString(line, -1) {
			value, ok := docVariables[v]
			if !ok {
				t.Errorf("%s: `starter %s` uses %s, a shell variable this test has no sample of: add one to docVariables", where, line, v)
			}
			line = strings.ReplaceAll(line, v, value)
		}
		args, err := workflows.SplitCommand(line)
		if err != nil {
			t.Errorf("%s: %q does not split as a shell would: %v", where, line, err)
			continue
		}
		if len(args) > 0 && strings.HasPrefix(args[0], "<") {
			continue // the general form: starter <command> [flags]
		}
		var stdout, stderr bytes.Buffer
		code := execute(ctx, args, &stdout, &stderr)
		if code == exitUsage && strings.Contains(stderr.String(), "no such file or directory") {
			continue // a file of the reader's (a payload) that the page has them write first
		}
		if code == exitUsage {
			t.Errorf("%s: `starter %s` is not a command the starter takes: %s", where, line, stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); err == nil {
		t.Fatal("a documented command created a ledger directory")
	}
}
