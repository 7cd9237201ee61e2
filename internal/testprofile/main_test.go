package main

import (
	"strings"
	"testing"
)

// A run as go test -json writes it: a package that passed, one whose test
// failed, one whose test panicked, one that did not build.
const run = `{"Action":"start","Package":"allot/a"}
{"Action":"run","Package":"allot/a","Test":"TestQuick"}
{"Action":"output","Package":"allot/a","Test":"TestQuick","Output":"=== RUN   TestQuick\n"}
{"Action":"output","Package":"allot/a","Test":"TestQuick","Output":"quick's own log\n"}
{"Action":"pass","Package":"allot/a","Test":"TestQuick","Elapsed":0.5}
{"Action":"run","Package":"allot/a","Test":"TestSlow"}
{"Action":"pass","Package":"allot/a","Test":"TestSlow/sub","Elapsed":40}
{"Action":"pass","Package":"allot/a","Test":"TestSlow","Elapsed":42}
{"Action":"output","Package":"allot/a","Output":"ok  \tallot/a\t42.6s\n"}
{"Action":"pass","Package":"allot/a","Elapsed":42.6}
{"Action":"output","Package":"allot/b","Test":"TestBroken","Output":"    b_test.go:9: got 2, want 1\n"}
{"Action":"fail","Package":"allot/b","Test":"TestBroken","Elapsed":3}
{"Action":"output","Package":"allot/b","Output":"FAIL\tallot/b\t3.1s\n"}
{"Action":"fail","Package":"allot/b","Elapsed":3.1}
{"Action":"output","Package":"allot/c","Test":"TestPanics","Output":"panic: boom\n"}
{"Action":"output","Package":"allot/c","Output":"FAIL\tallot/c\t0.2s\n"}
{"Action":"fail","Package":"allot/c","Elapsed":0.2}
{"ImportPath":"allot/d [allot/d.test]","Action":"build-output","Output":"d.go:3:1: syntax error\n"}
{"ImportPath":"allot/d [allot/d.test]","Action":"build-fail"}
not json: printed as is
`

func TestProfilePrintsWhatGoTestPrintsAndTheSlowest(t *testing.T) {
	var out strings.Builder
	p := newProfile(&out)
	if err := p.read(strings.NewReader(run)); err != nil {
		t.Fatal(err)
	}
	p.summary(2)
	got := out.String()
	for _, want := range []string{
		"ok  \tallot/a\t42.6s\n",
		"b_test.go:9: got 2, want 1\n", "FAIL\tallot/b\t3.1s\n",
		"panic: boom\n", "FAIL\tallot/c\t0.2s\n",
		"d.go:3:1: syntax error\n",
		"not json: printed as is\n",
		"the 2 slowest of 3 packages",
		"the 2 slowest of 3 tests",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	// A passing test's output is not shown; a subtest is not listed.
	for _, unwanted := range []string{"quick's own log", "TestSlow/sub", "TestQuick"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("output shows %q:\n%s", unwanted, got)
		}
	}
	tests := got[strings.Index(got, "slowest of 3 tests"):]
	if i, j := strings.Index(tests, "allot/a TestSlow"), strings.Index(tests, "allot/b TestBroken"); i < 0 || j < 0 || i > j {
		t.Errorf("tests not slowest first:\n%s", tests)
	}
	if !p.failed {
		t.Error("a run with failures is not marked failed")
	}
}

func TestProfileOfAPassingRunIsNoFailure(t *testing.T) {
	p := newProfile(&strings.Builder{})
	if err := p.read(strings.NewReader(`{"Action":"pass","Package":"allot/a","Elapsed":1}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if p.failed || p.results != 1 {
		t.Errorf("failed %v, results %d; want false, 1", p.failed, p.results)
	}
}
