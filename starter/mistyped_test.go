package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"allot/workflows"
)

// printedCommand is the command line in backquotes of a message.
var printedCommand = regexp.MustCompile("`(starter [^`]+)`")

// parsesAsACommand runs a command line the starter printed against
// nothing (Temporal at a closed port, a ledger that does not exist, a
// context already done) and fails unless the starter takes it: no usage
// error.
func parsesAsACommand(t *testing.T, line string) {
	t.Helper()
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("ALLOT_LEDGER", "sqlite:"+filepath.Join(t.TempDir(), "none", "allot.db"))
	words, err := workflows.SplitCommand(line)
	if err != nil || len(words) < 2 || words[0] != "starter" {
		t.Fatalf("printed %q, not a starter command line: %v", line, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	if code := execute(ctx, words[1:], &stdout, &stderr); code == exitUsage {
		t.Fatalf("the printed command `%s` is refused as a usage error: %s", line, stderr.String())
	}
}

// Issue 38 §4: a subcommand given as a command, a misspelt command or
// subcommand, and a value written before the flags are each refused with
// the command line that was meant, which the starter takes.
func TestMistypedCommandLinesGetTheCommandTheyMeant(t *testing.T) {
	for _, c := range []struct {
		args  []string
		meant string
	}{
		{[]string{"reconcile"}, "starter drift reconcile"},
		{[]string{"reconcile", "--vendor-url", "http://127.0.0.1:1"}, "starter drift reconcile --vendor-url http://127.0.0.1:1"},
		{[]string{"episdoes", "--pipeline", "weekly-video"}, "starter episodes --pipeline weekly-video"},
		{[]string{"episode", "aprove", "--pipeline", "weekly-video", "--episode", "2026-W32-0"}, "starter episode approve --pipeline weekly-video --episode 2026-W32-0"},
		// The flag package stops at the first value: --by and --reason
		// were never read.
		{[]string{"drift", "ack", "3", "--by", "maria", "--reason", "refunded twice"}, "starter drift ack --id 3 --by maria --reason 'refunded twice'"},
		{[]string{"import", "old.jsonl", "--pipeline", "weekly-video", "--dry-run"}, "starter import --from old.jsonl --pipeline weekly-video --dry-run"},
		{[]string{"episode", "show", "2026-W32-0", "--pipeline", "weekly-video"}, "starter episode show --episode 2026-W32-0 --pipeline weekly-video"},
		{[]string{"episodes", "weekly-video"}, "starter episodes --pipeline weekly-video"},
	} {
		code, _, stderr := run(t, c.args...)
		m := printedCommand.FindStringSubmatch(stderr)
		if code != exitUsage || m == nil || m[1] != c.meant {
			t.Errorf("%q: exit %d, stderr %q; want a usage error meaning `%s`", c.args, code, stderr, c.meant)
			continue
		}
		parsesAsACommand(t, m[1])
	}
	// A value before the flags says they were not read.
	if _, _, stderr := run(t, "drift", "ack", "3", "--by", "maria"); !strings.Contains(stderr, `"3", so the flags after it (--by) were not read: flags go before any other value`) {
		t.Errorf("drift ack 3 --by maria: %q", stderr)
	}
	// Nothing near: the list, no guess.
	if code, _, stderr := run(t, "frobnicate"); code != exitUsage || strings.Contains(stderr, "did you mean") || !strings.Contains(stderr, "commands:") {
		t.Errorf("frobnicate: exit %d, %q", code, stderr)
	}
}

// Issue 38 §4: `episode reject` without --reason recorded "-"; it is
// refused at once (exit 2, nothing opened or dialled) with the command
// that rejects, which the starter takes.
func TestRejectWithoutAReasonIsRefusedAtOnce(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	for _, args := range [][]string{
		{"episode", "reject", "--pipeline", "weekly-video", "--episode", "2026-W32-0"},
		{"episode", "reject", "--pipeline", "weekly-video", "--episode", "2026-W32-0", "--reason", " "},
	} {
		code, _, stderr := run(t, args...)
		m := printedCommand.FindStringSubmatch(stderr)
		if code != exitUsage || !strings.Contains(stderr, "--reason is required: rejecting episode 2026-W32-0 ends it, and the ledger keeps why") || strings.Contains(stderr, "Temporal") {
			t.Fatalf("%q: exit %d, stderr %q", args, code, stderr)
		}
		if m == nil {
			t.Fatalf("%q printed no command: %q", args, stderr)
		}
		parsesAsACommand(t, m[1])
	}
}

// Issue 38 §4: a token-file line without a colon (a name alone, or a name
// and a token with a space) was read as a bare token of "operator" and
// refused as that operator's short token; the refusal names the line and
// NAME:TOKEN, and the command it prints is one the starter takes.
func TestTokenLineWithoutAColonSaysNameColonToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# operators\nalice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "console", "--addr", "127.0.0.1:0", "--token-file", file)
	want := "operator token file " + file + ", line 2: the line has no colon, so it is read as a bare token, and it is shorter than 32 characters: write it as NAME:TOKEN"
	m := printedCommand.FindStringSubmatch(stderr)
	if code != exitUsage || !strings.Contains(stderr, want) || m == nil {
		t.Fatalf("exit %d, stderr %q; want %q and a command", code, stderr, want)
	}
	parsesAsACommand(t, m[1])
}

// Issue 38 §4: a port out of range was blamed on another process holding
// it; it is refused before anything is opened, with the command line that
// serves the page, which the starter takes.
func TestConsolePortOutOfRangeIsRefusedAsSuch(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice:"+strings.Repeat("k", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"console", "--addr", ":99999"},
		{"console", "--addr=127.0.0.1:99999", "--token-file", tokens},
		{"console", "--web-ui", "http://127.0.0.1:8233", "-addr", "127.0.0.1:-1"},
	} {
		code, _, stderr := run(t, args...)
		m := printedCommand.FindStringSubmatch(stderr)
		if code != exitUsage || !strings.Contains(stderr, "is out of range: give a port from 1 to 65535") || strings.Contains(stderr, "another process") || m == nil || !strings.Contains(m[1], "--addr 127.0.0.1:8090") {
			t.Fatalf("%q: exit %d, stderr %q", args, code, stderr)
		}
		parsesAsACommand(t, m[1])
	}
}
