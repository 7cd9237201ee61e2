package artifacts

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// recordSyncs replaces the directory fsync for one test and returns the
// directories synced so far.
func recordSyncs(t *testing.T) func() []string {
	t.Helper()
	var synced []string
	prev := syncDirFn
	syncDirFn = func(dir string) error {
		synced = append(synced, filepath.Clean(dir))
		return prev(dir)
	}
	t.Cleanup(func() { syncDirFn = prev })
	return func() []string { return synced }
}

// Every directory WriteFile creates for a file has its parent fsynced, and
// the file's own directory is fsynced after the rename: a crash keeps the
// whole path, not only the file's bytes.
func TestCreatedDirectoriesHaveTheirParentsSynced(t *testing.T) {
	root := t.TempDir()
	synced := recordSyncs(t)
	dir := EpisodeDir(filepath.Join(root, "artifacts"), "weekly-video", "2026-W32-0")
	if _, err := WriteFile(filepath.Join(dir, "plan.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	created := []string{
		filepath.Join(root, "artifacts"),
		filepath.Join(root, "artifacts", "weekly-video"),
		dir,
	}
	for _, d := range created {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Fatalf("%s was not created: %v", d, err)
		}
		if !slices.Contains(synced(), filepath.Dir(d)) {
			t.Errorf("the parent of created directory %s was not synced (synced: %v)", d, synced())
		}
	}
	if !slices.Contains(synced(), dir) {
		t.Errorf("the file's directory %s was not synced after the rename (synced: %v)", dir, synced())
	}
	// Into the directory that now exists, only the file's directory is
	// synced: nothing was created above it.
	before := len(synced())
	if _, err := WriteFile(filepath.Join(dir, "manifest.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if got := synced()[before:]; !slices.Equal(got, []string{dir}) {
		t.Fatalf("second file synced %v, want only %s", got, dir)
	}
}

func TestMkdirAllRefusesAFileInThePath(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(filepath.Join(file, "sub")); err == nil {
		t.Fatal("MkdirAll through a file succeeded")
	}
}
