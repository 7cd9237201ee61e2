package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	tlog "go.temporal.io/server/common/log"
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql" // the postgres12 plugin, for the server and the schema tool
	schemapg "go.temporal.io/server/schema/postgresql/v12"
	"go.temporal.io/server/temporal"
	sqltool "go.temporal.io/server/tools/sql"
	"google.golang.org/protobuf/types/known/durationpb"

	"allot/internal/allottest"
	"allot/internal/cleanenv"
)

// TestProductionTopology runs what docker-compose.temporal.yml describes,
// minus the containers, on this machine's PostgreSQL:
//
//   - temporal-schema: deploy/scripts/temporal-schema.sh itself, with the
//     server module's own temporal-sql-tool (this test binary, see TestMain)
//     and the versioned schemas that ship in the pinned server module;
//   - temporal: the pinned server (go.temporal.io/server) in process, its
//     config rendered from the compose service's environment through the
//     server's embedded config template (the image's), with the compose
//     file's dynamic config, checked healthy the way the compose health check
//     does;
//   - temporal-setup: the namespace with the compose file's retention and
//     allot's search attributes parsed from the service's NAME=Type command,
//     through the operator service (the temporal CLI is not available here);
//   - allot: the real worker, vendorsim and starter binaries as processes, two
//     workers on one PostgreSQL ledger, driven with `starter --json`.
//
// Its databases are fresh and uniquely named per run and dropped at the end.
func TestProductionTopology(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binaries and runs a Temporal server on PostgreSQL")
	}
	dsn := os.Getenv(envPostgresDSN)
	if dsn == "" {
		t.Skipf("set %s (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the production topology on PostgreSQL", envPostgresDSN)
	}
	began := time.Now()
	c := loadCompose(t)
	pg := newTopologyDatabases(t, dsn)
	bins := buildBinaries(t)
	t.Logf("binaries built after %s", time.Since(began).Round(time.Second))

	applySchema(t, c, pg)
	t.Logf("schemas applied after %s", time.Since(began).Round(time.Second))
	srv := startServer(t, c, pg)
	t.Logf("server healthy after %s", time.Since(began).Round(time.Second))
	topo := setUpNamespace(t, c, srv)
	topo.bins, topo.ledgerURL = bins, pg.url(pg.ledger)
	topo.startAllot(t)
	t.Logf("allot up after %s", time.Since(began).Round(time.Second))

	var scheduled int
	t.Run("schedule", func(t *testing.T) { scheduled = topo.scheduleScenario(t) })
	t.Run("backfill", topo.backfillScenario)
	t.Run("paid_episode", topo.paidScenario)
	t.Run("needs_attention", topo.attentionScenario)
	t.Run("whole_system", func(t *testing.T) { topo.wholeSystem(t, scheduled) })
	t.Logf("scenarios done after %s", time.Since(began).Round(time.Second))
}

const (
	envPostgresDSN = "ALLOT_TEST_POSTGRES_DSN"
	// topoDatabasePrefix starts the name of every database of this test:
	// <prefix><unix seconds>_<pid>_{temporal,visibility,ledger}.
	topoDatabasePrefix = "allot_topo_"
	// sqlToolName is the name this test binary answers to as the server's
	// temporal-sql-tool (see TestMain).
	sqlToolName = "temporal-sql-tool"
	// topoVendorKey is the vendor API key of the test; it must never show up
	// in a log.
	topoVendorKey = "sk-allot-topology-5be1c07e-DO-NOT-LEAK"
	// The task queues: "allot" (allot's default) for two workers sharing the
	// ledger, and a queue of its own for the worker that talks to the faulty
	// vendor.
	mainQueue      = "allot"
	attentionQueue = "allot-attention"
	// Poll intervals and deadlines.
	pollEvery      = 300 * time.Millisecond
	commandTimeout = 90 * time.Second
	waitTimeout    = 90 * time.Second
)

// TestMain lets this test binary stand in for temporal-sql-tool: started
// under that name (a symlink made by applySchema), it runs the server's own
// tool, go.temporal.io/server/tools/sql, exactly like the cmd/tools/sql main
// the admin-tools image ships, exit status included. The tool exits the
// process on a failed command, so it cannot run inside the test's process.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == sqlToolName {
		if err := sqltool.RunTool(os.Args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// ---------------------------------------------------------------------------
// PostgreSQL

// topologyDatabases are this run's databases on the local PostgreSQL.
type topologyDatabases struct {
	admin                        *url.URL // the DSN the test was given
	host, port, user, password   string
	temporal, visibility, ledger string
}

func newTopologyDatabases(t *testing.T, dsn string) *topologyDatabases {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Hostname() == "" {
		t.Fatalf("%s=%q is not a postgres://USER@HOST:PORT/DB URL: %v", envPostgresDSN, dsn, err)
	}
	pw, _ := u.User.Password()
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	prefix := fmt.Sprintf("%s%d_%d", topoDatabasePrefix, time.Now().Unix(), os.Getpid())
	db := &topologyDatabases{
		admin: u, host: u.Hostname(), port: port, user: u.User.Username(), password: pw,
		temporal: prefix + "_temporal", visibility: prefix + "_visibility", ledger: prefix + "_ledger",
	}
	ctx, cancel := allottest.Context(t, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to PostgreSQL at %s: %v", u.Redacted(), err)
	}
	defer conn.Close(ctx)
	dropAbandoned(ctx, t, conn)
	// Registered first, so it runs last: after every process and the server
	// have let go of their connections.
	t.Cleanup(func() { db.dropAll(t) })
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db.ledger}.Sanitize()); err != nil {
		t.Fatalf("create the ledger database %s: %v", db.ledger, err)
	}
	return db
}

// dropAbandoned drops the databases of runs that started more than two hours
// ago and never got to drop them: the server exits the process on a fatal
// error, and then no cleanup runs. A run that is still going is never that old.
func dropAbandoned(ctx context.Context, t *testing.T, conn *pgx.Conn) {
	t.Helper()
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", topoDatabasePrefix)
	if err != nil {
		t.Fatalf("list databases: %v", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("list databases: %v", err)
	}
	for _, name := range names {
		started, _, _ := strings.Cut(strings.TrimPrefix(name, topoDatabasePrefix), "_")
		sec, err := strconv.ParseInt(started, 10, 64)
		if err != nil || time.Since(time.Unix(sec, 0)) < 2*time.Hour {
			continue
		}
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Fatalf("drop the abandoned database %s: %v", name, err)
		}
		t.Logf("dropped %s, left behind by an earlier run", name)
	}
}

// url is the DSN with another database.
func (db *topologyDatabases) url(name string) string {
	u := *db.admin
	u.Path = "/" + name
	return u.String()
}

func (db *topologyDatabases) dropAll(t *testing.T) {
	ctx, cancel := allottest.Context(t, 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.admin.String())
	if err != nil {
		t.Errorf("drop this run's databases: %v", err)
		return
	}
	defer conn.Close(ctx)
	for _, name := range []string{db.temporal, db.visibility, db.ledger} {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	}
}

// ---------------------------------------------------------------------------
// Binaries and processes

// buildBinaries builds allot's worker, vendorsim and starter once.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := allottest.Context(t, 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(os.PathSeparator), "./worker", "./vendorsim", "./starter")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./worker ./vendorsim ./starter: %v\n%s", err, out)
	}
	for _, name := range []string{"worker", "vendorsim", "starter"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("go build did not produce %s: %v", name, err)
		}
	}
	return dir
}

