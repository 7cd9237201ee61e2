package deploy

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"gopkg.in/yaml.v3"

	"allot/workflows"
)

// The stack lives in the repository root; bind-mount sources are relative to it.
const (
	repoRoot    = ".."
	composeFile = "docker-compose.temporal.yml"
)

// Service names of the stack.
const (
	svcPostgres = "postgresql"
	svcSchema   = "temporal-schema"
	svcServer   = "temporal"
	svcSetup    = "temporal-setup"
	svcUI       = "temporal-ui"
)

// oneShot services run to completion; every other service runs for good.
var oneShot = map[string]bool{svcSchema: true, svcSetup: true}

// devDefaults are the only secret values the stack may carry.
var devDefaults = map[string]bool{"postgres": true, "temporal": true, "allot": true}

// The subset of the Compose specification this stack uses. Decoding with
// KnownFields makes a misspelt or unexpected key fail the tests.
type compose struct {
	Name     string             `yaml:"name"`
	XLogging logging            `yaml:"x-logging"`
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image           string                `yaml:"image"`
	Restart         string                `yaml:"restart"`
	Command         []string              `yaml:"command"`
	Entrypoint      []string              `yaml:"entrypoint"`
	Environment     map[string]string     `yaml:"environment"`
	Volumes         []string              `yaml:"volumes"`
	Ports           []string              `yaml:"ports"`
	DependsOn       map[string]dependency `yaml:"depends_on"`
	Healthcheck     *healthcheck          `yaml:"healthcheck"`
	StopGracePeriod string                `yaml:"stop_grace_period"`
	Logging         logging               `yaml:"logging"`
}

type dependency struct {
	Condition string `yaml:"condition"`
}

type healthcheck struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	Retries     int      `yaml:"retries"`
	StartPeriod string   `yaml:"start_period"`
}

type logging struct {
	Driver  string            `yaml:"driver"`
	Options map[string]string `yaml:"options"`
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, composeFile))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	if len(c.Services) == 0 {
		t.Fatalf("%s defines no services", composeFile)
	}
	return c
}

func (c compose) service(t *testing.T, name string) service {
	t.Helper()
	s, ok := c.Services[name]
	if !ok {
		t.Fatalf("%s has no service %q", composeFile, name)
	}
	return s
}

// interpolation matches what Compose substitutes in a value: "$$" (a literal
// dollar) or "${NAME}" / "${NAME:-default}" / "${NAME-default}".
var interpolation = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}$]*))?\}`)

// expand resolves a value as Compose would with none of its variables set.
func expand(s string) string {
	return interpolation.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		return interpolation.FindStringSubmatch(m)[3]
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestExpectedServices(t *testing.T) {
	c := loadCompose(t)
	want := []string{svcPostgres, svcSchema, svcServer, svcSetup, svcUI}
	if got := sortedKeys(c.Services); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("services = %v, want exactly %v", got, want)
	}
	if c.Name == "" {
		t.Error("the compose file should name its project (top-level name:), so volumes get a stable name")
	}
}

// Every image names a concrete version: no latest, no missing tag, no tag
// left to a variable.
func TestImagesArePinned(t *testing.T) {
	c := loadCompose(t)
	version := regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)+([-.][0-9A-Za-z.-]+)?$`)
	for _, name := range sortedKeys(c.Services) {
		image := c.Services[name].Image
		repo, tag, ok := strings.Cut(image, ":")
		switch {
		case image == "":
			t.Errorf("%s: no image", name)
		case strings.Contains(image, "$"):
			t.Errorf("%s: image %q depends on a variable; pin it in the file", name, image)
		case !ok || strings.Contains(tag, "/"):
			t.Errorf("%s: image %q has no tag", name, image)
		case !version.MatchString(tag):
			t.Errorf("%s: image %s has tag %q, want a concrete version like 1.2.3", name, repo, tag)
		}
	}
}

