package allot

import (
	"os/user"
	"strings"
	"testing"
)

func TestActorFallsBackToTheOSUser(t *testing.T) {
	t.Setenv("USER", "")
	u, err := user.Current()
	if err != nil || u.Username == "" {
		t.Skipf("the operating system names no user here: %v", err)
	}
	got, err := Actor("")
	if err != nil || got != u.Username {
		t.Fatalf("Actor with $USER unset = %q, %v; want the OS user %q", got, err, u.Username)
	}
	t.Setenv("USER", "maria")
	if got, err := Actor(""); err != nil || got != "maria" {
		t.Fatalf("Actor with $USER = %q, %v; want maria", got, err)
	}
	if got, err := Actor(" ops-bot "); err != nil || got != "ops-bot" {
		t.Fatalf("Actor(--by) = %q, %v; want ops-bot", got, err)
	}
	if _, err := Actor(strings.Repeat("x", MaxTextLen+1)); err == nil || !strings.Contains(err.Error(), "--by") {
		t.Fatalf("a long --by: %v, want an error naming --by", err)
	}
}

func TestCheckTextBounds(t *testing.T) {
	if err := CheckText("--reason", strings.Repeat("é", MaxTextLen)); err != nil {
		t.Fatalf("%d characters refused: %v", MaxTextLen, err)
	}
	err := CheckText("--reason", strings.Repeat("a", 100000))
	for _, want := range []string{"--reason", "100000 characters", "1000"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("a 100,000-character reason: %v, want it to name %q", err, want)
		}
	}
	if err := CheckText("--note", "line\tone\nline two"); err != nil {
		t.Fatalf("tabs and newlines refused: %v", err)
	}
	for _, bad := range []string{"bell\a", "esc\x1b[31m", "nul\x00", string([]byte{0xff})} {
		if err := CheckText("--note", bad); err == nil || !strings.Contains(err.Error(), "--note") {
			t.Errorf("CheckText(%q) = %v, want an error naming --note", bad, err)
		}
	}
}
