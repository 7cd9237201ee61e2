package ledger

// One ledger per process (docs/design.md, "How allot opens a SQLite
// ledger"): a process that opens a SQLite ledger it already has open gets
// the connections it has, not new ones. The devserver's worker and its
// operator page, or a command run in-process next to a worker, then hold
// the file once, with one writer connection queuing the process's writes
// in Go rather than at SQLite's file lock.

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
)

// openFiles are the SQLite ledgers this process has open, by file.
var openFiles = struct {
	sync.Mutex
	m map[string]*openFile
}{m: map[string]*openFile{}}

// openFile is one SQLite file's connections: the read-write ones if an
// open that writes holds them, and the read-only ones of the opens that
// came before any open that writes.
type openFile struct {
	rw, ro *sharedConns
}

// sharedConns are one set of connections and the handles that use them.
type sharedConns struct {
	key   string
	first *Ledger // the open that made them; its pools are shared
	refs  int
}

// fileKey names a SQLite file for openFiles: its absolute path with
// symbolic links resolved (those of its directory when it does not exist
// yet).
func fileKey(path string) (string, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		return p, true
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(d, filepath.Base(abs)), true
	}
	return abs, true
}

// sqlitePath is the file of a sqlite: URL; ok is false for other URLs.
func sqlitePath(url string) (string, bool) {
	p, ok := strings.CutPrefix(url, "sqlite:")
	return p, ok && p != ""
}

// shareOpen returns a handle on connections this process already holds on
// the file, if they serve mode: read-write ones serve any open, read-only
// ones only read-only opens. nil when there are none.
func shareOpen(key, url string, mode openMode) *Ledger {
	openFiles.Lock()
	defer openFiles.Unlock()
	f := openFiles.m[key]
	if f == nil {
		return nil
	}
	if c := f.rw; c != nil {
		return c.share(url, mode == openReadOnly)
	}
	if c := f.ro; c != nil && mode == openReadOnly {
		return c.share(url, true)
	}
	return nil
}

// register records l, just opened on the file, as the process's
// connections to it, and returns the handle to use: l itself, or, when
// another open of the same file got there first, a handle on that one's
// connections (l is then closed).
func register(key string, l *Ledger) *Ledger {
	openFiles.Lock()
	f := openFiles.m[key]
	if f == nil {
		f = &openFile{}
		openFiles.m[key] = f
	}
	var shared *Ledger
	switch {
	case f.rw != nil:
		shared = f.rw.share(l.where, l.readOnly)
	case l.readOnly && f.ro != nil:
		shared = f.ro.share(l.where, true)
	}
	if shared == nil {
		c := &sharedConns{key: key, first: l, refs: 1}
		if l.readOnly {
			f.ro = c
		} else {
			f.rw = c
		}
		l.conns = c
	}
	openFiles.Unlock()
	if shared != nil {
		shared.created = l.created
		_ = l.closePools()
		return shared
	}
	return l
}

// share is a new handle on c's connections; readOnly handles of read-write
// connections read and "write" through the read pool, which refuses
// writes (query_only), as a read-only open's own connections would.
// Called with openFiles held.
func (c *sharedConns) share(where string, readOnly bool) *Ledger {
	c.refs++
	l := *c.first
	l.where, l.readOnly, l.created, l.conns, l.closed = where, readOnly, false, c, false
	if readOnly && !c.first.readOnly {
		l.w = l.r
	}
	return &l
}

// release drops one handle on c, closing the connections with the last.
func (c *sharedConns) release() error {
	openFiles.Lock()
	c.refs--
	last := c.refs == 0
	if last {
		if f := openFiles.m[c.key]; f != nil {
			if f.rw == c {
				f.rw = nil
			}
			if f.ro == c {
				f.ro = nil
			}
			if f.rw == nil && f.ro == nil {
				delete(openFiles.m, c.key)
			}
		}
	}
	openFiles.Unlock()
	if !last {
		return nil
	}
	return c.first.closePools()
}

// closePools closes l's own connections.
func (l *Ledger) closePools() error {
	var errs []error
	if l.r != nil && l.r != l.w {
		errs = append(errs, l.r.Close())
	}
	if l.w != nil {
		// Closed last: on SQLite the last connection to close checkpoints
		// the WAL, and only the writer is allowed to.
		errs = append(errs, l.w.Close())
	}
	return errors.Join(errs...)
}