// The schema that temporal-schema installs must be the one the server expects,
// and TEMPORAL-FACTS asks for the server/admin-tools pair, not auto-setup.
func TestTemporalImagesMatch(t *testing.T) {
	c := loadCompose(t)
	image := func(name, wantRepo string) string {
		repo, tag, _ := strings.Cut(c.service(t, name).Image, ":")
		if repo != wantRepo {
			t.Errorf("%s: image repository %q, want %q", name, repo, wantRepo)
		}
		return tag
	}
	server := image(svcServer, "temporalio/server")
	schema := image(svcSchema, "temporalio/admin-tools")
	setup := image(svcSetup, "temporalio/admin-tools")
	image(svcUI, "temporalio/ui")
	image(svcPostgres, "postgres")
	if server == "" || !strings.HasPrefix(schema, server) || !strings.HasPrefix(setup, server) {
		t.Errorf("admin-tools tags %q, %q do not match server tag %q", schema, setup, server)
	}
	parts := strings.Split(server, ".")
	major, _ := strconv.Atoi(parts[0])
	minor := 0
	if len(parts) > 1 {
		minor, _ = strconv.Atoi(parts[1])
	}
	if major < 1 || (major == 1 && minor < 28) {
		t.Errorf("temporalio/server:%s is older than 1.28", server)
	}
	for _, name := range sortedKeys(c.Services) {
		if strings.Contains(c.Services[name].Image, "auto-setup") {
			t.Errorf("%s uses the deprecated temporalio/auto-setup image", name)
		}
	}
}

// The images are the versions the code is built and tested with: the
// server and admin-tools tags are go.mod's go.temporal.io/server (whose
// schema and config template TestProductionTopology runs), the UI's is
// go.mod's ui-server (the devserver's Web UI).
func TestImagesAreTheTestedVersions(t *testing.T) {
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	modVersion := func(path string) string {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == path {
				return strings.TrimPrefix(f[1], "v")
			}
		}
		t.Fatalf("go.mod does not require %s", path)
		return ""
	}
	server, ui := modVersion("go.temporal.io/server"), modVersion("github.com/temporalio/ui-server/v2")
	c := loadCompose(t)
	for name, want := range map[string]string{
		svcServer: "temporalio/server:" + server,
		svcSchema: "temporalio/admin-tools:" + server,
		svcSetup:  "temporalio/admin-tools:" + server,
		svcUI:     "temporalio/ui:" + ui,
	} {
		if got := c.service(t, name).Image; got != want {
			t.Errorf("%s: image %s, want %s, the version go.mod tests", name, got, want)
		}
	}
}

type publishedPort struct{ ip, host, container string }

func parsePort(spec string) (publishedPort, error) {
	spec = strings.TrimSuffix(expand(spec), "/tcp")
	parts := strings.Split(spec, ":")
	switch len(parts) {
	case 2:
		return publishedPort{host: parts[0], container: parts[1]}, nil
	case 3:
		return publishedPort{ip: parts[0], host: parts[1], container: parts[2]}, nil
	}
	return publishedPort{}, fmt.Errorf("port %q: want [IP:]HOST:CONTAINER", spec)
}

func TestPortsArePublished(t *testing.T) {
	c := loadCompose(t)
	for _, want := range []struct {
		service, port string
	}{
		{svcServer, "7233"},
		{svcUI, "8080"},
		{svcPostgres, "5432"}, // ALLOT_LEDGER
	} {
		found := false
		for _, spec := range c.service(t, want.service).Ports {
			p, err := parsePort(spec)
			if err != nil {
				t.Errorf("%s: %v", want.service, err)
				continue
			}
			if p.container == want.port && p.host == want.port {
				found = true
				if p.ip != "" && p.ip != "127.0.0.1" && p.ip != "0.0.0.0" {
					t.Errorf("%s: port %s published on %q by default", want.service, want.port, p.ip)
				}
			}
		}
		if !found {
			t.Errorf("%s: port %s is not published as %s:%s", want.service, want.port, want.port, want.port)
		}
	}
	for _, name := range []string{svcSchema, svcSetup} {
		if ports := c.service(t, name).Ports; len(ports) > 0 {
			t.Errorf("one-shot %s publishes ports %v", name, ports)
		}
	}
}

