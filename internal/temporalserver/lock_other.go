//go:build !unix

package temporalserver

import (
	"fmt"
	"os"
)

// lockFile only creates path here: there is no cross-process lock on this
// platform (the in-process guard in openStore still applies).
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("temporalserver: lock file: %w", err)
	}
	return f, nil
}