// process is one of allot's binaries running for the test.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // valid once done is closed
}

func startProcess(t *testing.T, name, bin string, env []string, dir string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p := &process{name: name, cmd: exec.Command(bin, args...), log: logPath, done: make(chan struct{})}
	p.cmd.Env, p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = env, dir, f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if err := p.stop(10 * time.Second); err != nil && !t.Failed() {
			t.Errorf("%s: %v", p.name, err)
		}
		if t.Failed() {
			logTail(t, p.name, p.log, 40)
		}
	})
	return p
}

func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits; a process still there after grace is killed.
// It returns the process's own error, if it did not exit 0.
func (p *process) stop(grace time.Duration) error {
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
			return fmt.Errorf("did not stop within %s of SIGTERM; killed", grace)
		}
	}
	return p.err
}

// logTail shows the end of a log; only lines containing one of only, if any.
func logTail(t *testing.T, name, path string, lines int, only ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Logf("%s log: %v", name, err)
		return
	}
	var kept []string
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if len(only) > 0 && !slices.ContainsFunc(only, func(s string) bool { return strings.Contains(line, s) }) {
			continue
		}
		if len(line) > 500 {
			line = line[:500] + "..."
		}
		kept = append(kept, line)
	}
	if len(kept) > lines {
		kept = kept[len(kept)-lines:]
	}
	t.Logf("last %d lines of the %s log (%s):\n%s", len(kept), name, path, strings.Join(kept, "\n"))
}

// freePorts returns n distinct ports that are free on 127.0.0.1 now, below
// 32768: Temporal's PostgreSQL schema keeps membership ports in a SMALLINT
// (cluster_membership.rpc_port), so the kernel's ephemeral ports (32768 and
// up) make the server exit with "value ... is out of range for type smallint".
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	const low, high = 20000, 32767
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("found only %d free ports in [%d, %d]", len(ports), low, high)
		}
		port := low + rand.IntN(high-low+1)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken
		}
		listeners = append(listeners, l)
		ports = append(ports, port)
	}
	return ports
}

// eventually calls check until it reports true, at most until timeout.
func eventually(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := allottest.Deadline(t, timeout)
	for {
		ok, last := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s; last seen: %s", what, timeout, last)
		}
		time.Sleep(pollEvery)
	}
}

// ---------------------------------------------------------------------------
// temporal-schema

// applySchema runs the temporal-schema service's script with the service's
// environment, pointed at this run's databases and at the schemas of the
// pinned server module, with the server's temporal-sql-tool on PATH.
func applySchema(t *testing.T, c compose, db *topologyDatabases) {
	t.Helper()
	sh := requireShell(t, "sh")
	s := c.service(t, svcSchema)
	moduleDir := serverModuleDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(self, filepath.Join(bin, sqlToolName)); err != nil {
		t.Fatal(err)
	}
	env := maps.Clone(s.Environment)
	maps.Copy(env, map[string]string{
		"POSTGRES_SEEDS":      db.host,
		"DB_PORT":             db.port,
		"POSTGRES_USER":       db.user,
		"SQL_PASSWORD":        db.password,
		"DBNAME":              db.temporal,
		"VISIBILITY_DBNAME":   db.visibility,
		"TEMPORAL_SCHEMA_DIR": filepath.Join(moduleDir, "schema", "postgresql", "v12"),
		"SCHEMA_ATTEMPTS":     "2",
	})
	if env["SQL_PASSWORD"] == "" {
		// The script insists on a password; trust authentication ignores it.
		env["SQL_PASSWORD"] = "unused-with-trust-auth"
	}
	out, err := runScript(t, sh, hostPath(t, s, s.Entrypoint[1]), env, bin, filepath.Join(bin, "calls.log"))
	if err != nil {
		t.Fatalf("temporal-schema.sh with the server's temporal-sql-tool: %v\n%s", err, out)
	}
	if !strings.Contains(out, "are up to date") {
		t.Fatalf("temporal-schema.sh did not report success:\n%s", out)
	}
	// Both databases are at the newest versioned schema, which is the one
	// the pinned server checks for at start-up.
	for _, want := range []struct{ db, dir, version string }{
		{db.temporal, "temporal", schemapg.Version},
		{db.visibility, "visibility", schemapg.VisibilityVersion},
	} {
		dir := filepath.Join(env["TEMPORAL_SCHEMA_DIR"], want.dir, "versioned")
		if newest := newestVersionedDir(t, dir); newest != want.version {
			t.Fatalf("the newest schema in %s is v%s, but the server expects %s", dir, newest, want.version)
		}
		if got := schemaVersion(t, db, want.db); got != want.version {
			t.Fatalf("database %s has schema version %q after temporal-schema.sh, want %q", want.db, got, want.version)
		}
	}
}

func serverModuleDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/server")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m go.temporal.io/server: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatal("go list -m go.temporal.io/server printed no directory (is the module downloaded?)")
	}
	return dir
}

func schemaVersion(t *testing.T, db *topologyDatabases, name string) string {
	t.Helper()
	ctx, cancel := allottest.Context(t, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.url(name))
	if err != nil {
		t.Fatalf("connect to %s: %v", name, err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT curr_version FROM schema_version WHERE version_partition = 0 AND db_name = $1", name).Scan(&v); err != nil {
		t.Fatalf("read the schema version of %s: %v", name, err)
	}
	return v
}

func newestVersionedDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	best, bestMajor, bestMinor := "", -1, -1
	for _, e := range entries {
		major, minor, ok := strings.Cut(strings.TrimPrefix(e.Name(), "v"), ".")
		a, errA := strconv.Atoi(major)
		b, errB := strconv.Atoi(minor)
		if !e.IsDir() || !ok || errA != nil || errB != nil {
			continue
		}
		if a > bestMajor || (a == bestMajor && b > bestMinor) {
			best, bestMajor, bestMinor = e.Name()[1:], a, b
		}
	}
	if best == "" {
		t.Fatalf("no vX.Y directories in %s", dir)
	}
	return best
}

// ---------------------------------------------------------------------------
// temporal

type temporalServer struct {
	address string // frontend gRPC host:port
	http    string // frontend HTTP host:port
}