func TestHealthchecksAndRestartPolicies(t *testing.T) {
	c := loadCompose(t)
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		if oneShot[name] {
			// A restarting one-shot would race depends_on's
			// service_completed_successfully; the scripts retry inside.
			if s.Restart != "no" {
				t.Errorf("one-shot %s: restart %q, want \"no\"", name, s.Restart)
			}
			continue
		}
		if s.Restart != "unless-stopped" && s.Restart != "always" {
			t.Errorf("%s: restart %q, want unless-stopped or always", name, s.Restart)
		}
		h := s.Healthcheck
		if h == nil || len(h.Test) < 2 {
			t.Errorf("%s: no health check with a test command", name)
			continue
		}
		switch h.Test[0] {
		case "CMD":
		case "CMD-SHELL":
			if len(h.Test) != 2 {
				t.Errorf("%s: CMD-SHELL health check takes one shell string, got %q", name, h.Test[1:])
			}
		default:
			t.Errorf("%s: health check test starts with %q, want CMD or CMD-SHELL", name, h.Test[0])
		}
		if strings.TrimSpace(strings.Join(h.Test[1:], " ")) == "" {
			t.Errorf("%s: empty health check command", name)
		}
		if h.Interval == "" || h.Timeout == "" || h.Retries < 1 || h.StartPeriod == "" {
			t.Errorf("%s: health check needs interval, timeout, retries and start_period: %+v", name, *h)
		}
	}
	// The server's check must use what its image has and what its config
	// serves: the frontend's HTTP API port (7243, see the config test).
	if test := strings.Join(c.service(t, svcServer).Healthcheck.Test, " "); !strings.Contains(test, ":7243/") {
		t.Errorf("temporal health check %q does not probe the frontend HTTP port 7243", test)
	}
	if test := strings.Join(c.service(t, svcPostgres).Healthcheck.Test, " "); !strings.Contains(test, "pg_isready") {
		t.Errorf("postgresql health check %q does not use pg_isready", test)
	}
}

func TestStartupOrder(t *testing.T) {
	c := loadCompose(t)
	want := map[string]map[string]string{
		svcSchema: {svcPostgres: "service_healthy"},
		svcServer: {svcPostgres: "service_healthy", svcSchema: "service_completed_successfully"},
		svcSetup:  {svcServer: "service_healthy"},
		svcUI:     {svcServer: "service_healthy"},
	}
	for _, name := range sortedKeys(c.Services) {
		got := map[string]string{}
		for dep, d := range c.Services[name].DependsOn {
			got[dep] = d.Condition
			target, ok := c.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on unknown service %s", name, dep)
			case d.Condition == "service_healthy" && target.Healthcheck == nil:
				t.Errorf("%s waits for %s to be healthy, but %s has no health check", name, dep, dep)
			case d.Condition == "service_completed_successfully" && !oneShot[dep]:
				t.Errorf("%s waits for long-running %s to complete", name, dep)
			case d.Condition != "service_healthy" && d.Condition != "service_completed_successfully":
				t.Errorf("%s depends on %s with condition %q: want service_healthy or service_completed_successfully", name, dep, d.Condition)
			}
		}
		w := want[name]
		if w == nil {
			w = map[string]string{}
		}
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s depends_on %v, want %v", name, got, w)
		}
	}
}

// The scripts a service runs are bind-mounted from the repository: resolve a
// container path to the file here.
func hostPath(t *testing.T, s service, containerPath string) string {
	t.Helper()
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
			continue
		}
		src, dst := parts[0], parts[1]
		if containerPath == dst {
			return filepath.Join(repoRoot, src)
		}
		if rel, ok := strings.CutPrefix(containerPath, dst+"/"); ok {
			return filepath.Join(repoRoot, src, rel)
		}
	}
	t.Fatalf("%s is not bind-mounted from the repository", containerPath)
	return ""
}

