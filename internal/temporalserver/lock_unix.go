//go:build unix

package temporalserver

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking lock on path (created if
// missing), so that two processes never run a server on one data file. The
// lock goes away with the returned file (or the process).
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("temporalserver: lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("temporalserver: %s is locked: another server is using this data directory", path)
		}
		return nil, fmt.Errorf("temporalserver: locking %s: %w", path, err)
	}
	return f, nil
}