// startServer renders the temporal service's config from its compose
// environment, adapted to this machine, and starts the server in process.
func startServer(t *testing.T, c compose, db *topologyDatabases) *temporalServer {
	t.Helper()
	s := c.service(t, svcServer)
	dir := t.TempDir()
	ports := freePorts(t, 9)
	env := map[string]string{}
	for k, v := range s.Environment {
		env[k] = expand(v)
	}
	dynamicConfig, err := filepath.Abs(hostPath(t, s, env["DYNAMIC_CONFIG_FILE_PATH"]))
	if err != nil {
		t.Fatal(err)
	}
	// What differs from the container: where PostgreSQL is and who we are on
	// it, this run's database names, the mounted dynamic config's path here,
	// loopback and free ports instead of the container's own address, and
	// smaller connection pools (the compose file raises PostgreSQL's
	// max_connections to 200; this machine's may be the default 100).
	maps.Copy(env, map[string]string{
		"POSTGRES_SEEDS":           db.host,
		"DB_PORT":                  db.port,
		"POSTGRES_USER":            db.user,
		"POSTGRES_PWD":             db.password,
		"DBNAME":                   db.temporal,
		"VISIBILITY_DBNAME":        db.visibility,
		"DYNAMIC_CONFIG_FILE_PATH": dynamicConfig,
		"BIND_ON_IP":               "127.0.0.1",
		"FRONTEND_GRPC_PORT":       strconv.Itoa(ports[0]),
		"FRONTEND_HTTP_PORT":       strconv.Itoa(ports[1]),
		"FRONTEND_MEMBERSHIP_PORT": strconv.Itoa(ports[2]),
		"HISTORY_GRPC_PORT":        strconv.Itoa(ports[3]),
		"HISTORY_MEMBERSHIP_PORT":  strconv.Itoa(ports[4]),
		"MATCHING_GRPC_PORT":       strconv.Itoa(ports[5]),
		"MATCHING_MEMBERSHIP_PORT": strconv.Itoa(ports[6]),
		"WORKER_GRPC_PORT":         strconv.Itoa(ports[7]),
		"WORKER_MEMBERSHIP_PORT":   strconv.Itoa(ports[8]),
		"SQL_MAX_CONNS":            "10",
		"SQL_MAX_IDLE_CONNS":       "10",
		"SQL_VIS_MAX_CONNS":        "5",
		"SQL_VIS_MAX_IDLE_CONNS":   "5",
	})
	cfg := renderServerConfig(t, env)

	// The rendered config is the compose file's: PostgreSQL persistence and
	// SQL visibility with plugin postgres12, its shard count, its dynamic config.
	p := cfg.Persistence
	for _, store := range []struct{ name, db string }{{p.DefaultStore, db.temporal}, {p.VisibilityStore, db.visibility}} {
		ds := p.DataStores[store.name]
		if ds.SQL == nil || ds.SQL.PluginName != env["DB"] || ds.SQL.DatabaseName != store.db || ds.SQL.ConnectAddr != net.JoinHostPort(db.host, db.port) {
			t.Fatalf("rendered datastore %q = %+v, want SQL %s on %s:%s database %s", store.name, ds.SQL, env["DB"], db.host, db.port, store.db)
		}
	}
	if env["DB"] != "postgres12" || strconv.Itoa(int(p.NumHistoryShards)) != env["NUM_HISTORY_SHARDS"] {
		t.Fatalf("plugin %q, %d shards: want postgres12 and the compose file's NUM_HISTORY_SHARDS=%s", env["DB"], p.NumHistoryShards, env["NUM_HISTORY_SHARDS"])
	}
	if cfg.DynamicConfigClient == nil || cfg.DynamicConfigClient.Filepath != dynamicConfig {
		t.Fatalf("dynamic config client %+v, want the compose file's mounted %s", cfg.DynamicConfigClient, dynamicConfig)
	}
	fe := cfg.Services["frontend"].RPC
	srv := &temporalServer{
		address: net.JoinHostPort("127.0.0.1", strconv.Itoa(fe.GRPCPort)),
		http:    net.JoinHostPort("127.0.0.1", strconv.Itoa(fe.HTTPPort)),
	}

	// As the image's `temporal-server start` does (cmd/server), except that
	// the log goes to a file the test shows when it fails.
	cfg.Log.Stdout = false
	cfg.Log.OutputFile = filepath.Join(dir, "temporal-server.log")
	logger := tlog.NewZapLogger(tlog.BuildZapLogger(cfg.Log))
	authorizer, err := authorization.GetAuthorizerFromConfig(&cfg.Global.Authorization)
	if err != nil {
		t.Fatal(err)
	}
	if authorization.IsNoopAuthorizer(authorizer) && env["TEMPORAL_ALLOW_NO_AUTH"] != "true" {
		t.Fatal("the server has no authorizer and the compose file does not set TEMPORAL_ALLOW_NO_AUTH=true")
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&cfg.Global.Authorization, logger)
	if err != nil {
		t.Fatal(err)
	}
	audienceMapper, err := authorization.GetAudienceMapperFromConfig(&cfg.Global.Authorization)
	if err != nil {
		t.Fatal(err)
	}
	server, err := temporal.NewServer(
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithConfig(cfg),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithAudienceGetter(func(*config.Config) authorization.JWTAudienceMapper { return audienceMapper }),
	)
	if err != nil {
		t.Fatalf("create the Temporal server: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTail(t, "temporal server", cfg.Log.OutputFile, 20, serverProblems...)
		}
	})
	if err := server.Start(); err != nil {
		logTail(t, "temporal server", cfg.Log.OutputFile, 20, serverProblems...)
		t.Fatalf("start the Temporal server: %v", err)
	}
	t.Cleanup(func() {
		if err := server.Stop(); err != nil {
			t.Errorf("stop the Temporal server: %v", err)
		}
	})

	// Healthy the way the compose health check sees it: the frontend's HTTP
	// API answers the request the check sends.
	m := regexp.MustCompile(`http://[^/"\s]+(/[^"\s]*)`).FindStringSubmatch(strings.Join(s.Healthcheck.Test, " "))
	if m == nil {
		t.Fatalf("the temporal health check %q requests no http:// URL", s.Healthcheck.Test)
	}
	health := "http://" + srv.http + m[1]
	eventually(t, waitTimeout, "the server's health check "+health, func() (bool, string) {
		resp, err := http.Get(health)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return srv
}

// serverProblems selects the server's warnings and errors for a failure report.
var serverProblems = []string{`"level":"warn"`, `"level":"error"`, `"level":"fatal"`}

// renderServerConfig renders the server's embedded config template (the
// temporalio/server image's) from env alone: every variable the template
// reads and env does not set is unset while it renders, so nothing leaks in
// from this machine's environment, and the environment is restored after.
func renderServerConfig(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	tmpl, err := os.ReadFile(filepath.Join(serverModuleDir(t), "common", "config", "config_template_embedded.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`env "([A-Z0-9_]+)"`).FindAllStringSubmatch(string(tmpl), -1) {
		vars[m[1]] = true
	}
	for k := range env {
		vars[k] = true
	}
	saved := map[string]*string{}
	for k := range vars {
		if v, ok := os.LookupEnv(k); ok {
			saved[k] = &v
		} else {
			saved[k] = nil
		}
		if v, ok := env[k]; ok {
			os.Setenv(k, v)
		} else {
			os.Unsetenv(k)
		}
	}
	defer func() {
		for k, v := range saved {
			if v == nil {
				os.Unsetenv(k)
			} else {
				os.Setenv(k, *v)
			}
		}
	}()
	cfg, err := config.Load(config.WithEmbedded())
	if err != nil {
		t.Fatalf("render the server config from the temporal service's environment: %v", err)
	}
	return cfg
}

// ---------------------------------------------------------------------------
// temporal-setup

// topology is the running system and the test's ways into it.
type topology struct {
	dir       string
	bins      string
	address   string
	namespace string
	ledgerURL string
	pipelines string
	client    client.Client

	vendor, faultyVendor  *vendorProcess
	workers               []*process // on mainQueue
	attentionWorker       *process   // on attentionQueue
	workerDirs            []string
	attentionWorkerDir    string
	searchAttributes      map[string]string // NAME -> Type, from the compose file
	searchAttributeChecks string            // a query naming every one of them
}

// setUpNamespace does what the temporal-setup service's script does, with
// the SDK instead of the temporal CLI: wait for the cluster, create the
// namespace with the compose file's retention if it is missing, register
// exactly the NAME=Type attributes the compose file passes to the script.
func setUpNamespace(t *testing.T, c compose, srv *temporalServer) *topology {
	t.Helper()
	s := c.service(t, svcSetup)
	namespace := expand(s.Environment["TEMPORAL_NAMESPACE"])
	retention, err := time.ParseDuration(expand(s.Environment["ALLOT_NAMESPACE_RETENTION"]))
	if err != nil || namespace == "" {
		t.Fatalf("temporal-setup: namespace %q, retention %q (%v)", namespace, s.Environment["ALLOT_NAMESPACE_RETENTION"], err)
	}
	script, err := os.ReadFile(hostPath(t, s, s.Entrypoint[1]))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`--description "?([^"\s]+)"?`).FindSubmatch(script)
	if m == nil {
		t.Fatal("temporal-setup.sh creates the namespace without --description")
	}
	description := string(m[1])
	attrs := setupAttributes(t, s.Command)
	if len(attrs) == 0 {
		t.Fatal("temporal-setup registers no search attributes")
	}

	topo := &topology{
		dir:              t.TempDir(),
		address:          srv.address,
		namespace:        namespace,
		searchAttributes: attrs,
	}
	if topo.pipelines, err = filepath.Abs(filepath.Join("testdata", "topology-pipelines.toml")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := allottest.Context(t, 2*time.Minute)
	defer cancel()
	cl, err := client.DialContext(ctx, client.Options{
		HostPort:  srv.address,
		Namespace: namespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	if err != nil {
		t.Fatalf("connect to the server at %s: %v", srv.address, err)
	}
	t.Cleanup(cl.Close)
	topo.client = cl

	// temporal operator cluster health
	eventually(t, waitTimeout, "cluster health", func() (bool, string) {
		_, err := cl.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err == nil, fmt.Sprint(err)
	})
	// temporal operator namespace describe || temporal operator namespace create
	ns := cl.WorkflowService()
	_, err = ns.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	var notFound *serviceerror.NamespaceNotFound
	if !errors.As(err, &notFound) {
		t.Fatalf("describe namespace %s on a fresh server: %v, want NamespaceNotFound", namespace, err)
	}
	if _, err := ns.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: namespace, Description: description, WorkflowExecutionRetentionPeriod: durationpb.New(retention),
	}); err != nil {
		t.Fatalf("register namespace %s: %v", namespace, err)
	}
	var desc *workflowservice.DescribeNamespaceResponse
	eventually(t, waitTimeout, "namespace "+namespace, func() (bool, string) {
		desc, err = ns.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		return err == nil, fmt.Sprint(err)
	})
	if got := desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(); got != retention || desc.GetNamespaceInfo().GetDescription() != description {
		t.Fatalf("namespace %s: retention %s, description %q; want %s and %q", namespace, got, desc.GetNamespaceInfo().GetDescription(), retention, description)
	}
	// temporal operator search-attribute create --name N --type T ...
	want := map[string]enumspb.IndexedValueType{}
	var conditions []string
	for _, name := range sortedKeys(attrs) {
		want[name] = enumspb.IndexedValueType(enumspb.IndexedValueType_shorthandValue[attrs[name]])
		switch want[name] {
		case enumspb.INDEXED_VALUE_TYPE_KEYWORD:
			conditions = append(conditions, name+` = "x"`)
		case enumspb.INDEXED_VALUE_TYPE_INT:
			conditions = append(conditions, name+" = 0")
		default:
			t.Fatalf("search attribute %s has type %s, which this test cannot query", name, attrs[name])
		}
	}
	topo.searchAttributeChecks = strings.Join(conditions, " AND ")
	eventually(t, waitTimeout, "search attributes registered in "+namespace, func() (bool, string) {
		_, err := cl.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: want})
		return err == nil, fmt.Sprint(err)
	})
	list, err := cl.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range want {
		if got, ok := list.GetCustomAttributes()[name]; !ok || got != typ {
			t.Fatalf("search attribute %s: registered as %v (%v), want %v", name, got, ok, typ)
		}
	}
	// Usable in queries once the frontend's namespace registry has them.
	eventually(t, waitTimeout, "a visibility query on every registered attribute", func() (bool, string) {
		_, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: topo.searchAttributeChecks})
		return err == nil, fmt.Sprint(err)
	})
	return topo
}