func TestBindMountsExist(t *testing.T) {
	c := loadCompose(t)
	for _, name := range sortedKeys(c.Services) {
		for _, v := range c.Services[name].Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Errorf("%s: volume %q has no target", name, v)
				continue
			}
			src := parts[0]
			switch {
			case strings.HasPrefix(src, "./"):
				if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
					t.Errorf("%s: bind mount source: %v", name, err)
				}
				if len(parts) < 3 || parts[2] != "ro" {
					t.Errorf("%s: bind mount %q should be read-only", name, v)
				}
			case strings.HasPrefix(src, "/") || strings.HasPrefix(src, "."):
				t.Errorf("%s: bind mount %q: use a path under ./deploy", name, v)
			default:
				if _, ok := c.Volumes[src]; !ok {
					t.Errorf("%s: named volume %q is not declared", name, src)
				}
			}
		}
	}
	for _, name := range []string{svcSchema, svcSetup} {
		s := c.service(t, name)
		if len(s.Entrypoint) != 2 || s.Entrypoint[0] != "/bin/sh" {
			t.Errorf("%s: entrypoint %q, want [/bin/sh SCRIPT] (the admin-tools image need not have bash)", name, s.Entrypoint)
			continue
		}
		if _, err := os.Stat(hostPath(t, s, s.Entrypoint[1])); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Compose fails on a "$" that is neither "$$" nor a well-formed ${...}; and a
// variable without a default would expand to an empty string.
func TestInterpolation(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, composeFile))
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "$") {
			for _, m := range interpolation.FindAllStringSubmatch(n.Value, -1) {
				if m[0] != "$$" && m[2] != ":-" {
					t.Errorf("line %d: %s has no default (write ${%s:-value})", n.Line, m[0], m[1])
				}
			}
			if rest := interpolation.ReplaceAllString(n.Value, ""); strings.Contains(rest, "$") {
				t.Errorf("line %d: %q has a $ that Compose cannot interpolate (write $$ for a literal $)", n.Line, n.Value)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
}

// secretKey matches environment variables that hold credentials.
var secretKey = regexp.MustCompile(`(?i)(PASSWORD|PWD|SECRET|TOKEN|API_?KEY|CREDENTIAL)`)

func TestNoSecretsButDevDefaults(t *testing.T) {
	c := loadCompose(t)
	for _, name := range sortedKeys(c.Services) {
		env := c.Services[name].Environment
		for _, k := range sortedKeys(env) {
			if !secretKey.MatchString(k) {
				continue
			}
			if v := expand(env[k]); !devDefaults[v] {
				t.Errorf("%s: %s defaults to %q, want one of the development defaults %v", name, k, v, sortedKeys(devDefaults))
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, composeFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"PRIVATE KEY", "ALLOT_VENDOR_API_KEY", "TEMPORAL_API_KEY", "sk-", "ghp_"} {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("%s contains %q", composeFile, s)
		}
	}
}

// The three services that talk to PostgreSQL as Temporal agree on who and
// where, and the role's password is the one the init script gives it.
func TestDatabaseSettingsAgree(t *testing.T) {
	c := loadCompose(t)
	pg, schema, server := c.service(t, svcPostgres), c.service(t, svcSchema), c.service(t, svcServer)
	check := func(what, a, b string) {
		if a != b {
			t.Errorf("%s: %q != %q", what, a, b)
		}
	}
	check("temporal password (postgresql vs temporal-schema)", pg.Environment["TEMPORAL_DB_PASSWORD"], schema.Environment["SQL_PASSWORD"])
	check("temporal password (postgresql vs temporal)", pg.Environment["TEMPORAL_DB_PASSWORD"], server.Environment["POSTGRES_PWD"])
	for _, k := range []string{"POSTGRES_SEEDS", "DB_PORT", "POSTGRES_USER", "DBNAME", "VISIBILITY_DBNAME"} {
		check(k+" (temporal-schema vs temporal)", schema.Environment[k], server.Environment[k])
	}
	check("POSTGRES_SEEDS", server.Environment["POSTGRES_SEEDS"], svcPostgres)
	check("DB", server.Environment["DB"], "postgres12")
}

// The temporal service's environment, rendered through the server's own
// embedded config template (the one the image uses), gives PostgreSQL
// persistence, SQL visibility and the mounted dynamic config.
func TestServerConfigFromEnvironment(t *testing.T) {
	c := loadCompose(t)
	s := c.service(t, svcServer)
	for k, v := range s.Environment {
		t.Setenv(k, expand(v))
	}
	for _, k := range []string{"ENABLE_ES", "SQL_TLS_ENABLED", "TEMPORAL_BROADCAST_ADDRESS", "FRONTEND_GRPC_PORT", "FRONTEND_HTTP_PORT"} {
		if _, set := s.Environment[k]; !set {
			t.Setenv(k, "")
		}
	}
	t.Setenv("BIND_ON_IP", "172.18.0.4") // what the image's entrypoint sets: the container's address
	cfg, err := config.Load(config.WithEmbedded())
	if err != nil {
		t.Fatalf("render the server config from the temporal service's environment: %v", err)
	}
	p := cfg.Persistence
	for _, store := range []struct{ name, db string }{
		{p.DefaultStore, "temporal"},
		{p.VisibilityStore, "temporal_visibility"},
	} {
		ds, ok := p.DataStores[store.name]
		if !ok || ds.SQL == nil {
			t.Errorf("datastore %q is not SQL: %+v", store.name, ds)
			continue
		}
		got := []string{ds.SQL.PluginName, ds.SQL.DatabaseName, ds.SQL.ConnectAddr, ds.SQL.User, ds.SQL.Password}
		want := []string{"postgres12", store.db, "postgresql:5432", "temporal", "temporal"}
		if !slices.Equal(got, want) {
			t.Errorf("datastore %q: plugin, database, address, user, password = %q, want %q", store.name, got, want)
		}
	}
	if p.NumHistoryShards < 1 {
		t.Errorf("numHistoryShards = %d", p.NumHistoryShards)
	}
	fe := cfg.Services["frontend"].RPC
	if fe.GRPCPort != 7233 || fe.HTTPPort != 7243 {
		t.Errorf("frontend ports grpc %d, http %d; want 7233 (published) and 7243 (health check)", fe.GRPCPort, fe.HTTPPort)
	}
	if cfg.DynamicConfigClient == nil {
		t.Fatal("no dynamic config client")
	}
	dc := cfg.DynamicConfigClient.Filepath
	if !filepath.IsAbs(dc) {
		t.Errorf("dynamic config path %q should be absolute", dc)
	}
	host := hostPath(t, s, dc)
	if fi, err := os.Stat(host); err != nil || fi.IsDir() {
		t.Errorf("dynamic config %s (mounted as %s) is not a file: %v", host, dc, err)
	}
}

// The server refuses to start on a dynamic config file with errors; warnings
// (unknown keys, bad values) mean a setting silently does nothing.
func TestDynamicConfigIsValid(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("temporal", "dynamicconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res := dynamicconfig.LoadYamlFile(data)
	for _, e := range res.Errors {
		t.Errorf("dynamic config error: %v", e)
	}
	for _, w := range res.Warnings {
		t.Errorf("dynamic config warning: %v", w)
	}
	if len(res.Map) == 0 {
		t.Error("dynamic config sets nothing")
	}
}

// temporal-setup registers exactly allot's search attributes, with the types
// allot's workflows use (workflows.SearchAttributeTypes).
func TestSetupRegistersAllotSearchAttributes(t *testing.T) {
	c := loadCompose(t)
	got := setupAttributes(t, c.service(t, svcSetup).Command)
	want := map[string]string{}
	for name, typ := range workflows.SearchAttributeTypes() {
		want[name] = shorthand(t, typ)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("temporal-setup registers %v, want workflows.SearchAttributeTypes() = %v", got, want)
	}
}

// setupAttributes reads temporal-setup's NAME=Type arguments.
func setupAttributes(t *testing.T, args []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range args {
		name, typ, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			t.Errorf("temporal-setup argument %q: want NAME=Type", a)
			continue
		}
		if _, dup := out[name]; dup {
			t.Errorf("temporal-setup registers %s twice", name)
		}
		// The CLI accepts the shorthand names only (Keyword, Int, ...).
		if _, ok := enumspb.IndexedValueType_shorthandValue[typ]; !ok {
			t.Errorf("temporal-setup argument %q: %q is not a search attribute type the temporal CLI knows", a, typ)
		}
		out[name] = typ
	}
	return out
}

func shorthand(t *testing.T, typ enumspb.IndexedValueType) string {
	t.Helper()
	for name, v := range enumspb.IndexedValueType_shorthandValue {
		if enumspb.IndexedValueType(v) == typ {
			return name
		}
	}
	t.Fatalf("no shorthand for %v", typ)
	return ""
}

// shellScripts lists every script under deploy/.
func shellScripts(t *testing.T) []string {
	t.Helper()
	var scripts []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".sh") {
			scripts = append(scripts, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(scripts) == 0 {
		t.Fatal("no scripts found under deploy/")
	}
	return scripts
}

func TestScriptsParse(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	for _, path := range shellScripts(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("#!/bin/")) {
			t.Errorf("%s: no #! line", path)
		}
		if bytes.Contains(data, []byte("\r\n")) {
			t.Errorf("%s: CRLF line endings", path)
		}
		if out, err := exec.Command(bash, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", path, err, out)
		}
		// The admin-tools scripts run under the image's POSIX sh: check
		// them with this machine's sh (dash on Debian) too.
		if bytes.HasPrefix(data, []byte("#!/bin/sh")) {
			if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
				t.Errorf("sh -n %s: %v\n%s", path, err, out)
			}
		}
	}
}

// stubs writes fake commands into a directory for the scripts to call; each
// appends its arguments, one call a line, to $STUB_LOG.
func stubs(t *testing.T, scripts map[string]string) (dir, log string) {
	t.Helper()
	dir = t.TempDir()
	log = filepath.Join(dir, "calls.log")
	for name, body := range scripts {
		script := "#!/bin/sh\necho \"" + name + " $*\" >>\"$STUB_LOG\"\n" + body + "\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, log
}

// runScript runs a service's script the way its container does, with the
// service's environment and the stubs first on PATH.
func runScript(t *testing.T, shell, script string, env map[string]string, stubDir, log string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(shell, append([]string{script}, args...)...)
	cmd.Env = []string{"PATH=" + stubDir + string(os.PathListSeparator) + "/usr/bin:/bin", "STUB_LOG=" + log, "STUB_DIR=" + stubDir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+expand(v))
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func calls(t *testing.T, log string) []string {
	t.Helper()
	data, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func requireShell(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found", name)
	}
	return path
}

// temporal-setup.sh, run with the compose service's environment and arguments
// against a stub temporal CLI: health first, the namespace created only when
// missing, and one search-attribute create with exactly allot's attributes.
func TestSetupScript(t *testing.T) {
	sh := requireShell(t, "sh")
	c := loadCompose(t)
	s := c.service(t, svcSetup)
	script := hostPath(t, s, s.Entrypoint[1])
	dir, log := stubs(t, map[string]string{"temporal": `
case "$1 $2 $3" in
"operator namespace describe") test -f "$STUB_DIR/namespace-exists" ;;
"operator namespace create") touch "$STUB_DIR/namespace-exists" ;;
esac`})

	out, err := runScript(t, sh, script, s.Environment, dir, log, s.Command...)
	if err != nil {
		t.Fatalf("temporal-setup.sh: %v\n%s", err, out)
	}
	address, namespace := s.Environment["TEMPORAL_ADDRESS"], s.Environment["TEMPORAL_NAMESPACE"]
	target := "--address " + address + " --namespace " + namespace
	got := calls(t, log)
	want := []string{
		"temporal operator cluster health --address " + address,
		"temporal operator namespace describe " + target,
		"temporal operator namespace create " + target + " --retention " + s.Environment["ALLOT_NAMESPACE_RETENTION"] + " --description allot",
	}
	if len(got) < len(want)+2 || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("calls:\n%s\nwant them to start with:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	create, ok := strings.CutPrefix(got[len(want)], "temporal operator search-attribute create "+target+" ")
	if !ok {
		t.Fatalf("call %q, want a search-attribute create in %s", got[len(want)], target)
	}
	fields := strings.Fields(create)
	registered := map[string]string{}
	for i := 0; i+3 < len(fields); i += 4 {
		if fields[i] != "--name" || fields[i+2] != "--type" {
			t.Fatalf("search-attribute create arguments %q: want --name N --type T pairs", create)
		}
		registered[fields[i+1]] = fields[i+3]
	}
	if len(fields)%4 != 0 || fmt.Sprint(registered) != fmt.Sprint(setupAttributes(t, s.Command)) {
		t.Errorf("search-attribute create %q registers %v, want %v", create, registered, setupAttributes(t, s.Command))
	}

	// Again, now that the namespace exists: nothing is created twice.
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	if out, err := runScript(t, sh, script, s.Environment, dir, log, s.Command...); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	for _, call := range calls(t, log) {
		if strings.HasPrefix(call, "temporal operator namespace create") {
			t.Errorf("second run created the namespace again: %s", call)
		}
	}
}

// A refused registration (say, an attribute that exists with another type)
// fails the service instead of passing silently.
func TestSetupScriptFailsWhenRegistrationFails(t *testing.T) {
	sh := requireShell(t, "sh")
	c := loadCompose(t)
	s := c.service(t, svcSetup)
	dir, log := stubs(t, map[string]string{"temporal": `
case "$1 $2 $3" in
"operator search-attribute create") echo "search attribute AllotSequence already exists and has different type Keyword" >&2; exit 1 ;;
esac`})
	env := map[string]string{"SETUP_ATTEMPTS": "1"}
	for k, v := range s.Environment {
		env[k] = v
	}
	out, err := runScript(t, sh, hostPath(t, s, s.Entrypoint[1]), env, dir, log, s.Command...)
	if err == nil {
		t.Fatalf("temporal-setup.sh succeeded although registration failed:\n%s", out)
	}
	if out, err := runScript(t, sh, hostPath(t, s, s.Entrypoint[1]), env, dir, log, "AllotSequence"); err == nil {
		t.Errorf("temporal-setup.sh accepted an argument without a type:\n%s", out)
	}
}

// temporal-schema.sh, run with the compose service's environment against a
// stub temporal-sql-tool: both databases created, versioned and migrated with
// the postgres12 plugin, and the password never on a command line.
func TestSchemaScript(t *testing.T) {
	sh := requireShell(t, "sh")
	c := loadCompose(t)
	s := c.service(t, svcSchema)
	schemaRoot := t.TempDir()
	for _, d := range []string{"temporal/versioned", "visibility/versioned"} {
		if err := os.MkdirAll(filepath.Join(schemaRoot, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, log := stubs(t, map[string]string{"temporal-sql-tool": `
case "$*" in
*create-database*) echo "database exists" >&2; exit 1 ;;
esac`})
	env := map[string]string{"TEMPORAL_SCHEMA_DIR": schemaRoot}
	for k, v := range s.Environment {
		env[k] = v
	}
	out, err := runScript(t, sh, hostPath(t, s, s.Entrypoint[1]), env, dir, log)
	if err != nil {
		t.Fatalf("temporal-schema.sh: %v\n%s", err, out)
	}
	conn := "temporal-sql-tool --plugin postgres12 --endpoint " + svcPostgres + " --port " + s.Environment["DB_PORT"] + " --user " + s.Environment["POSTGRES_USER"]
	var want []string
	for _, db := range []struct{ name, dir string }{
		{s.Environment["DBNAME"], "temporal"},
		{s.Environment["VISIBILITY_DBNAME"], "visibility"},
	} {
		want = append(want,
			conn+" --database "+db.name+" create-database",
			conn+" --database "+db.name+" setup-schema -v 0.0",
			conn+" --database "+db.name+" update-schema -d "+filepath.Join(schemaRoot, db.dir, "versioned"),
		)
	}
	got := calls(t, log)
	if !slices.Equal(got, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, call := range got {
		if strings.Contains(call, "--password") || strings.Contains(call, "--pw") {
			t.Errorf("password on the command line (temporal-sql-tool reads SQL_PASSWORD): %s", call)
		}
	}
}

func TestSchemaScriptFailsWithoutSchemaFiles(t *testing.T) {
	sh := requireShell(t, "sh")
	c := loadCompose(t)
	s := c.service(t, svcSchema)
	dir, log := stubs(t, map[string]string{"temporal-sql-tool": ""})
	env := map[string]string{"TEMPORAL_SCHEMA_DIR": t.TempDir()}
	for k, v := range s.Environment {
		env[k] = v
	}
	if out, err := runScript(t, sh, hostPath(t, s, s.Entrypoint[1]), env, dir, log); err == nil {
		t.Errorf("temporal-schema.sh succeeded without schema files:\n%s", out)
	}
	if got := calls(t, log); len(got) != 0 {
		t.Errorf("temporal-sql-tool called without schema files: %q", got)
	}
}

// The PostgreSQL init script, run with the postgresql service's environment
// against a stub psql, creates the temporal role and allot's ledger database,
// passing the passwords as psql variables, not inside the SQL text.
func TestPostgresInitScript(t *testing.T) {
	bash := requireShell(t, "bash")
	c := loadCompose(t)
	s := c.service(t, svcPostgres)
	initDir := hostPath(t, s, "/docker-entrypoint-initdb.d")
	scripts, err := filepath.Glob(filepath.Join(initDir, "*.sh"))
	if err != nil || len(scripts) != 1 {
		t.Fatalf("init scripts %v (%v), want one", scripts, err)
	}
	dir, log := stubs(t, map[string]string{"psql": `cat >"$STUB_DIR/psql.sql"`})
	if out, err := runScript(t, bash, scripts[0], s.Environment, dir, log); err != nil {
		t.Fatalf("%s: %v\n%s", scripts[0], err, out)
	}
	got := calls(t, log)
	if len(got) != 1 {
		t.Fatalf("psql calls %q, want one", got)
	}
	for _, arg := range []string{
		"--username " + s.Environment["POSTGRES_USER"],
		"--dbname " + s.Environment["POSTGRES_DB"],
		"-v ON_ERROR_STOP=1",
		"-v temporal_password=" + expand(s.Environment["TEMPORAL_DB_PASSWORD"]),
		"-v allot_password=" + expand(s.Environment["ALLOT_DB_PASSWORD"]),
	} {
		if !strings.Contains(got[0], arg) {
			t.Errorf("psql %q lacks %q", got[0], arg)
		}
	}
	sql, err := os.ReadFile(filepath.Join(dir, "psql.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"CREATE ROLE temporal LOGIN CREATEDB PASSWORD :'temporal_password';",
		"CREATE ROLE allot LOGIN PASSWORD :'allot_password';",
		"CREATE DATABASE allot OWNER allot;",
	} {
		if !strings.Contains(string(sql), stmt) {
			t.Errorf("init SQL lacks %q:\n%s", stmt, sql)
		}
	}
	// The Temporal role is the one temporal-schema and the server log in as.
	if u := c.service(t, svcServer).Environment["POSTGRES_USER"]; u != "temporal" {
		t.Errorf("temporal logs in as %q, but the init script creates role temporal", u)
	}
}

// docs/deploying.md's ALLOT_LEDGER is the ledger database this stack
// creates, at the address it publishes, with its default password.
func TestDocsLedgerURL(t *testing.T) {
	c := loadCompose(t)
	pg := c.service(t, svcPostgres)
	data, err := os.ReadFile("../docs/deploying.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`ALLOT_LEDGER='([^']+)'`).FindSubmatch(data)
	if m == nil {
		t.Fatal("docs/deploying.md sets no ALLOT_LEDGER='...'")
	}
	u, err := url.Parse(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	var published publishedPort
	for _, spec := range pg.Ports {
		if p, err := parsePort(spec); err == nil && p.container == "5432" {
			published = p
		}
	}
	password, _ := u.User.Password()
	got := []string{u.Scheme, u.User.Username(), password, u.Hostname(), u.Port(), u.Path, u.Query().Get("sslmode")}
	want := []string{"postgres", "allot", expand(pg.Environment["ALLOT_DB_PASSWORD"]), published.ip, published.host, "/allot", "disable"}
	if !slices.Equal(got, want) {
		t.Errorf("ALLOT_LEDGER %s: scheme, user, password, host, port, path, sslmode = %q, want %q", u.Redacted(), got, want)
	}
	for _, s := range []string{"TEMPORAL_ADDRESS=127.0.0.1:7233", "TEMPORAL_NAMESPACE=default", composeFile, "temporal operator search-attribute create"} {
		if !bytes.Contains(data, []byte(s)) {
			t.Errorf("docs/deploying.md does not mention %q", s)
		}
	}
}
