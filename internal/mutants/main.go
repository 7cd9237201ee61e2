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
//	go run ./internal/mutants -changed-since main  # those of files changed since main
//
// A mutant never touches the tree: its Go file is replaced through go's
// -overlay (any other file, which tests read at run time, is written into
// a copy of the tree the tests run in), and only the named tests run
// (-short, as the list's tests are chosen to). Most mutants share a test
// binary: a schema (schema.go) carries all the mutants of one test package
// whose lines can become a switch, and each runs with its switch set;
// the rest are built one by one (-schemata=false builds every mutant on
// its own). So mutants run side by side (-j, default 2) and the tree
// stays as it is, whatever stops the run.
//
// Exit status: 0 every mutant killed; 1 a mutant survived, or an entry no
// longer matches the code (its line is gone or not unique) or does not
// compile, which would make its kill mean nothing.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	jobs := flag.Int("j", 2, "mutants built and run at once")
	since := flag.String("changed-since", "", "only the mutants of files changed since this commit (committed or not)")
	schemata := flag.Bool("schemata", true, "build one test binary per test package carrying all its mutants that can be switched (schema.go); false builds one per mutant")
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
	if *since != "" {
		changed, err := changedFiles(*since)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mutants:", err)
			os.Exit(1)
		}
		ms = slices.DeleteFunc(ms, func(m mutant) bool { return !changed[filepath.Clean(m.File)] })
		fmt.Printf("mutants: %d of the list's mutants are of files changed since %s\n", len(ms), *since)
	}
	if *list {
		for _, m := range ms {
			fmt.Println(m.Name)
		}
		return
	}
	if *jobs < 1 {
		fmt.Fprintf(os.Stderr, "mutants: -j %d: give 1 or more\n", *jobs)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	work, err := os.MkdirTemp("", "allot-mutants-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(work)

	var (
		mu                        sync.Mutex
		done                      int
		survived, broken, stopped []string
		spent                     = map[string]*packageTime{}
	)
	packageSpent := func(pkg string) *packageTime {
		pt := spent[pkg]
		if pt == nil {
			pt = &packageTime{pkg: pkg}
			spent[pkg] = pt
		}
		return pt
	}
	plan := map[int]*schema{}
	if *schemata {
		plan = buildSchemata(ctx, ms, work, *jobs)
		for _, s := range plan {
			packageSpent(s.pkg).build += s.build
			s.build = 0 // counted once
		}
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range *jobs {
		wg.Go(func() {
			for i := range next {
				m := ms[i]
				o, how := runPlanned(ctx, i, m, plan[i], work)
				verdict, detail := o.verdict, o.detail
				mu.Lock()
				done++
				fmt.Printf("[%d/%d] %-8s %s (%s, %s %s, tests %s)\n", done, len(ms), verdict, m.Name, m.File, how, o.build.Round(time.Second), o.tests.Round(time.Second))
				pt := packageSpent(m.Package)
				pt.mutants++
				pt.build += o.build
				pt.tests += o.tests
				switch verdict {
				case "survived":
					survived = append(survived, m.Name)
				case "broken":
					broken = append(broken, m.Name)
					fmt.Println("    " + strings.ReplaceAll(strings.TrimSpace(detail), "\n", "\n    "))
				case "stopped":
					stopped = append(stopped, m.Name)
				}
				mu.Unlock()
			}
		})
	}
	for i := range ms {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		fmt.Fprintf(os.Stderr, "mutants: interrupted after %d of %d (the tree was never changed)\n", done-len(stopped), len(ms))
		os.Exit(1)
	}
	printProfile(spent)
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

// changedFiles are the files that differ between since and the working
// tree (committed or not), and the files git does not track yet.
func changedFiles(since string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, args := range [][]string{{"diff", "--name-only", since}, {"ls-files", "--others", "--exclude-standard"}} {
		b, err := exec.Command("git", args...).Output()
		if err != nil {
			return nil, fmt.Errorf("git %s: %w: give a commit git knows, e.g. -changed-since HEAD~1", strings.Join(args, " "), err)
		}
		for f := range strings.Lines(string(b)) {
			if f = strings.TrimSpace(f); f != "" {
				out[filepath.Clean(f)] = true
			}
		}
	}
	return out, nil
}

// run builds m's package's test binary with the mutated file in its place
// (an overlay: the tree is never written) and runs the named tests:
// "killed" (they failed), "survived" (they passed), "broken" (the entry
// does not match the code, the mutated code does not compile, or the
// pattern names no test) or "stopped" (the run was interrupted).
func run(ctx context.Context, m mutant, work string) outcome {
	loc, why := locate(m)
	if why != "" {
		return outcome{verdict: "broken", detail: why}
	}
	var o outcome
	lines := slices.Clone(loc.lines)
	lines[loc.at] = m.To + "\n"
	dir, err := os.MkdirTemp(work, "mutant-")
	if err != nil {
		return o.is("broken", err.Error())
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "test.bin")
	mutated := []byte(strings.Join(lines, ""))
	var build *exec.Cmd
	runDir := m.Package
	if filepath.Ext(m.File) == ".go" {
		build, err = overlayBuild(ctx, dir, m, mutated, bin)
	} else {
		// A file the tests read at run time (alert rules, say) is read
		// from disk, where no overlay reaches: the test binary, built
		// from the tree as it is (from the cache), runs in a copy of the
		// tree with the mutated file written into it.
		build = exec.CommandContext(ctx, "go", "test", "-c", noDWARF, "-o", bin, m.Package)
		tree := filepath.Join(dir, "tree")
		err = copyTree(tree)
		if err == nil {
			err = os.WriteFile(filepath.Join(tree, m.File), mutated, 0o644)
		}
		runDir = filepath.Join(tree, m.Package)
	}
	if err != nil {
		return o.is("broken", err.Error())
	}
	// Compiled first, so that a mutant that does not build is not taken
	// for a killed one.
	started := time.Now()
	built, err := build.CombinedOutput()
	o.build = time.Since(started)
	if err != nil {
		if ctx.Err() != nil {
			return o.is("stopped", "")
		}
		return o.is("broken", "the mutated code does not compile:\n"+string(built))
	}
	return runTests(ctx, m, o, bin, runDir, nil)
}

// runPlanned runs mutant number i: in its schema's test binary with its
// switch set when it has one (how is "schema"), else built on its own
// ("build").
func runPlanned(ctx context.Context, i int, m mutant, s *schema, work string) (outcome, string) {
	if s == nil {
		return run(ctx, m, work), "build"
	}
	return runTests(ctx, m, outcome{}, s.bin, m.Package, []string{schemaEnv + "=" + strconv.Itoa(i)}), "schema"
}

// runTests runs m's named tests in bin, in dir, with env added to the
// environment, and gives the verdict.
func runTests(ctx context.Context, m mutant, o outcome, bin, dir string, env []string) outcome {
	if _, err := os.Stat(bin); err != nil {
		return o.is("broken", fmt.Sprintf("line %d of the list: package %s has no tests", m.Line, m.Package))
	}
	// As go test runs it: in the package's directory, -short (the list's
	// tests run there), go test's default timeout; -failfast, as the first
	// failing test kills the mutant.
	cmd := exec.CommandContext(ctx, bin, "-test.short", "-test.count=1", "-test.failfast", "-test.timeout=10m", "-test.run", m.Run)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	started := time.Now()
	err := cmd.Run()
	o.tests = time.Since(started)
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return o.is("stopped", "")
	case err == nil:
		if strings.Contains(out.String(), "testing: warning: no tests to run") {
			return o.is("broken", fmt.Sprintf("line %d of the list: -run %q matches no test in %s", m.Line, m.Run, m.Package))
		}
		return o.is("survived", "")
	case errors.As(err, &exit):
		return o.is("killed", "")
	}
	return o.is("broken", err.Error())
}

// noDWARF links a mutant's test binary without debug information: most of
// a mutant's time is the link, and this cut it by about a fifth (./app/'s
// test binary: 16.3 s to 12.7 s); a failing test still prints its file and
// line, which come from the binary's line table, not from DWARF.
const noDWARF = "-ldflags=-w"

// outcome is a mutant's verdict, with why when it is broken, and where its
// time went: building its test binary and running the named tests.
type outcome struct {
	verdict, detail string
	build, tests    time.Duration
}

// is sets o's verdict and detail and returns o.
func (o outcome) is(verdict, detail string) outcome {
	o.verdict, o.detail = verdict, detail
	return o
}

// packageTime is the time the mutants of one test package took.
type packageTime struct {
	pkg          string
	mutants      int
	build, tests time.Duration
}

// printProfile prints, per test package, the mutants' build and test
// time, the most first: where a run of the list spends its time (the
// sums of all jobs, so they exceed the wall time with -j 2).
func printProfile(spent map[string]*packageTime) {
	var ps []*packageTime
	var build, tests time.Duration
	for _, p := range spent {
		ps = append(ps, p)
		build += p.build
		tests += p.tests
	}
	slices.SortFunc(ps, func(a, b *packageTime) int { return int((b.build + b.tests) - (a.build + a.tests)) })
	fmt.Printf("mutants: time per test package (summed over the jobs): build %s, tests %s\n", build.Round(time.Second), tests.Round(time.Second))
	fmt.Printf("  %-34s %7s %9s %9s\n", "package", "mutants", "build", "tests")
	for _, p := range ps {
		fmt.Printf("  %-34s %7d %9s %9s\n", p.pkg, p.mutants, p.build.Round(time.Second), p.tests.Round(time.Second))
	}
}

// overlayBuild writes the mutated Go file and an overlay replacing m.File
// with it into dir, and returns the command that builds the test binary
// bin through that overlay.
func overlayBuild(ctx context.Context, dir string, m mutant, mutated []byte, bin string) (*exec.Cmd, error) {
	file, err := filepath.Abs(m.File)
	if err != nil {
		return nil, err
	}
	to := filepath.Join(dir, filepath.Base(m.File))
	if err := os.WriteFile(to, mutated, 0o644); err != nil {
		return nil, err
	}
	overlay, err := writeOverlay(dir, map[string]string{file: to})
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, "go", "test", "-c", noDWARF, unoptimized(m.File), "-overlay", overlay, "-o", bin, m.Package), nil
}

// writeOverlay writes go's -overlay file, replacing each file (an
// absolute path) with its mutated copy, into dir, and returns its path.
func writeOverlay(dir string, replace map[string]string) (string, error) {
	ov, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, ov, 0o644)
}

// unoptimized compiles the mutated file's package without optimizations
// or inlining (-N -l), the rest of the binary as always: the compiler's
// back end is much of a mutant's build (./internal/ledger/'s test binary:
// 5.3 s to 4.4 s), and without inlining the package exports no function
// bodies, so the packages that import it in the test binary are not
// compiled again for each of its mutants. The mutated code means the same;
// only its speed differs.
func unoptimized(file string) string {
	return "-gcflags=./" + filepath.ToSlash(filepath.Dir(file)) + "=-N -l"
}

// copyTree copies the files git knows of (tracked, or new and not
// ignored) into dir, as they are in the working tree.
func copyTree(dir string) error {
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		info, err := os.Lstat(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted and not yet committed
		}
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		to := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(to, b, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
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