// ---------------------------------------------------------------------------
// allot

type vendorProcess struct {
	*process
	url   string
	state string
}

// env is the environment of an allot process: this machine's, without any
// TEMPORAL_* or ALLOT_* setting of its own (cleanenv), plus the system's
// and extra.
func (s *topology) env(extra map[string]string) []string {
	var given []string
	vars := map[string]string{
		"TEMPORAL_ADDRESS":   s.address,
		"TEMPORAL_NAMESPACE": s.namespace,
		// A file that does not exist: no developer's Temporal profile applies.
		"TEMPORAL_CONFIG_FILE": filepath.Join(s.dir, "no-temporal-config.toml"),
		"ALLOT_LEDGER":         s.ledgerURL,
		"ALLOT_PIPELINES":      s.pipelines,
	}
	maps.Copy(vars, extra)
	for _, k := range sortedKeys(vars) {
		given = append(given, k+"="+vars[k])
	}
	return cleanenv.Environ(given...)
}

func (s *topology) startVendor(t *testing.T, name string, port int, faults ...string) *vendorProcess {
	t.Helper()
	v := &vendorProcess{url: fmt.Sprintf("http://127.0.0.1:%d", port), state: filepath.Join(s.dir, name+"-state.json")}
	args := append([]string{"--addr", fmt.Sprintf("127.0.0.1:%d", port), "--state", v.state, "--task-duration", "300ms"}, faults...)
	v.process = startProcess(t, name, filepath.Join(s.bins, "vendorsim"), s.env(map[string]string{"ALLOT_VENDOR_API_KEY": topoVendorKey}), s.dir, args...)
	eventually(t, waitTimeout, name+" listening on "+v.url, func() (bool, string) {
		if !v.running() {
			t.Fatalf("%s exited: %v", name, v.err)
		}
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(v.url, "http://"), time.Second)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	})
	return v
}

func (s *topology) startWorker(t *testing.T, name, queue string, vendor *vendorProcess) (*process, string) {
	t.Helper()
	dataDir := filepath.Join(s.dir, name+"-data")
	return startProcess(t, name, filepath.Join(s.bins, "worker"), s.env(map[string]string{
		"ALLOT_DATA_DIR":       dataDir,
		"ALLOT_TASK_QUEUE":     queue,
		"ALLOT_VENDOR_URL":     vendor.url,
		"ALLOT_VENDOR_API_KEY": topoVendorKey,
	}), s.dir), dataDir
}

