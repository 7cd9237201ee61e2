// Package app wires allot's production processes: the configuration
// (Config, from ALLOT_* variables), the Temporal connection (envconfig
// profiles, TemporalOptions) and the worker (RunWorker). A custom worker
// is a main that calls RunWorker with a WorkerConfig naming its own Go
// steps (Steps) and Go vendor adapters (Vendors); see
// examples/custom-worker. The mains (worker/, starter/) parse flags and
// call into here; the dev setup (internal/devstack) builds on it.
//
// app must stay light: it is linked into the worker and the starter, so it
// imports neither the embedded Temporal server nor the operator commands nor
// the simulated vendor (deps_test.go fails if the worker or the starter
// links go.temporal.io/server again).
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	tlog "go.temporal.io/sdk/log"

	"allot/pipeline"
	"allot/workflows"
)

// Environment variables read by ConfigFromEnv. The Temporal connection is
// configured by Temporal's own variables (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// TEMPORAL_API_KEY, TLS, profiles) through envconfig.
const (
	EnvLedger    = "ALLOT_LEDGER"
	EnvPipelines = "ALLOT_PIPELINES"
	EnvDataDir   = "ALLOT_DATA_DIR"
	EnvTaskQueue = "ALLOT_TASK_QUEUE"
	EnvVendorURL = "ALLOT_VENDOR_URL"
	// EnvConsoleTokenFile names the operator page's token file (starter
	// console); it names a file and never holds a token.
	EnvConsoleTokenFile = "ALLOT_CONSOLE_TOKEN_FILE"
)

// Defaults of the embedded setup.
const (
	DefaultDataDir = "data"
	DefaultLedger  = "sqlite:data/allot.db"
)

// Config is allot's configuration apart from the Temporal connection.
type Config struct {
	Ledger    string // "sqlite:PATH" or a postgres:// URL
	Pipelines string // pipeline file; "" = the embedded default
	DataDir   string // artifacts go to DataDir/artifacts
	TaskQueue string
	// VendorURL is the paid vendor's API; its key is read by the paid
	// activities from ALLOT_VENDOR_API_KEY(_FILE), never from here.
	VendorURL string
	// VendorLimits are the default vendor's controls from ALLOT_VENDOR_*
	// (pipeline.DefaultVendorEnv); vendorLimitsErr says why they did not
	// parse (Validate reports it).
	VendorLimits    pipeline.VendorLimits
	vendorLimitsErr error
}

// ConfigFromEnv reads the ALLOT_* variables; unset ones keep their defaults.
// Every name it reads is in KnownEnv.
func ConfigFromEnv() Config { return configFrom(os.Getenv) }

func configFrom(getenv func(string) string) Config {
	limits, err := pipeline.LimitsFromEnv(getenv)
	return Config{
		Ledger:          getenv(EnvLedger),
		Pipelines:       getenv(EnvPipelines),
		DataDir:         getenv(EnvDataDir),
		TaskQueue:       getenv(EnvTaskQueue),
		VendorURL:       getenv(EnvVendorURL),
		VendorLimits:    limits,
		vendorLimitsErr: err,
	}
}

// WithDefaults fills what is unset.
func (c Config) WithDefaults() Config {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Ledger == "" {
		c.Ledger = "sqlite:" + filepath.Join(c.DataDir, "allot.db")
	}
	if c.TaskQueue == "" {
		c.TaskQueue = workflows.TaskQueue
	}
	return c
}

// Validate fails fast, naming the setting and how to fix it.
func (c Config) Validate() error {
	var errs []error
	if !strings.HasPrefix(c.Ledger, "sqlite:") && !strings.HasPrefix(c.Ledger, "postgres://") && !strings.HasPrefix(c.Ledger, "postgresql://") {
		errs = append(errs, fmt.Errorf("%s=%q: use sqlite:PATH or a postgres:// URL", EnvLedger, c.Ledger))
	}
	if c.Ledger == "sqlite:" {
		errs = append(errs, fmt.Errorf("%s=%q names no file: use sqlite:PATH, e.g. %s", EnvLedger, c.Ledger, DefaultLedger))
	}
	if strings.TrimSpace(c.TaskQueue) == "" || strings.ContainsAny(c.TaskQueue, " \t\n") {
		errs = append(errs, fmt.Errorf("%s=%q: use a task queue name without spaces", EnvTaskQueue, c.TaskQueue))
	}
	if c.VendorURL != "" {
		if u, err := url.Parse(c.VendorURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s=%q: use the vendor's base URL, e.g. http://127.0.0.1:8787", EnvVendorURL, c.VendorURL))
		} else if u.User != nil {
			errs = append(errs, fmt.Errorf("%s must not carry credentials: put the API key in ALLOT_VENDOR_API_KEY or ALLOT_VENDOR_API_KEY_FILE", EnvVendorURL))
		}
	}
	if c.vendorLimitsErr != nil {
		errs = append(errs, c.vendorLimitsErr)
	}
	return errors.Join(errs...)
}

