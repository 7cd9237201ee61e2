// Package artifacts writes episode files durably: to a temporary name, fsynced,
// renamed into place, and the directory fsynced, so a file that exists is a
// file that is whole (invariant 9 of docs/design.md). Directories it creates
// for a file have their parents fsynced too, so the file's directory itself
// survives a crash.
package artifacts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// EpisodeDir is where an episode's artifacts live under root:
// <root>/<pipeline>/<episode>.
func EpisodeDir(root, pipeline, episodeID string) string {
	return filepath.Join(root, pipeline, episodeID)
}

// WriteFile writes data to path atomically and durably and returns its sha256.
func WriteFile(path string, data []byte) (string, error) {
	return Write(path, bytes.NewReader(data))
}

// HashMismatchError says downloaded bytes are not what their source promised.
type HashMismatchError struct {
	Path, Want, Got string
}

func (e *HashMismatchError) Error() string {
	return fmt.Sprintf("sha256 of %s is %s, expected %s", filepath.Base(e.Path), e.Got, e.Want)
}

// Write copies r to path atomically and durably and returns the hex sha256 of
// what was written. On error nothing is left at path that was not there before.
func Write(path string, r io.Reader) (string, error) {
	return WriteVerified(path, r, "")
}

// WriteVerified is Write that, when wantSHA256 is not empty, refuses to put
// the file in place unless its sha256 matches; an existing file at path is
// then left untouched.
func WriteVerified(path string, r io.Reader, wantSHA256 string) (sum string, err error) {
	dir := filepath.Dir(path)
	if err := MkdirAll(dir); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("create temporary artifact: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	if _, err = io.Copy(io.MultiWriter(tmp, h), r); err != nil {
		return "", fmt.Errorf("write artifact %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return "", fmt.Errorf("fsync artifact %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return "", fmt.Errorf("close artifact %s: %w", path, err)
	}
	sum = hex.EncodeToString(h.Sum(nil))
	if wantSHA256 != "" && !strings.EqualFold(sum, wantSHA256) {
		err = &HashMismatchError{Path: path, Want: wantSHA256, Got: sum}
		return "", err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("rename artifact into %s: %w", path, err)
	}
	if err = syncDirFn(dir); err != nil {
		return "", err
	}
	return sum, nil
}

// MkdirAll creates dir and any missing parents, as os.MkdirAll does, and
// then fsyncs the parent of every directory it created: os.MkdirAll does
// not, and a directory entry that was never synced may vanish in a crash,
// taking a synced file with it.
func MkdirAll(dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("create artifact directory %s: %s is not a directory", dir, d)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("create artifact directory %s: %w", dir, err)
		}
		created = append(created, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if len(created) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create artifact directory: %w", err)
	}
	// The innermost first: each created directory's entry is in its parent.
	for _, d := range created {
		if err := syncDirFn(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// SHA256File returns the hex sha256 of the file at path.
func SHA256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// syncDirFn fsyncs a directory; tests replace it to see which were synced.
var syncDirFn = syncDir

// syncDir makes the rename (or a new directory entry) itself durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open artifact directory for fsync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync artifact directory %s: %w", dir, err)
	}
	return nil
}
