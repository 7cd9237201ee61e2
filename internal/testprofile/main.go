// Command testprofile reads `go test -json` on its standard input and
// prints what a plain `go test` prints (a line per package, and the whole
// output of a test that failed or of a package that did not build), then
// where the time went: the slowest packages and the slowest tests. .ci/run
// pipes its test phases through it, so that every CI run profiles itself
// (issue 39: "which packages, which tests").
//
//	go test -json ./... | go run ./internal/testprofile
//	go test -json ./... | go run ./internal/testprofile -top 30
//
// Exit status: 1 when a test or a package failed, or the input held no test
// result at all (go test's own status is the pipeline's, with pipefail);
// 0 otherwise.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// event is one line of test2json's output (go doc test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string
}

func main() {
	top := flag.Int("top", 15, "how many of the slowest packages and tests to list")
	flag.Parse()
	p := newProfile(os.Stdout)
	if err := p.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testprofile:", err)
		os.Exit(1)
	}
	p.summary(*top)
	if p.failed || p.results == 0 {
		os.Exit(1)
	}
}

// profile follows one go test run.
type profile struct {
	out     io.Writer
	output  map[string][]string // by package and test: their lines so far
	tests   []timed             // every top-level test that ended
	pkgs    []timed             // every package that ended
	failed  bool
	results int
}

type timed struct {
	name    string
	elapsed time.Duration
}

func newProfile(out io.Writer) *profile {
	return &profile{out: out, output: map[string][]string{}}
}

func (p *profile) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not an event (go vet's or the linker's words, say): as is.
			fmt.Fprintln(p.out, string(line))
			continue
		}
		p.event(e)
	}
	return sc.Err()
}

func (p *profile) event(e event) {
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "build-output":
		fmt.Fprint(p.out, e.Output)
	case "build-fail":
		p.failed = true
	case "output":
		p.output[key] = append(p.output[key], e.Output)
	case "pass", "fail", "skip":
		p.results++
		lines := p.output[key]
		delete(p.output, key)
		d := time.Duration(e.Elapsed * float64(time.Second))
		if e.Test == "" {
			// The package's end: go test's own summary is its last
			// output line ("ok  \tallot/x\t1.2s"); a failing package's
			// whole output is shown, for a failure outside any test.
			if e.Action == "fail" {
				p.failed = true
				// A test the package's end cut short (a panic, a
				// timeout) never ended on its own: its output first.
				var cut []string
				for k := range p.output {
					if strings.HasPrefix(k, e.Package+"\x00") {
						cut = append(cut, k)
					}
				}
				slices.Sort(cut)
				for _, k := range cut {
					fmt.Fprint(p.out, strings.Join(p.output[k], ""))
					delete(p.output, k)
				}
				fmt.Fprint(p.out, strings.Join(lines, ""))
			} else if len(lines) > 0 {
				fmt.Fprint(p.out, lines[len(lines)-1])
			}
			p.pkgs = append(p.pkgs, timed{e.Package, d})
			return
		}
		if e.Action == "fail" {
			p.failed = true
			fmt.Fprint(p.out, strings.Join(lines, ""))
		}
		if !strings.Contains(e.Test, "/") {
			p.tests = append(p.tests, timed{e.Package + " " + e.Test, d})
		}
	}
}

// summary prints the slowest packages and tests.
func (p *profile) summary(top int) {
	for _, l := range []struct {
		what string
		ts   []timed
	}{{"packages", p.pkgs}, {"tests", p.tests}} {
		ts := slices.Clone(l.ts)
		slices.SortStableFunc(ts, func(a, b timed) int { return int(b.elapsed - a.elapsed) })
		var sum time.Duration
		for _, t := range ts {
			sum += t.elapsed
		}
		fmt.Fprintf(p.out, "testprofile: the %d slowest of %d %s (%s in all, summed)\n", min(top, len(ts)), len(ts), l.what, sum.Round(time.Second))
		for _, t := range ts[:min(top, len(ts))] {
			fmt.Fprintf(p.out, "  %8s  %s\n", t.elapsed.Round(100*time.Millisecond), t.name)
		}
	}
}