// startAllot starts two vendors, two workers sharing the ledger on the main
// queue, and one worker for the faulty vendor on its own queue, and waits
// until every worker polls.
func (s *topology) startAllot(t *testing.T) {
	t.Helper()
	ports := freePorts(t, 2)
	s.vendor = s.startVendor(t, "vendorsim", ports[0])
	s.faultyVendor = s.startVendor(t, "vendorsim-faulty", ports[1], "--no-lookup", "--lose-response-after-accept", "1")
	for i := range 2 {
		w, dir := s.startWorker(t, fmt.Sprintf("worker-%d", i+1), mainQueue, s.vendor)
		s.workers, s.workerDirs = append(s.workers, w), append(s.workerDirs, dir)
	}
	s.attentionWorker, s.attentionWorkerDir = s.startWorker(t, "worker-attention", attentionQueue, s.faultyVendor)

	// Every worker process polls its queue for both workflow and activity
	// tasks (the SDK's default identity starts with the process ID).
	for _, q := range []struct {
		queue   string
		workers []*process
	}{{mainQueue, s.workers}, {attentionQueue, []*process{s.attentionWorker}}} {
		for _, typ := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
			eventually(t, waitTimeout, fmt.Sprintf("%d worker processes polling %s for %s tasks", len(q.workers), q.queue, typ), func() (bool, string) {
				var identities []string
				resp, err := s.client.DescribeTaskQueue(context.Background(), q.queue, typ)
				if err != nil {
					return false, err.Error()
				}
				for _, p := range resp.GetPollers() {
					identities = append(identities, p.GetIdentity())
				}
				for _, w := range q.workers {
					if !w.running() {
						t.Fatalf("%s exited: %v", w.name, w.err)
					}
					if !slices.ContainsFunc(identities, func(id string) bool { return strings.HasPrefix(id, strconv.Itoa(w.cmd.Process.Pid)+"@") }) {
						return false, fmt.Sprintf("pollers %q", identities)
					}
				}
				return true, ""
			})
		}
	}

	// The README's next step after temporal-setup: `starter setup` finds
	// every attribute already there and adds none.
	var setup struct {
		Namespace string   `json:"namespace"`
		Added     []string `json:"added"`
		Existing  []string `json:"existing"`
	}
	s.starter(t, "", &setup, "setup")
	if setup.Namespace != s.namespace || len(setup.Added) != 0 || !slices.Equal(setup.Existing, sortedKeys(s.searchAttributes)) {
		t.Fatalf("starter setup = %+v, want namespace %s with every attribute of the compose file (%v) already there", setup, s.namespace, sortedKeys(s.searchAttributes))
	}
}

// starter runs `starter ARGS --json` on queue ("" = allot's default) and
// decodes what it prints into out.
func (s *topology) starter(t *testing.T, queue string, out any, args ...string) {
	t.Helper()
	ctx, cancel := allottest.Context(t, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bins, "starter"), append(args, "--json")...)
	extra := map[string]string{}
	if queue != "" {
		extra["ALLOT_TASK_QUEUE"] = queue
	}
	cmd.Env, cmd.Dir = s.env(extra), s.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("starter %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if out != nil {
		if err := json.Unmarshal(allottest.LastJSON(stdout.Bytes()), out); err != nil {
			t.Fatalf("starter %s --json printed what is not its JSON result: %v\n%s", strings.Join(args, " "), err, stdout.String())
		}
	}
}

// The parts of starter's JSON output the test reads.
type (
	episode struct {
		Pipeline      string    `json:"pipeline"`
		ID            string    `json:"id"`
		Period        string    `json:"period"`
		Sequence      int       `json:"sequence"`
		AllocationKey string    `json:"allocation_key"`
		NominalTime   time.Time `json:"nominal_time"`
		Status        string    `json:"status"`
		Outcome       string    `json:"outcome"`
		OutcomeReason string    `json:"outcome_reason"`
	}
	runResult struct {
		WorkflowID        string    `json:"workflow_id"`
		Pipeline          string    `json:"pipeline"`
		EpisodeID         string    `json:"episode_id"`
		Period            string    `json:"period"`
		Sequence          int       `json:"sequence"`
		Outcome           string    `json:"outcome"`
		Reason            string    `json:"reason"`
		NominalTime       time.Time `json:"nominal_time"`
		NominalTimeSource string    `json:"nominal_time_source"`
	}
	runOutput struct {
		Action     string     `json:"action"`
		WorkflowID string     `json:"workflow_id"`
		RunID      string     `json:"run_id"`
		Result     *runResult `json:"result"`
	}
	scheduleOutput struct {
		ScheduleID string `json:"schedule_id"`
		Pipeline   string `json:"pipeline"`
		Spec       struct {
			Interval time.Duration `json:"interval"`
			Overlap  string        `json:"overlap"`
		} `json:"spec"`
		Paused        bool `json:"paused"`
		Actions       int  `json:"actions"`
		RecentActions []struct {
			NominalTime time.Time `json:"nominal_time"`
			WorkflowID  string    `json:"workflow_id"`
		} `json:"recent_actions"`
	}
	stepState struct {
		Name      string `json:"name"`
		Status    string `json:"status"`
		Revision  int    `json:"revision"`
		RemoteRef string `json:"remote_ref"`
	}
	episodeState struct {
		Stage     string      `json:"stage"`
		Steps     []stepState `json:"steps"`
		Attention *struct {
			Step      string `json:"step"`
			ErrorType string `json:"error_type"`
			Reason    string `json:"reason"`
			Remedy    string `json:"remedy"`
		} `json:"attention"`
	}
	paidTask struct {
		Step           string `json:"step"`
		Revision       int    `json:"revision"`
		IdempotencyKey string `json:"idempotency_key"`
		State          string `json:"state"`
		RemoteRef      string `json:"remote_ref"`
		Artifact       string `json:"artifact"`
		SHA256         string `json:"sha256"`
	}
	showOutput struct {
		Episode   episode    `json:"episode"`
		PaidTasks []paidTask `json:"paid_tasks"`
		Costs     []struct {
			RemoteRef string `json:"remote_ref"`
			Step      string `json:"step"`
			Amount    int64  `json:"amount"`
			Currency  string `json:"currency"`
		} `json:"costs"`
		Totals    map[string]int64 `json:"totals"`
		Decisions []decision       `json:"decisions"`
		Workflow  *struct {
			WorkflowID string        `json:"workflow_id"`
			Status     string        `json:"status"`
			State      *episodeState `json:"state"`
		} `json:"workflow"`
	}
	decision struct {
		Action    string `json:"action"`
		Step      string `json:"step"`
		RemoteRef string `json:"remote_ref"`
		Reason    string `json:"reason"`
	}
	commandOutput struct {
		WorkflowID string       `json:"workflow_id"`
		Update     string       `json:"update"`
		State      episodeState `json:"state"`
	}
	// vendorCharge is one charge in vendorsim's --state file.
	vendorCharge struct {
		TaskID         string `json:"task_id"`
		IdempotencyKey string `json:"idempotency_key"`
		Amount         int64  `json:"amount"`
		Currency       string `json:"currency"`
	}
)

func (s *topology) episodes(t *testing.T, pipelineName, period string) []episode {
	t.Helper()
	var out struct {
		Episodes []episode `json:"episodes"`
	}
	args := []string{"episodes", "--pipeline", pipelineName}
	if period != "" {
		args = append(args, "--period", period)
	}
	s.starter(t, "", &out, args...)
	return out.Episodes
}

// waitEpisodes polls `starter episodes` until done holds.
func (s *topology) waitEpisodes(t *testing.T, pipelineName, period, what string, done func([]episode) bool) []episode {
	t.Helper()
	var eps []episode
	eventually(t, waitTimeout, pipelineName+": "+what, func() (bool, string) {
		eps = s.episodes(t, pipelineName, period)
		return done(eps), fmt.Sprintf("%+v", eps)
	})
	return eps
}

func (s *topology) show(t *testing.T, queue, pipelineName, episodeID string) showOutput {
	t.Helper()
	var out showOutput
	s.starter(t, queue, &out, "episode", "show", "--pipeline", pipelineName, "--episode", episodeID)
	return out
}

// waitShow polls `starter episode show` until done holds.
func (s *topology) waitShow(t *testing.T, queue, pipelineName, episodeID, what string, done func(showOutput) bool) showOutput {
	t.Helper()
	var out showOutput
	eventually(t, waitTimeout, pipelineName+"/"+episodeID+": "+what, func() (bool, string) {
		out = s.show(t, queue, pipelineName, episodeID)
		b, _ := json.Marshal(out)
		return done(out), string(b)
	})
	return out
}