// CheckListenPort refuses a HOST:PORT a server flag was given whose port
// no listener can take (not a number, or outside 0 to 65535), before
// anything starts: the listen would fail as if another process held the
// port. The caller adds the command line that fixes it (WithFlag).
func CheckListenPort(flagName, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q is not HOST:PORT", flagName, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%s %q: port %s is out of range: give a port from 1 to 65535 (0: any free one)", flagName, addr, port)
	}
	return nil
}

// WithFlag is the command line args with flag name ("--addr") given value
// instead of the one it has, however it was written (--addr X, -addr X,
// --addr=X); added at the end if it has none: the fixed command line a
// refusal prints.
func WithFlag(args []string, name, value string) []string {
	bare := strings.TrimLeft(name, "-")
	out := make([]string, 0, len(args)+2)
	found := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		flagName, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || flagName != bare || a == "--" {
			out = append(out, a)
			continue
		}
		found = true
		out = append(out, "--"+bare, value)
		if !hasValue {
			i++ // the old value
		}
	}
	if !found {
		out = append(out, "--"+bare, value)
	}
	return out
}

// LoadPipelines reads the configured pipeline file, with the default
// vendor's controls from ALLOT_VENDOR_*.
func (c Config) LoadPipelines() (*pipeline.Set, error) {
	set, err := pipeline.Load(c.Pipelines)
	if err != nil {
		return nil, err
	}
	return set.WithDefaultLimits(c.VendorLimits)
}

// TemporalOptions loads the Temporal connection from envconfig (config file,
// profile and TEMPORAL_* variables); address and namespace override it when set.
func TemporalOptions(address, namespace string, logger *slog.Logger) (client.Options, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return client.Options{}, temporalConfigError(err, os.Getenv)
	}
	if address != "" {
		opts.HostPort = address
	}
	if namespace != "" {
		opts.Namespace = namespace
	}
	if logger != nil {
		opts.Logger = tlog.NewStructuredLogger(logger)
	}
	return opts, nil
}

// NamespaceSource names what set the namespace TemporalOptions returns, so
// that an error about it says what to change: the --namespace flag (when
// flagNamespace is set), TEMPORAL_NAMESPACE, the envconfig profile, or the
// default.
func NamespaceSource(flagNamespace string) string {
	switch {
	case flagNamespace != "":
		return "--namespace"
	case os.Getenv("TEMPORAL_NAMESPACE") != "":
		return "TEMPORAL_NAMESPACE"
	}
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{DisableEnv: true})
	if err == nil && prof.Namespace != "" {
		name, file := os.Getenv("TEMPORAL_PROFILE"), os.Getenv("TEMPORAL_CONFIG_FILE")
		if name == "" {
			name = envconfig.DefaultConfigFileProfile
		}
		if file == "" {
			file = envconfig.DefaultConfigFilePath()
		}
		return fmt.Sprintf("namespace of profile %q in %s", name, file)
	}
	return "the default: no --namespace, TEMPORAL_NAMESPACE or profile sets one"
}

// CheckNamespace asks the server for the namespace c was dialed with, and
// turns "not found" into an error that names the namespace, what set it
// (source, from NamespaceSource) and the fix. Other errors (a key allowed
// to use a namespace but not to describe it) are left to the calls that
// use it.
func CheckNamespace(ctx context.Context, c client.Client, opts client.Options, source string) error {
	ns := opts.Namespace
	if ns == "" {
		ns = client.DefaultNamespace
	}
	_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	var nsNotFound *serviceerror.NamespaceNotFound
	var notFound *serviceerror.NotFound
	if !errors.As(err, &nsNotFound) && !errors.As(err, &notFound) {
		return nil
	}
	fix := "set TEMPORAL_NAMESPACE to an existing namespace"
	switch {
	case source == "--namespace":
		fix = "pass --namespace with an existing namespace"
	case strings.HasPrefix(source, "namespace of profile"):
		fix = "change that profile's namespace, or set TEMPORAL_NAMESPACE, to an existing namespace"
	}
	addr := hostPort(opts)
	return fmt.Errorf("namespace %q (set by %s) does not exist on the Temporal server at %s: %s (list them with `temporal operator namespace list --address %s`), or create it: on a dev server `temporal operator namespace create --namespace %s --address %s`, on Temporal Cloud in its web console",
		ns, source, addr, fix, addr, ns, addr)
}

// RedactURL hides a password in a database URL before it is logged.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}
