package temporalserver

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/config"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"google.golang.org/protobuf/types/known/durationpb"
	_ "modernc.org/sqlite" // driver "sqlite", only to inspect a data file before the server opens it
)

// The server's SQLite plugin keeps one connection per DSN in a process-wide
// pool that it never closes (see its conn_pool.go). Consequences:
//   - the DSN of a data file must be the same on every start, so a restart
//     in the same process reuses that pooled connection instead of piling up
//     new ones; that connection is idle between servers and holds no lock;
//   - if the file is deleted while the process runs, the pooled connection
//     still points at the deleted file, so a later Start must refuse rather
//     than write into it.
var (
	storesMu     sync.Mutex
	activeStores = map[string]bool{} // files used by a running Server
	pooledStores = map[string]bool{} // files the plugin has a pooled connection to
	memoryDBs    atomic.Uint64
)

// store is the SQLite database behind one Server.
type store struct {
	path string   // "" when in memory
	lock *os.File // DataDir/temporal.db.lock, held while the server runs
	cfg  config.SQL
}

// openStore prepares the database: in memory with a fresh name, or the file
// DataDir/temporal.db, creating the directory, and the schema when the file
// is new. An existing file's schema is left as it is.
func openStore(dataDir string) (*store, error) {
	if dataDir == "" {
		return &store{cfg: config.SQL{
			PluginName:   sqliteplugin.PluginName,
			DatabaseName: fmt.Sprintf("allot-temporal-%d-%d", os.Getpid(), memoryDBs.Add(1)),
			ConnectAttributes: map[string]string{
				"mode":  "memory",
				"cache": "shared",
			},
		}}, nil
	}

	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("temporalserver: DataDir %q: %w", dataDir, err)
	}
	path := filepath.Join(dir, DBFileName)
	if strings.ContainsAny(path, "?#%") {
		// The plugin builds a "file:" URI from the path without escaping.
		return nil, fmt.Errorf("temporalserver: DataDir %q: the path must not contain '?', '#' or '%%'", dataDir)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("temporalserver: creating DataDir: %w", err)
	}

	storesMu.Lock()
	defer storesMu.Unlock()
	if activeStores[path] {
		return nil, fmt.Errorf("temporalserver: %s is already used by a running server in this process", path)
	}

	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	s := &store{path: path, lock: lock, cfg: config.SQL{
		PluginName:        sqliteplugin.PluginName,
		DatabaseName:      path,
		ConnectAttributes: map[string]string{"mode": "rwc"},
	}}
	ok := false
	defer func() {
		if !ok {
			_ = lock.Close()
		}
	}()

	state, err := inspectFile(path)
	if err != nil {
		return nil, err
	}
	switch state {
	case fileMissing, fileEmpty:
		if state == fileMissing && pooledStores[path] {
			return nil, fmt.Errorf("temporalserver: %s was removed while this process still has it open; restart the process to start from a new file", path)
		}
		pooledStores[path] = true
		if err := sqliteschema.SetupSchema(s.cfgCopy()); err != nil {
			if state == fileMissing {
				_ = os.Remove(path)
			}
			return nil, fmt.Errorf("temporalserver: creating the schema in %s: %w", path, err)
		}
	case fileIncomplete:
		return nil, fmt.Errorf("temporalserver: %s has an incomplete Temporal schema (interrupted first start?); move it away to start afresh", path)
	case fileReady:
		// Keep the schema and the data, but forget the previous run's
		// cluster members (see clearMembership).
		if err := clearMembership(path); err != nil {
			return nil, err
		}
	}
	pooledStores[path] = true
	activeStores[path] = true
	ok = true
	return s, nil
}

// sqlConfig is the persistence configuration for the server; each caller
// gets its own copy (the plugin may write into ConnectAttributes).
func (s *store) sqlConfig() *config.SQL { return s.cfgCopy() }

func (s *store) cfgCopy() *config.SQL {
	c := s.cfg
	c.ConnectAttributes = make(map[string]string, len(s.cfg.ConnectAttributes))
	for k, v := range s.cfg.ConnectAttributes {
		c.ConnectAttributes[k] = v
	}
	return &c
}

// release marks the file free for another Start, in this process or another.
func (s *store) release() {
	if s.path == "" {
		return
	}
	storesMu.Lock()
	delete(activeStores, s.path)
	storesMu.Unlock()
	_ = s.lock.Close()
}

// createNamespace writes the namespace straight into the database before the
// server starts, so every service sees it from the first moment; an existing
// namespace is left untouched. New namespaces get the search attributes
// directly; existing ones get them through the operator service later.
func (s *store) createNamespace(name string, attrs map[string]enumspb.IndexedValueType) error {
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, name, false, attrs)
	if err != nil {
		// More attributes of one type than SQL visibility has slots: create
		// the namespace bare and let the operator service report it.
		if ns, err = sqliteschema.NewNamespaceConfig(clusterName, name, false, nil); err != nil {
			return fmt.Errorf("temporalserver: namespace %q: %w", name, err)
		}
	}
	ns.Detail.Config.Retention = durationpb.New(NamespaceRetention)
	if err := sqliteschema.CreateNamespaces(s.cfgCopy(), ns); err != nil {
		return fmt.Errorf("temporalserver: creating namespace %q: %w", name, err)
	}
	return nil
}

type fileState int

const (
	fileMissing    fileState = iota
	fileEmpty                // exists, no tables (e.g. created by hand)
	fileIncomplete           // some Temporal tables but not all
	fileReady
)

// inspectFile looks at a data file through a separate, read-only connection
// that is closed again, before the server's plugin opens it.
func inspectFile(path string) (fileState, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileMissing, nil
	}
	if err != nil {
		return 0, fmt.Errorf("temporalserver: %w", err)
	}
	if fi.IsDir() {
		return 0, fmt.Errorf("temporalserver: %s is a directory", path)
	}
	if fi.Size() == 0 {
		return fileEmpty, nil
	}

	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return 0, fmt.Errorf("temporalserver: opening %s: %w", path, err)
	}
	defer func() { _ = db.Close() }()
	var tables, known int
	err = db.QueryRow(`SELECT count(*),
		count(CASE WHEN name IN ('namespaces', 'executions', 'executions_visibility') THEN 1 END)
		FROM sqlite_master WHERE type = 'table'`).Scan(&tables, &known)
	if err != nil {
		return 0, fmt.Errorf("temporalserver: reading %s (not a SQLite database?): %w", path, err)
	}
	switch {
	case tables == 0:
		return fileEmpty, nil
	case known == 3:
		return fileReady, nil
	default:
		return fileIncomplete, nil
	}
}

// clearMembership deletes the cluster membership rows a previous run left in
// the file. Each service heartbeats its address there, and at start-up the
// membership ring (ringpop) is seeded from rows younger than 20 s. After a
// quick restart those rows name the previous run's ports, nothing answers
// there, a service's first join attempt fails, and it retries only after
// 10 s: for that long matching (say) is missing and workflow tasks are not
// dispatched. We hold the file exclusively (lockFile), so every row is stale.
func clearMembership(path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw")
	if err != nil {
		return fmt.Errorf("temporalserver: opening %s: %w", path, err)
	}
	defer func() { _ = db.Close() }()
	if _, err := db.Exec(`DELETE FROM cluster_membership`); err != nil {
		return fmt.Errorf("temporalserver: clearing stale cluster members in %s: %w", path, err)
	}
	return db.Close()
}
