package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"allot/app"
	"allot/workflows"
)

// Without operator tokens, a non-loopback --addr is a usage error, found before the ledger is opened or Temporal dialled (the
// ledger here does not exist, which would fail with exit 1).
func TestConsoleRefusesANonLoopbackAddr(t *testing.T) {
	missing := "sqlite:" + filepath.Join(t.TempDir(), "none.db")
	for _, addr := range []string{"0.0.0.0:8090", ":8090", "192.0.2.1:8090"} {
		code, _, stderr := run(t, "console", "--ledger", missing, "--addr", addr)
		if code != exitUsage || !strings.Contains(stderr, "--addr") || !strings.Contains(stderr, "not a loopback address") || !strings.Contains(stderr, "starter console --addr 127.0.0.1:8090") {
			t.Errorf("console --addr %s = exit %d\n%s\nwant exit %d naming --addr, that it is not loopback, and the command", addr, code, stderr, exitUsage)
		}
	}
	code, _, stderr := run(t, "console", "--ledger", missing, "--web-ui", "http://user:secret@ui.example")
	if code != exitUsage || !strings.Contains(stderr, "--web-ui") || strings.Contains(stderr, "secret") {
		t.Errorf("console --web-ui with a password = exit %d\n%s", code, stderr)
	}
}

// A missing token file is a usage error whose remedy, run as printed,
// makes it; the page then starts with it on any address (it fails later,
// on the ledger that is not there), and operator-token prints no token.
func TestConsoleTokenFileRemedyRunsAsPrinted(t *testing.T) {
	dir := t.TempDir()
	missing := "sqlite:" + filepath.Join(dir, "none.db")
	tokens := filepath.Join(dir, "console-tokens")
	code, _, stderr := run(t, "console", "--ledger", missing, "--addr", "0.0.0.0:0", "--token-file", tokens)
	m := regexp.MustCompile("`(starter operator-token [^`]*)`").FindStringSubmatch(stderr)
	if code != exitUsage || m == nil {
		t.Fatalf("console with a missing token file = exit %d\n%s\nwant a usage error with the operator-token command", code, stderr)
	}
	args, err := workflows.SplitCommand(strings.Replace(m[1], "'NAME'", "alice", 1))
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, args[1:]...)
	if code != 0 || !strings.Contains(stdout, "added operator alice to "+tokens) {
		t.Fatalf("`%s` = exit %d\n%s%s", m[1], code, stdout, stderr)
	}
	data, err := os.ReadFile(tokens)
	if err != nil {
		t.Fatal(err)
	}
	_, token, _ := strings.Cut(strings.TrimSpace(string(data)), ":")
	if len(token) < 32 || strings.Contains(stdout+stderr, token) {
		t.Fatalf("the token file holds %q; the command printed it or made it short", data)
	}
	code, _, stderr = run(t, "console", "--ledger", missing, "--addr", "0.0.0.0:0", "--token-file", tokens)
	if code == exitUsage || strings.Contains(stderr, "loopback") || strings.Contains(stderr, token) {
		t.Fatalf("console with the token file on 0.0.0.0 = exit %d\n%s\nwant it past the address check (failing on the missing ledger)", code, stderr)
	}
	t.Setenv(app.EnvConsoleTokenFile, tokens)
	code, _, stderr = run(t, "console", "--ledger", missing, "--addr", "0.0.0.0:0")
	if code == exitUsage || strings.Contains(stderr, "loopback") {
		t.Fatalf("console with %s set = exit %d\n%s\nwant the token file read from it", app.EnvConsoleTokenFile, code, stderr)
	}
}

// --tls-cert and --tls-key go together and must load: refused before the
// ledger is opened.
func TestConsoleRefusesHalfOrBadTLSFlags(t *testing.T) {
	dir := t.TempDir()
	missing := "sqlite:" + filepath.Join(dir, "none.db")
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", junk}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-key", junk}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", junk, "--tls-key", junk}, "do not load as a PEM certificate"},
	} {
		code, _, stderr := run(t, append([]string{"console", "--ledger", missing}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "none.db") {
			t.Errorf("console %v = exit %d\n%s\nwant a usage error saying %q before the ledger is opened", tc.args, code, stderr, tc.want)
		}
	}
}

// --allow-host takes a host name, refused with an example otherwise,
// before the ledger is opened.
func TestConsoleRefusesAnAllowHostThatIsNotAName(t *testing.T) {
	missing := "sqlite:" + filepath.Join(t.TempDir(), "none.db")
	code, _, stderr := run(t, "console", "--ledger", missing, "--allow-host", "http://allot.example.com:8090")
	if code != exitUsage || !strings.Contains(stderr, "--allow-host allot.example.com") || strings.Contains(stderr, "none.db") {
		t.Errorf("console --allow-host with a URL = exit %d\n%s\nwant a usage error with an example before the ledger is opened", code, stderr)
	}
}
