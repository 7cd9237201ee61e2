//go:build !linux

package ledger

// onReadOnlyMedia is only known on Linux; elsewhere a read-only open is
// always mode=ro (openSQLiteReadOnly), which fails where SQLite cannot
// create the files a WAL database needs.
func onReadOnlyMedia(string) bool { return false }