func stage(o showOutput) string {
	if o.Workflow == nil || o.Workflow.State == nil {
		return ""
	}
	return o.Workflow.State.Stage
}

func completed(o showOutput) bool {
	return o.Episode.Status == "completed" && o.Workflow != nil && o.Workflow.Status == "Completed" && stage(o) == "completed"
}

func allCompleted(eps []episode) bool {
	for _, e := range eps {
		if e.Status != "completed" {
			return false
		}
	}
	return true
}

// assertDense checks that every period's sequences are 0..n-1, each once,
// and that episode IDs are <period>-<sequence>.
func assertDense(t *testing.T, eps []episode) {
	t.Helper()
	byPeriod := map[string][]int{}
	for _, e := range eps {
		if e.ID != fmt.Sprintf("%s-%d", e.Period, e.Sequence) {
			t.Errorf("episode %q is not <period>-<sequence> (%s, %d)", e.ID, e.Period, e.Sequence)
		}
		byPeriod[e.Period] = append(byPeriod[e.Period], e.Sequence)
	}
	for period, seqs := range byPeriod {
		slices.Sort(seqs)
		for i, seq := range seqs {
			if seq != i {
				t.Errorf("period %s has sequences %v, want 0..%d each once", period, seqs, len(seqs)-1)
				break
			}
		}
	}
}

// charges reads the vendor's charges from its --state file.
func (v *vendorProcess) charges(t *testing.T) []vendorCharge {
	t.Helper()
	data, err := os.ReadFile(v.state)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		Charges []vendorCharge `json:"charges"`
	}
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatalf("vendor state %s: %v", v.state, err)
	}
	return state.Charges
}

// waitVisible polls the visibility store until query finds want workflows.
func (s *topology) waitVisible(t *testing.T, query string, want int) map[string]string {
	t.Helper()
	ids := map[string]string{} // workflow ID -> type
	eventually(t, 30*time.Second, fmt.Sprintf("visibility query %q finding %d workflows", query, want), func() (bool, string) {
		clear(ids)
		resp, err := s.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.namespace, Query: query, PageSize: 1000})
		if err != nil {
			t.Fatalf("visibility query %q: %v", query, err)
		}
		for _, e := range resp.GetExecutions() {
			ids[e.GetExecution().GetWorkflowId()] = e.GetType().GetName()
		}
		return len(ids) == want && resp.GetNextPageToken() == nil, fmt.Sprintf("%d: %v", len(ids), ids)
	})
	return ids
}

// ---------------------------------------------------------------------------
// Scenarios

// scheduleScenario: a Schedule with a short interval starts runs; paused, its
// every action has its episode in the ledger, dense, keyed by nominal time.
func (s *topology) scheduleScenario(t *testing.T) int {
	const p = "topo-scheduled"
	var created scheduleOutput
	s.starter(t, "", &created, "schedule", "create", "--pipeline", p, "--interval", "2s")
	if created.ScheduleID != p+"/schedule" || created.Paused || created.Spec.Interval != 2*time.Second || created.Spec.Overlap != "allow_all" {
		t.Fatalf("schedule create = %+v, want %s/schedule, running, every 2s, overlap allow_all", created, p)
	}
	s.waitEpisodes(t, p, "", "three completed episodes started by the schedule", func(eps []episode) bool {
		n := 0
		for _, e := range eps {
			if e.Status == "completed" {
				n++
			}
		}
		return n >= 3
	})
	s.starter(t, "", nil, "schedule", "pause", "--pipeline", p, "--note", "TestProductionTopology")
	var desc scheduleOutput
	eventually(t, waitTimeout, "schedule "+p+" paused", func() (bool, string) {
		s.starter(t, "", &desc, "schedule", "describe", "--pipeline", p)
		return desc.Paused, fmt.Sprintf("%+v", desc)
	})
	n := desc.Actions
	// Temporal lists the newest 10 actions: on a busy machine the schedule
	// may start more before the pause lands.
	if n < 3 || len(desc.RecentActions) != min(n, 10) {
		t.Fatalf("paused schedule: %d actions, %d recent actions; want at least 3, all listed (up to 10)", n, len(desc.RecentActions))
	}
	eps := s.waitEpisodes(t, p, "", fmt.Sprintf("an episode for each of the schedule's %d actions, all completed", n), func(eps []episode) bool {
		return len(eps) == n && allCompleted(eps)
	})
	assertDense(t, eps)
	byKey := map[string]episode{}
	for _, e := range eps {
		byKey[e.AllocationKey] = e
	}
	for _, a := range desc.RecentActions {
		key := p + "/scheduled-" + a.NominalTime.UTC().Format(time.RFC3339)
		e, ok := byKey[a.WorkflowID]
		if a.WorkflowID != key || !ok || !e.NominalTime.Equal(a.NominalTime) {
			t.Errorf("schedule action %s at %s: want workflow ID %s and an episode with that key and nominal time; got %+v", a.WorkflowID, a.NominalTime, key, e)
			continue
		}
		var res runResult
		if err := s.client.GetWorkflow(context.Background(), a.WorkflowID, "").Get(context.Background(), &res); err != nil {
			t.Fatalf("result of %s: %v", a.WorkflowID, err)
		}
		if res.EpisodeID != e.ID || res.Outcome != "allocated" || res.Reason != "new_episode" || res.NominalTimeSource != "schedule" || !res.NominalTime.Equal(a.NominalTime) {
			t.Errorf("ScheduledRun %s = %+v, want episode %s allocated/new_episode at the schedule's nominal time %s", a.WorkflowID, res, e.ID, a.NominalTime)
		}
	}
	s.waitVisible(t, fmt.Sprintf(`AllotPipeline = %q AND WorkflowType = "Episode" AND AllotOutcome = "completed"`, p), n)
	var deleted map[string]string
	s.starter(t, "", &deleted, "schedule", "delete", "--pipeline", p)
	if deleted["deleted"] != p {
		t.Errorf("schedule delete printed %v", deleted)
	}
	return n
}

