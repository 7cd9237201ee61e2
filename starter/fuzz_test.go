package main

// Fuzz target for the starter's command lines: `run`, `schedule backfill`
// and `episode resolve`, with any arguments. Seeds are in
// testdata/fuzz/<target>; `go test` runs them, .ci/fuzz explores further.

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"allot/app"
)

// fuzzCommands are the commands under test. The flags each takes are
// asked of its flag set (starterFlags), so a flag added later is known.
var fuzzCommands = []struct {
	name string
	run  func(context.Context, *cli, []string) error
	sub  string
}{
	{"run", runCommand, ""},
	{"schedule", scheduleCommand, "backfill"},
	{"episode", episodeCommand, "resolve"},
}

var (
	sharedFlags  = []string{"json", "ledger", "pipelines", "task-queue", "address", "namespace"}
	notRFC3339   = regexp.MustCompile(`--(nominal-time|from|to) ("(?:[^"\\]|\\.)*") is not RFC3339`)
	undefinedArg = regexp.MustCompile(`(?s)^flag provided but not defined: -(.*)$`)
)

// FuzzStarterFlags: a command line never panics the starter; a mistake in
// it is a usage error (exit 2) that names the flag it is about (or quotes
// the stray argument), before anything is read or contacted, the same
// every time; a time the starter calls "not RFC3339" is not; and nothing
// is ever written.
func FuzzStarterFlags(f *testing.F) {
	// Nothing may be reached: Temporal at a closed port, under a context
	// that is cancelled already, and a ledger that does not exist.
	f.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	f.Setenv("TEMPORAL_CONFIG_FILE", "/nonexistent/temporal.toml")
	dataDir := f.TempDir()
	declared := map[string][]string{}
	for _, cmd := range fuzzCommands {
		declared[cmd.name] = starterFlags(f, strings.Fields(cmd.name+" "+cmd.sub)...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, which uint8, argv string) {
		cmd := fuzzCommands[int(which)%len(fuzzCommands)]
		var args []string
		if argv != "" {
			args = strings.Split(argv, "\x00")
		}
		for _, a := range args {
			// These name files and databases to open: not for a fuzzer.
			if strings.Contains(a, "pipelines") || strings.Contains(a, "sqlite:") || strings.Contains(a, "postgres") {
				return
			}
		}
		call := func() error {
			c := &cli{cfg: app.Config{DataDir: dataDir}, stdout: io.Discard, stderr: io.Discard}
			full := args
			if cmd.sub != "" {
				full = append([]string{cmd.sub}, args...)
			}
			return cmd.run(ctx, c, full)
		}
		start := time.Now()
		err := call()
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("starter %s %q took %s with nothing to reach", cmd.name, args, d)
		}
		if entries, _ := os.ReadDir(dataDir); len(entries) > 0 {
			t.Fatalf("starter %s %q wrote %s", cmd.name, args, entries[0].Name())
		}
		if err == nil {
			t.Fatalf("starter %s %q succeeded with nothing to reach", cmd.name, args)
		}
		if errors.Is(err, flag.ErrHelp) {
			if !slices.ContainsFunc(args, func(a string) bool {
				name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
				return strings.HasPrefix(a, "-") && (name == "h" || name == "help")
			}) {
				t.Fatalf("starter %s %q: help without -h", cmd.name, args)
			}
			return
		}
		var uerr usageError
		if !errors.As(err, &uerr) {
			return // past the command line: refused by what it names, or unreachable
		}
		msg := uerr.Error()
		if again := call(); again == nil || again.Error() != msg {
			t.Fatalf("starter %s %q: usage error %q, then %v", cmd.name, args, msg, again)
		}
		if !namesTheMistake(msg, append(slices.Clone(sharedFlags), declared[cmd.name]...), args) {
			t.Fatalf("starter %s %q: usage error names no flag (nor the stray argument): %q", cmd.name, args, msg)
		}
		if m := notRFC3339.FindStringSubmatch(msg); m != nil {
			v, err := strconv.Unquote(m[2])
			if err != nil {
				t.Fatalf("starter %s: %q quotes the time badly: %v", cmd.name, msg, err)
			}
			if _, err := time.Parse(time.RFC3339, v); err == nil {
				t.Fatalf("starter %s %q: %q is RFC 3339, but the starter says %q", cmd.name, args, v, msg)
			}
		}
	})
}

// namesTheMistake reports whether a usage error names a flag of the
// command, the undefined flag it was given, or the argument it could not
// place.
func namesTheMistake(msg string, flags, args []string) bool {
	if rest, ok := strings.CutPrefix(msg, "unexpected argument "); ok {
		return slices.ContainsFunc(args, func(a string) bool { return strings.Contains(rest, strconv.Quote(a)) })
	}
	if rest, ok := strings.CutPrefix(msg, "bad flag syntax: "); ok {
		return slices.Contains(args, rest)
	}
	if m := undefinedArg.FindStringSubmatch(msg); m != nil {
		return slices.ContainsFunc(args, func(a string) bool {
			name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
			return name == m[1]
		})
	}
	for _, name := range flags {
		if strings.Contains(msg, "-"+name) {
			return true
		}
	}
	return false
}
