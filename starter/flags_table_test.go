package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var updateFlagsTable = flag.Bool("update-flags", false, "rewrite docs/operating.md's flag table from the starter's flag sets")

const (
	flagsPage  = "../docs/operating.md"
	flagsBegin = "<!-- starter-flags:begin -->\n"
	flagsEnd   = "<!-- starter-flags:end -->"
)

// positional are the arguments subcommands take before their flags.
var positional = map[string]string{"budget acknowledge": "BUDGET", "vendor pause": "NAME", "vendor resume": "NAME", "vendor show": "NAME", "budget show": "BUDGET", "budget raise": "BUDGET", "budget set-limit": "BUDGET"}

// alsoSubcommands are the subcommands of commands that run without one:
// `costs --pipeline P` and `costs export`.
var alsoSubcommands = map[string][]string{"costs": {"export"}}

var (
	subcommandList = regexp.MustCompile(`takes a subcommand: one of \[([^\]]*)\]`)
	flagLine       = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
)

// starterFlags asks a command for its flags, as `-h` prints them.
func starterFlags(t testing.TB, args ...string) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	execute(context.Background(), append(args, "-h"), &stdout, &stderr)
	var out []string
	for _, m := range flagLine.FindAllStringSubmatch(stderr.String(), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatalf("starter %s -h printed no flags:\n%s", strings.Join(args, " "), stderr.String())
	}
	return out
}

// flagsTableMarkdown renders every starter command with the flags its flag
// set declares: the one declaration of them is the code.
func flagsTableMarkdown(t *testing.T) string {
	t.Helper()
	shared := []string{"json", "ledger", "pipelines"}
	temporal := []string{"address", "namespace", "task-queue"}
	var b strings.Builder
	b.WriteString("| command | flags |\n|---|---|\n")
	b.WriteString("| every command | `--json`, `--ledger`, `--pipelines`; those that reach Temporal also `--address`, `--namespace`, `--task-queue` |\n")
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range commands {
			if !yield(n) {
				return
			}
		}
	}) {
		var stdout, stderr bytes.Buffer
		execute(context.Background(), []string{name}, &stdout, &stderr)
		paths := [][]string{{name}}
		if m := subcommandList.FindStringSubmatch(stderr.String()); m != nil {
			paths = nil
			for _, sub := range strings.Fields(m[1]) {
				paths = append(paths, []string{name, sub})
			}
		}
		// A command that also takes a subcommand of its own.
		for _, sub := range alsoSubcommands[name] {
			paths = append(paths, []string{name, sub})
		}
		for _, p := range paths {
			// A positional argument some subcommands take first.
			args := p
			if arg := positional[strings.Join(p, " ")]; arg != "" {
				args = append(slices.Clone(p), arg)
			}
			var own []string
			for _, f := range starterFlags(t, args...) {
				if !slices.Contains(shared, f) && !slices.Contains(temporal, f) {
					own = append(own, "`--"+f+"`")
				}
			}
			cmd := strings.Join(args, " ")
			flags := strings.Join(own, ", ")
			if flags == "" {
				flags = "none of its own"
			}
			b.WriteString("| `" + cmd + "` | " + flags + " |\n")
		}
	}
	return b.String()
}

// The docs' table of the starter's commands and flags is the flag sets',
// rendered. After changing a flag, run
// `go test -run TestFlagsTable ./starter -update-flags`.
func TestFlagsTableMatchesTheDocs(t *testing.T) {
	data, err := os.ReadFile(flagsPage)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, flagsBegin), strings.Index(s, flagsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q section", flagsPage, flagsBegin, flagsEnd)
	}
	want := flagsTableMarkdown(t)
	if got := s[i+len(flagsBegin) : j]; got != want {
		if *updateFlagsTable {
			if err := os.WriteFile(flagsPage, []byte(s[:i+len(flagsBegin)]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("%s's flag table differs from the starter's flag sets: run `go test -run TestFlagsTable ./starter -update-flags`; it should read:\n%s", flagsPage, want)
	}
}
