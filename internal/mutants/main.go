// Command mutants checks that the tests of allot's money guarantees can
// fail: each mutant in a list breaks one guarantee by replacing one unique
// line of production code, and the tests it names must fail on it (a
// "killed" mutant). A mutant the tests let pass "survived": the guarantee
// is unguarded. CI runs every mutant (.ci/run); docs/testing.md explains
// the list's format.
//
//	go run ./internal/mutants                      # every mutant of .ci/mutants.txt
//	go run ./internal/mutants -list                # name them
//	go run ./internal/mutants 'gate: quote'        # only those named
//
// Exit status: 0 every mutant killed; 1 a mutant survived, or an entry no
// longer matches the code (its line is gone or not unique) or does not
// compile, which would make its kill mean nothing.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// mutant is one entry of the list.
type mutant struct {
	Name    string
	File    string
	From    string // one whole line of File, matched once, exactly
	To      string
	Package string // ./internal/ledger/
	Run     string // the -run pattern of the tests that must fail
	Line    int    // of the entry in the list, for errors
}

func main() {
	listPath := flag.String("file", ".ci/mutants.txt", "the list of mutants")
	list := flag.Bool("list", false, "print the mutants' names and stop")
	flag.Parse()
	ms, err := parse(*listPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
	if names := flag.Args(); len(names) > 0 {
		ms = slices.DeleteFunc(ms, func(m mutant) bool { return !slices.Contains(names, m.Name) })
		if len(ms) != len(names) {
			fmt.Fprintf(os.Stderr, "mutants: %d of the %d names given are in %s: list them with -list\n", len(ms), len(names), *listPath)
			os.Exit(1)
		}
	}
	if *list {
		for _, m := range ms {
			fmt.Println(m.Name)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var survived, broken []string
	for i, m := range ms {
		start := time.Now()
		verdict, detail := run(ctx, m)
		fmt.Printf("[%d/%d] %-8s %s (%s, %s)\n", i+1, len(ms), verdict, m.Name, m.File, time.Since(start).Round(time.Second))
		switch verdict {
		case "survived":
			survived = append(survived, m.Name)
		case "broken":
			broken = append(broken, m.Name)
			fmt.Println("    " + strings.ReplaceAll(strings.TrimSpace(detail), "\n", "\n    "))
		}
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "mutants: interrupted; the file of the last mutant is restored")
			os.Exit(1)
		}
	}
	fmt.Printf("mutants: %d killed, %d survived, %d broken, of %d\n", len(ms)-len(survived)-len(broken), len(survived), len(broken), len(ms))
	if len(survived) > 0 {
		fmt.Printf("survived (their guarantee has no test that fails without it): %s\n", strings.Join(survived, "; "))
	}
	if len(broken) > 0 {
		fmt.Printf("broken (correct the entry in %s): %s\n", *listPath, strings.Join(broken, "; "))
	}
	if len(survived)+len(broken) > 0 {
		os.Exit(1)
	}
}

// run applies m, runs its tests, and restores the file whatever happens:
// "killed" (the tests failed), "survived" (they passed) or "broken" (the
// entry does not match the code, or the mutated code does not compile).
func run(ctx context.Context, m mutant) (verdict, detail string) {
	orig, err := os.ReadFile(m.File)
	if err != nil {
		return "broken", err.Error()
	}
	lines := strings.SplitAfter(string(orig), "\n")
	at := -1
	for i, l := range lines {
		if strings.TrimSuffix(l, "\n") == m.From {
			if at >= 0 {
				return "broken", fmt.Sprintf("line %d of the list: its from-line is in %s more than once (lines %d and %d): make it unique", m.Line, m.File, at+1, i+1)
			}
			at = i
		}
	}
	if at < 0 {
		return "broken", fmt.Sprintf("line %d of the list: its from-line is not in %s (the code changed): update the entry", m.Line, m.File)
	}
	lines[at] = m.To + "\n"
	if err := os.WriteFile(m.File, []byte(strings.Join(lines, "")), 0o644); err != nil {
		return "broken", err.Error()
	}
	defer func() {
		if err := os.WriteFile(m.File, orig, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "mutants: RESTORE %s BY HAND (git checkout -- %s): %v\n", m.File, m.File, err)
			os.Exit(2)
		}
	}()
	// Compiled first, so that a mutant that does not build is not taken
	// for a killed one.
	if out, err := exec.CommandContext(ctx, "go", "test", "-c", "-o", os.DevNull, m.Package).CombinedOutput(); err != nil {
		return "broken", "the mutated code does not compile:\n" + string(out)
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-short", "-count=1", "-run", m.Run, m.Package)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		if strings.Contains(out.String(), "[no tests to run]") || strings.Contains(out.String(), "testing: warning: no tests to run") {
			return "broken", fmt.Sprintf("line %d of the list: -run %q matches no test in %s", m.Line, m.Run, m.Package)
		}
		return "survived", ""
	case errors.As(err, &exit):
		return "killed", ""
	}
	return "broken", err.Error()
}

// parse reads the list: blocks of "key: value" lines, one block a mutant,
// blank lines between blocks, "#" lines are comments. The value of from and
// to is everything after "from: " (tabs included).
func parse(path string) ([]mutant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		out []mutant
		cur *mutant
		n   int
	)
	flush := func() error {
		if cur == nil {
			return nil
		}
		if cur.Name == "" || cur.File == "" || cur.From == "" || cur.Package == "" || cur.Run == "" {
			return fmt.Errorf("%s: the mutant at line %d needs mutant, file, from, to and test (test: ./pkg/ RUN-PATTERN)", path, cur.Line)
		}
		if slices.ContainsFunc(out, func(o mutant) bool { return o.Name == cur.Name }) {
			return fmt.Errorf("%s: two mutants are named %q", path, cur.Name)
		}
		out = append(out, *cur)
		cur = nil
		return nil
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		key, val, ok := strings.Cut(line, ": ")
		if !ok {
			key, val, ok = strings.Cut(line, ":")
		}
		if !ok {
			return nil, fmt.Errorf("%s:%d: want \"key: value\", got %q", path, n, line)
		}
		if cur == nil {
			cur = &mutant{Line: n}
		}
		switch key {
		case "mutant":
			cur.Name = val
		case "file":
			cur.File = val
		case "from":
			cur.From = val
		case "to":
			cur.To = val
		case "test":
			pkg, pattern, ok := strings.Cut(val, " ")
			if !ok {
				return nil, fmt.Errorf("%s:%d: test takes a package and a -run pattern: test: ./internal/ledger/ TestX", path, n)
			}
			cur.Package, cur.Run = pkg, strings.TrimSpace(pattern)
		default:
			return nil, fmt.Errorf("%s:%d: unknown key %q (mutant, file, from, to, test)", path, n, key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}
