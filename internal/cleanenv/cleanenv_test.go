package cleanenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/contrib/envconfig"
)

// An operator's shell: From drops every ALLOT_* and TEMPORAL_* variable
// but the tests' own ALLOT_TEST_*, names an empty profile file, and adds
// the given ones, which win over anything of the caller's.
func TestFromDropsEveryAllotAndTemporalVariableButTheGiven(t *testing.T) {
	caller := []string{
		"PATH=/usr/bin:/bin", "HOME=/home/op", "USER=op",
		"ALLOT_LEDGER=postgres://prod", "ALLOT_TASK_QUEUE=prod-queue", "ALLOT_VENDOR_API_KEY=prod-key",
		"ALLOT_VENDOR_RATEE=2", "ALLOT_TEST_POSTGRES_DSN=postgres://test",
		"TEMPORAL_ADDRESS=prod.tmprl.cloud:7233", "TEMPORAL_NAMESPACE=prod", "TEMPORAL_API_KEY=prod-key",
		"TEMPORAL_TLS_CLIENT_CERT_PATH=/etc/prod.pem", "TEMPORAL_GRPC_META_X=y", "TEMPORAL_PROFILE=prod",
		"TEMPORAL_CONFIG_FILE=/home/op/temporal.toml",
		"TEMPORALX=kept", "MY_ALLOT_LEDGER=kept",
	}
	got := From(caller, "ALLOT_TASK_QUEUE=test-queue", "TEMPORAL_ADDRESS=127.0.0.1:7233", "HOME=/tmp/home")
	want := []string{
		"PATH=/usr/bin:/bin", "USER=op", "ALLOT_TEST_POSTGRES_DSN=postgres://test",
		"TEMPORALX=kept", "MY_ALLOT_LEDGER=kept",
		"TEMPORAL_CONFIG_FILE=" + os.DevNull,
		"ALLOT_TASK_QUEUE=test-queue", "TEMPORAL_ADDRESS=127.0.0.1:7233", "HOME=/tmp/home",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("From(an operator's shell) =\n%q\nwant\n%q", got, want)
	}
	if got := From(caller, "TEMPORAL_CONFIG_FILE=/tmp/test.toml"); got[len(got)-1] != "TEMPORAL_CONFIG_FILE=/tmp/test.toml" ||
		slices.Contains(got, "TEMPORAL_CONFIG_FILE="+os.DevNull) {
		t.Fatalf("a given TEMPORAL_CONFIG_FILE must replace the empty one: %q", got)
	}
}

// Clear leaves envconfig nothing of the caller's: not its TEMPORAL_*
// variables, and not the default profile file in its config directory.
func TestClearLeavesEnvconfigNothingOfTheCallers(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	file := envconfig.DefaultConfigFilePath()
	if file == "" {
		t.Skip("this platform has no user config directory")
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	profile := "[profile.default]\naddress = \"operator.tmprl.cloud:7233\"\nnamespace = \"operator-ns\"\n"
	if err := os.WriteFile(file, []byte(profile), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() { // this shell's own, restored after the test
		if name, _, _ := strings.Cut(kv, "="); Dropped(name) {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	// The premise: without Clear, the operator's profile file is read.
	if opts, err := envconfig.LoadDefaultClientOptions(); err != nil || opts.HostPort != "operator.tmprl.cloud:7233" {
		t.Fatalf("envconfig did not read %s (%+v, %v): the test proves nothing", file, opts.HostPort, err)
	}
	t.Setenv("TEMPORAL_NAMESPACE", "operator-ns-from-env")
	t.Setenv("TEMPORAL_API_KEY", "operator-key")
	t.Setenv("ALLOT_TASK_QUEUE", "operator-queue")
	t.Setenv("ALLOT_TEST_PATIENCE", "3")

	if err := Clear(); err != nil {
		t.Fatal(err)
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != "" || opts.Namespace != "" || opts.Credentials != nil {
		t.Fatalf("after Clear, envconfig still gives address %q, namespace %q, credentials %v", opts.HostPort, opts.Namespace, opts.Credentials != nil)
	}
	if _, ok := os.LookupEnv("ALLOT_TASK_QUEUE"); ok {
		t.Fatal("ALLOT_TASK_QUEUE is still set after Clear")
	}
	if os.Getenv("ALLOT_TEST_PATIENCE") != "3" {
		t.Fatal("Clear dropped the tests' own ALLOT_TEST_PATIENCE")
	}
}
