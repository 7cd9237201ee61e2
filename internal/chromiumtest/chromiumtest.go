//go:build unix

// Package chromiumtest runs Debian's headless Chromium for the browser
// tests (the Web UI's and the operator page's): it finds the binary (a
// test skips without it, and fails when CI is set), starts it with a
// fresh profile in its own process group, kills what it left behind, and
// checks what it rendered.
package chromiumtest

import (
	"bytes"
	"context"
	"html"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"allot/internal/cleanenv"
)

// Bin is the Chromium to run: $ALLOT_CHROMIUM, /usr/bin/chromium or
// chromium on the PATH. Without one the test is skipped, or fails when CI
// is set (CI installs it).
func Bin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ALLOT_CHROMIUM"); p != "" {
		bin, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("ALLOT_CHROMIUM=%q: %v", p, err)
		}
		return bin
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium"} {
		if bin, err := exec.LookPath(name); err == nil {
			return bin
		}
	}
	const msg = "no Chromium: set ALLOT_CHROMIUM, or install it (apt-get update && apt-get install -y chromium)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; CI is set, so this test must run")
	}
	t.Skip(msg)
	return ""
}

// Command is headless Chromium with args, everything of its run (profile,
// config, caches, crash database) under dir, in a process group of its
// own that the context's end kills whole. The caller sets its outputs
// (files, not pipes: a leftover child holding a pipe would keep Wait from
// returning) and, after Wait, calls Kill(cmd, dir).
func Command(ctx context.Context, bin, dir string, args ...string) *exec.Cmd {
	full := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--disable-crash-reporter", "--disable-breakpad",
		"--user-data-dir=" + filepath.Join(dir, "profile"),
	}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	// Chromium keeps its crash database and caches under the XDG
	// directories, not the profile: point them into dir too.
	cmd.Env = cleanenv.Environ(
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Kill kills whatever a started Command left behind: its process group
// (renderers, zygotes, the wrapper's children) and the helpers that left
// the group (the crash handler starts its own session), found by dir on
// their command line.
func Kill(cmd *exec.Cmd, dir string) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	killByArgument(dir)
}

// killByArgument kills every process whose command line contains arg (a
// unique temporary path), by PID. It reads /proc, so elsewhere than on
// Linux it does nothing.
func killByArgument(arg string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(arg)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

var (
	invisible = regexp.MustCompile(`(?is)<head\b.*?</head>|<script\b.*?</script>|<style\b.*?</style>|<template\b.*?</template>`)
	tag       = regexp.MustCompile(`(?s)<[^>]*>`)
)

// VisibleText is the text of a dumped DOM as a reader sees it: no head,
// scripts, styles or markup (attributes, hrefs), entities decoded, runs of
// whitespace as one space.
func VisibleText(dom string) string {
	s := invisible.ReplaceAllString(dom, " ")
	s = tag.ReplaceAllString(s, " ")
	return strings.Join(strings.Fields(html.UnescapeString(s)), " ")
}

// CheckPNG asserts a screenshot is a real rendering: a PNG at least 1000
// by 500 pixels with more than a handful of colours (a blank or
// single-colour page fails).
func CheckPNG(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer func() { _ = f.Close() }()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s is no PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 500 {
		t.Errorf("screenshot is %dx%d, want at least 1000x500", b.Dx(), b.Dy())
	}
	if n := countColours(img, 64); n < 8 {
		t.Errorf("screenshot has %d distinct colours: a blank page", n)
	}
}

// countColours counts distinct colours, stopping at limit.
func countColours(img image.Image, limit int) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}

// ArtifactDir is where a test keeps files for a human to look at after it
// ends: $ALLOT_TEST_ARTIFACTS, else <tmp>/allot-test-artifacts.
func ArtifactDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("ALLOT_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "allot-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