// backfillScenario: a backfill through the paused schedule gives each nominal
// time of [from, to) one episode, dense in its period.
func (s *topology) backfillScenario(t *testing.T) {
	const p, period = "topo-backfill", "2025-W02"
	from := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC) // Monday of 2025-W02, a nominal time of the 6 h schedule
	// On the schedule's 6 h grid on purpose: --to is exclusive ([from, to)),
	// so the nominal time at --to itself must not run (Temporal's backfill
	// end is inclusive; the starter ends the range just before --to).
	to := from.Add(30 * time.Hour)
	var wantKeys []string
	for tm := from; tm.Before(to); tm = tm.Add(6 * time.Hour) {
		wantKeys = append(wantKeys, p+"/scheduled-"+tm.Format(time.RFC3339))
	}
	var created scheduleOutput
	s.starter(t, "", &created, "schedule", "create", "--pipeline", p, "--paused")
	if !created.Paused || created.Spec.Interval != 6*time.Hour {
		t.Fatalf("schedule create --paused = %+v, want paused, every 6h (the pipeline's own schedule)", created)
	}
	var bf struct {
		ScheduleID string    `json:"schedule_id"`
		From       time.Time `json:"from"`
		To         time.Time `json:"to"`
	}
	// Through the Schedule (--via-schedule), whose own count of actions is
	// asserted below; the fast path is the app package's tests'.
	s.starter(t, "", &bf, "schedule", "backfill", "--pipeline", p, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339), "--via-schedule")
	if bf.ScheduleID != p+"/schedule" || !bf.From.Equal(from) || !bf.To.Equal(to) {
		t.Fatalf("schedule backfill = %+v", bf)
	}
	eps := s.waitEpisodes(t, p, period, fmt.Sprintf("%d completed episodes from the backfill", len(wantKeys)), func(eps []episode) bool {
		return len(eps) >= len(wantKeys) && allCompleted(eps)
	})
	var keys []string
	for _, e := range eps {
		keys = append(keys, e.AllocationKey)
		if e.Period != period {
			t.Errorf("backfilled episode %s is in period %s, want %s", e.ID, e.Period, period)
		}
	}
	slices.Sort(keys)
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("backfill [%s, %s) allocated keys\n%v\nwant exactly\n%v", from.Format(time.RFC3339), to.Format(time.RFC3339), keys, wantKeys)
	}
	assertDense(t, eps)
	var desc scheduleOutput
	s.starter(t, "", &desc, "schedule", "describe", "--pipeline", p)
	if !desc.Paused || desc.Actions != len(wantKeys) {
		t.Errorf("after the backfill the schedule is paused=%v with %d actions, want paused with %d", desc.Paused, desc.Actions, len(wantKeys))
	}
	var stats struct {
		Runs []struct {
			Outcome string `json:"outcome"`
			Reason  string `json:"reason"`
			Count   int    `json:"count"`
		} `json:"runs"`
		RunsTotal     int `json:"runs_total"`
		EpisodesTotal int `json:"episodes_total"`
	}
	s.starter(t, "", &stats, "stats", "--pipeline", p)
	if stats.RunsTotal != len(wantKeys) || stats.EpisodesTotal != len(wantKeys) || len(stats.Runs) != 1 ||
		stats.Runs[0].Outcome != "allocated" || stats.Runs[0].Reason != "new_episode" || stats.Runs[0].Count != len(wantKeys) {
		t.Errorf("stats = %+v, want %d runs, all allocated/new_episode, and %d episodes", stats, len(wantKeys), len(wantKeys))
	}
	runs := s.waitVisible(t, fmt.Sprintf(`AllotPipeline = %q AND WorkflowType = "ScheduledRun" AND AllotOutcome = "allocated"`, p), len(wantKeys))
	if got := slices.Sorted(maps.Keys(runs)); !slices.Equal(got, wantKeys) {
		t.Errorf("visible ScheduledRuns %v, want %v", got, wantKeys)
	}
	s.waitVisible(t, fmt.Sprintf(`AllotPipeline = %q AND AllotPeriod = %q AND WorkflowType = "Episode" AND AllotOutcome = "completed" AND AllotSequence >= 0`, p, period), len(wantKeys))
	s.starter(t, "", nil, "schedule", "delete", "--pipeline", p)
}

// paidScenario: a paid episode waits for approval, is approved, and completes
// with exactly one vendor charge per paid step, costs recorded once.
func (s *topology) paidScenario(t *testing.T) {
	const p, nominal = "topo-paid", "2026-08-03T02:00:00Z"
	paidSteps := []string{"video", "cover"}
	var run runOutput
	s.starter(t, "", &run, "run", "--pipeline", p, "--nominal-time", nominal, "--wait")
	r := run.Result
	if run.Action != "started" || run.WorkflowID != p+"/scheduled-"+nominal || r == nil || r.EpisodeID != "2026-W32-0" ||
		r.Outcome != "allocated" || r.Reason != "new_episode" || r.NominalTimeSource != "input" {
		t.Fatalf("run = %+v / %+v, want a started run allocating 2026-W32-0 from the input's nominal time", run, r)
	}
	ep := r.EpisodeID
	waiting := s.waitShow(t, "", p, ep, "waiting for approval", func(o showOutput) bool { return stage(o) == "waiting_approval" })
	if len(waiting.Workflow.State.Steps) != 5 {
		t.Fatalf("episode state has steps %+v, want the pipeline's 5", waiting.Workflow.State.Steps)
	}
	for i, name := range paidSteps {
		st := waiting.Workflow.State.Steps[i]
		if st.Name != name || st.Status != "completed" || st.RemoteRef == "" {
			t.Fatalf("paid step %d before approval: %+v, want %s completed with a reference", i, st, name)
		}
	}
	s.waitVisible(t, fmt.Sprintf(`AllotPipeline = %q AND AllotOutcome = "waiting_approval"`, p), 1)

	var approved commandOutput
	s.starter(t, "", &approved, "episode", "approve", "--pipeline", p, "--episode", ep, "--reason", "looks good")
	if approved.WorkflowID != p+"/episode/"+ep || approved.Update != "approve" {
		t.Fatalf("episode approve = %+v", approved)
	}
	final := s.waitShow(t, "", p, ep, "completed", completed)

	charges := s.vendor.charges(t)
	if len(charges) != len(paidSteps) {
		t.Fatalf("the vendor charged %d times, want %d (one per paid step): %+v", len(charges), len(paidSteps), charges)
	}
	byRef := map[string]vendorCharge{}
	for _, ch := range charges {
		byRef[ch.TaskID] = ch
	}
	var total int64
	var steps []string
	for _, task := range final.PaidTasks {
		ch, ok := byRef[task.RemoteRef]
		steps = append(steps, task.Step)
		if task.State != "succeeded" || task.Revision != 0 || !ok || ch.IdempotencyKey != task.IdempotencyKey {
			t.Errorf("paid task %+v: want succeeded, revision 0, charged once under its idempotency key (charge %+v)", task, ch)
		}
		if _, err := os.Stat(task.Artifact); err != nil || !slices.ContainsFunc(s.workerDirs, func(d string) bool { return strings.HasPrefix(task.Artifact, d+string(os.PathSeparator)) }) {
			t.Errorf("paid task %s: artifact %q is not a file in a worker's data directory: %v", task.Step, task.Artifact, err)
		}
		total += ch.Amount
	}
	if slices.Sort(steps); !slices.Equal(steps, slices.Sorted(slices.Values(paidSteps))) {
		t.Errorf("paid tasks for steps %v, want one for each of %v", steps, paidSteps)
	}
	if len(final.Costs) != len(paidSteps) || final.Totals[charges[0].Currency] != total {
		t.Errorf("costs %+v, totals %v; want one cost per paid step adding up to the vendor's %d %s", final.Costs, final.Totals, total, charges[0].Currency)
	}
	for _, cost := range final.Costs {
		if ch := byRef[cost.RemoteRef]; cost.Amount != ch.Amount || cost.Currency != ch.Currency {
			t.Errorf("cost %+v does not match the vendor's charge %+v", cost, ch)
		}
	}
	if len(final.Decisions) != 1 || final.Decisions[0].Action != "approve" || final.Decisions[0].Reason != "looks good" {
		t.Errorf("decisions %+v, want one approve with its reason", final.Decisions)
	}
	var costs struct {
		Lines []struct {
			Step      string `json:"step"`
			Revisions int    `json:"revisions"`
		} `json:"lines"`
		Totals map[string]int64 `json:"totals"`
	}
	s.starter(t, "", &costs, "costs", "--pipeline", p, "--period", "2026-W32")
	if len(costs.Lines) != len(paidSteps) || costs.Totals[charges[0].Currency] != total {
		t.Errorf("starter costs = %+v, want %d lines adding up to %d", costs, len(paidSteps), total)
	}

	// The same nominal time again reports the finished run: nothing starts,
	// nothing is charged.
	var again runOutput
	s.starter(t, "", &again, "run", "--pipeline", p, "--nominal-time", nominal)
	if again.Action != "existing" || again.RunID != run.RunID || again.Result == nil || again.Result.EpisodeID != ep {
		t.Errorf("the same run again = %+v, want the existing run %s with episode %s", again, run.RunID, ep)
	}
	if n := len(s.vendor.charges(t)); n != len(paidSteps) {
		t.Errorf("the vendor has %d charges after the repeated run, want %d", n, len(paidSteps))
	}

	types := s.waitVisible(t, fmt.Sprintf(`AllotPipeline = %q AND AllotEpisode = %q`, p, ep), 2)
	if types[run.WorkflowID] != "ScheduledRun" || types[p+"/episode/"+ep] != "Episode" {
		t.Errorf("workflows of episode %s: %v, want its ScheduledRun and its Episode", ep, types)
	}
	s.waitVisible(t, fmt.Sprintf(`AllotPipeline = %q AND AllotOutcome = "completed"`, p), 1)
}

