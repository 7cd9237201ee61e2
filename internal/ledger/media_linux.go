package ledger

import "golang.org/x/sys/unix"

// onReadOnlyMedia: dir is on a filesystem mounted read-only, where no
// process can write a file (openSQLiteReadOnly).
func onReadOnlyMedia(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Flags&unix.ST_RDONLY != 0
}
