package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBadCommandLines: a bad command line exits 2 and names what to give,
// before anything connects.
func TestBadCommandLines(t *testing.T) {
	full := []string{"--temporal-address", "127.0.0.1:1", "--task-queue", "q", "--vendor-url", "http://127.0.0.1:1"}
	env := func(k string) string {
		if k == "ALLOT_VENDOR_API_KEY" {
			return "k"
		}
		return ""
	}
	for _, c := range []struct {
		args []string
		env  func(string) string
		want string
	}{
		{[]string{"--task-queue", "q"}, env, "give --temporal-address, --task-queue and --vendor-url"},
		{append(full, "--submit", ""), env, "needs a submit activity"},
		{append(full, "--timeout", "0s"), env, "--timeout must be positive"},
		{append(full, "extra"), env, `unexpected argument "extra"`},
		{full, func(string) string { return "" }, "ALLOT_VENDOR_API_KEY"},
		{[]string{"--temporal-address", "127.0.0.1:1", "--task-queue", "q", "--vendor-url", "ftp://x"}, env, "scheme must be http or https"},
	} {
		var stderr bytes.Buffer
		if code := run(c.args, c.env, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("activityvendor %s: exit %d, %q; want 2 and %q", strings.Join(c.args, " "), code, stderr.String(), c.want)
		}
	}
}