// attentionScenario: the vendor accepts and charges, the response is lost
// and the vendor cannot be asked: the episode parks as needs_attention
// (OutcomeUnknown) without paying again, an operator adopts the vendor's
// reference, and the episode completes on that one charge.
func (s *topology) attentionScenario(t *testing.T) {
	const p, nominal = "topo-attention", "2026-08-03T02:00:00Z"
	var run runOutput
	s.starter(t, attentionQueue, &run, "run", "--pipeline", p, "--nominal-time", nominal, "--wait")
	if run.Result == nil || run.Result.Outcome != "allocated" {
		t.Fatalf("run = %+v, want an allocated episode", run)
	}
	ep := run.Result.EpisodeID
	parked := s.waitShow(t, attentionQueue, p, ep, "needs attention, in the workflow and the ledger", func(o showOutput) bool {
		return stage(o) == "needs_attention" && o.Episode.Outcome == "needs_attention"
	})
	att := parked.Workflow.State.Attention
	target := fmt.Sprintf("--pipeline %s --episode %s --step video", p, ep)
	if att == nil || att.Step != "video" || att.ErrorType != "OutcomeUnknown" || !strings.HasPrefix(att.Remedy, "starter episode ") || !strings.Contains(att.Remedy, target) {
		t.Fatalf("attention = %+v, want OutcomeUnknown on step video, with a `starter episode ... %s` remedy", att, target)
	}
	if parked.Episode.OutcomeReason != "OutcomeUnknown" {
		t.Errorf("ledger outcome %s/%s, want needs_attention/OutcomeUnknown", parked.Episode.Outcome, parked.Episode.OutcomeReason)
	}
	if len(parked.PaidTasks) != 1 || parked.PaidTasks[0].State != "intent" || parked.PaidTasks[0].RemoteRef != "" {
		t.Fatalf("paid tasks while parked: %+v, want one intent without a reference", parked.PaidTasks)
	}
	s.waitVisible(t, fmt.Sprintf(`AllotPipeline = %q AND AllotEpisode = %q AND AllotOutcome = "needs_attention"`, p, ep), 1)
	charges := s.faultyVendor.charges(t)
	if len(charges) != 1 || charges[0].IdempotencyKey != parked.PaidTasks[0].IdempotencyKey {
		t.Fatalf("the faulty vendor has charges %+v, want exactly one, under the paid task's idempotency key %s", charges, parked.PaidTasks[0].IdempotencyKey)
	}
	ref := charges[0].TaskID

	var resolved commandOutput
	s.starter(t, attentionQueue, &resolved, "episode", "resolve", "--pipeline", p, "--episode", ep, "--step", "video", "--adopt", ref, "--reason", "found in the vendor's console")
	if resolved.Update != "resolve" || len(resolved.State.Steps) == 0 || resolved.State.Steps[0].RemoteRef != ref {
		t.Fatalf("episode resolve = %+v, want step video adopting %s", resolved, ref)
	}
	final := s.waitShow(t, attentionQueue, p, ep, "completed after the adoption", completed)
	if len(final.PaidTasks) != 1 || final.PaidTasks[0].State != "succeeded" || final.PaidTasks[0].RemoteRef != ref {
		t.Errorf("paid tasks %+v, want the adopted %s succeeded", final.PaidTasks, ref)
	} else if !strings.HasPrefix(final.PaidTasks[0].Artifact, s.attentionWorkerDir+string(os.PathSeparator)) {
		t.Errorf("artifact %s is not in the attention worker's data directory %s", final.PaidTasks[0].Artifact, s.attentionWorkerDir)
	}
	if len(final.Costs) != 1 || final.Costs[0].RemoteRef != ref || final.Costs[0].Amount != charges[0].Amount {
		t.Errorf("costs %+v, want the one charge %+v", final.Costs, charges[0])
	}
	adopted := slices.ContainsFunc(final.Decisions, func(d decision) bool {
		return d.Action == "adopt" && d.Step == "video" && d.RemoteRef == ref && d.Reason == "found in the vendor's console"
	})
	if !adopted {
		t.Errorf("decisions %+v lack the adoption of %s with its reason", final.Decisions, ref)
	}
	if n := len(s.faultyVendor.charges(t)); n != 1 {
		t.Errorf("the faulty vendor has %d charges after the resolution, want 1", n)
	}
	s.waitVisible(t, fmt.Sprintf(`AllotPipeline = %q AND AllotEpisode = %q AND AllotOutcome = "completed"`, p, ep), 1)
	s.waitVisible(t, fmt.Sprintf(`AllotPipeline = %q AND AllotOutcome = "needs_attention"`, p), 0)
}

// wholeSystem: every completed Episode is visible, the ledger's invariants
// hold, no process died or leaked the vendor key, and all stop cleanly.
func (s *topology) wholeSystem(t *testing.T, scheduled int) {
	// topo-scheduled's episodes, 5 backfilled, 1 paid, 1 resolved.
	if scheduled > 0 {
		s.waitVisible(t, `WorkflowType = "Episode" AND AllotOutcome = "completed"`, scheduled+7)
	}
	var check struct {
		OK         bool              `json:"ok"`
		Violations []json.RawMessage `json:"violations"`
	}
	s.starter(t, "", &check, "check")
	if !check.OK || len(check.Violations) != 0 {
		t.Errorf("starter check: ok=%v, violations %s", check.OK, check.Violations)
	}
	all := append(slices.Clone(s.workers), s.attentionWorker, s.vendor.process, s.faultyVendor.process)
	for _, p := range all {
		if !p.running() {
			t.Errorf("%s exited during the test: %v", p.name, p.err)
		}
	}
	for _, p := range all {
		if err := p.stop(20 * time.Second); err != nil {
			t.Errorf("%s did not stop cleanly on SIGTERM: %v", p.name, err)
		}
		data, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(topoVendorKey)) {
			t.Errorf("the vendor API key is in the %s log", p.name)
		}
		if p.name != "vendorsim" && p.name != "vendorsim-faulty" {
			if n := countLines(data, "allot worker stopped"); n != 1 {
				t.Errorf("%s logged %q %d times, want once", p.name, "allot worker stopped", n)
			}
		}
	}
}

func countLines(data []byte, substr string) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			n++
		}
	}
	return n
}
