package artifacts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileIsWholeAndHashed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(EpisodeDir(dir, "weekly-video", "2026-W32-0"), "plan.json")
	data := []byte(`{"episode":"2026-W32-0"}`)
	sum, err := WriteFile(path, data)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	if sum != hex.EncodeToString(want[:]) {
		t.Fatalf("sum = %s, want %x", sum, want)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != string(data) {
		t.Fatalf("read back %q, %v", got, err)
	}
	if fileSum, _ := SHA256File(path); fileSum != sum {
		t.Fatalf("SHA256File = %s, want %s", fileSum, sum)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the artifact (no temporary files)", len(entries))
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("connection reset")
	}
	r.n--
	return copy(p, "partial"), nil
}

func TestWriteFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "video.bin")
	if _, err := WriteFile(path, []byte("old artifact")); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(path, io.MultiReader(&failingReader{n: 2})); err == nil {
		t.Fatal("Write with a failing reader succeeded")
	}
	got, _ := os.ReadFile(path)
	if string(got) != "old artifact" {
		t.Fatalf("old artifact overwritten by a failed write: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("a failed write left %d entries, want 1", len(entries))
	}
}

func TestWriteVerifiedRefusesMismatchAndKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "video-r0.bin")
	if _, err := WriteFile(path, []byte("verified result")); err != nil {
		t.Fatal(err)
	}
	good := sha256.Sum256([]byte("new result"))
	_, err := WriteVerified(path, bytes.NewReader([]byte("tampered result")), hex.EncodeToString(good[:]))
	var mismatch *HashMismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("error = %v, want *HashMismatchError", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "verified result" {
		t.Fatalf("a mismatching download overwrote the file: %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a mismatching download left %d entries", len(entries))
	}
	sum, err := WriteVerified(path, bytes.NewReader([]byte("new result")), hex.EncodeToString(good[:]))
	if err != nil || sum != hex.EncodeToString(good[:]) {
		t.Fatalf("matching download: %s, %v", sum, err)
	}
}
