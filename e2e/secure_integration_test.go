package e2e

// Issue 25 §4, "Temporal Cloud and secured clusters": the worker and the
// starter binaries connect to a server that wants mutual TLS or an API key
// with nothing but what an operator sets (TEMPORAL_* variables, or a
// profile in a config file), run an episode end to end, and refuse wrong
// credentials naming what to fix, without ever showing the key.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"allot/internal/allottest"
	"allot/paidvendor/paidvendortest"
)

// secureSetup is one secured server with the binaries and what allot
// itself needs (ledger, pipelines, vendor).
type secureSetup struct {
	srv                   *allottest.SecureServer
	workerBin, starterBin string
	allotEnv              []string
}

func newSecureSetup(t *testing.T, srv *allottest.SecureServer) *secureSetup {
	t.Helper()
	dir := t.TempDir()
	vendor := allottest.NewVendor(t, paidvendortest.SimConfig{Seed: 7, TaskDuration: 200 * time.Millisecond})
	return &secureSetup{
		srv: srv, workerBin: allottest.BuildBinary(t, "allot/worker"), starterBin: allottest.BuildBinary(t, "allot/starter"),
		allotEnv: []string{
			"ALLOT_LEDGER=sqlite:" + filepath.Join(dir, "allot.db"),
			"ALLOT_PIPELINES=" + allottest.WritePipelines(t, dir),
			"ALLOT_DATA_DIR=" + dir,
			"ALLOT_VENDOR_URL=" + vendor.URL,
			"ALLOT_VENDOR_API_KEY=" + allottest.VendorKey,
		},
	}
}

// env is a process environment with allot's settings and the Temporal ones
// given, and nothing of the caller's.
func (s *secureSetup) env(t *testing.T, temporal ...string) []string {
	t.Helper()
	return allottest.CleanEnv(t, append(append([]string{}, s.allotEnv...), temporal...)...)
}

// serve starts a worker with env and waits until it serves.
func (s *secureSetup) serve(t *testing.T, env []string) *allottest.Process {
	t.Helper()
	cmd := exec.Command(s.workerBin)
	cmd.Env = env
	w := allottest.StartProcess(t, cmd)
	w.WaitOutput(t, regexp.MustCompile(`allot worker starting`), 2*time.Minute)
	return w
}

// runEpisode runs weekly-video once with the starter and follows its
// episode to the end.
func (s *secureSetup) runEpisode(t *testing.T, env []string, nominal string) {
	t.Helper()
	cmd := exec.Command(s.starterBin, "run", "--pipeline", "weekly-video", "--nominal-time", nominal, "--follow")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`episode stage\s+completed`).Match(out) {
		t.Fatalf("starter run --follow: %v\n%s", err, out)
	}
}

// refused runs the worker and then the starter with env and returns what
// each printed: both must fail.
func (s *secureSetup) refused(t *testing.T, env []string) (worker, starter string) {
	t.Helper()
	cmd := exec.Command(s.workerBin)
	cmd.Env = env
	w := allottest.StartProcess(t, cmd)
	var exit *exec.ExitError
	if err := w.Wait(t, 2*time.Minute); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("worker with wrong credentials: %v, want exit 1\n%s", err, w.Output.String())
	}
	st := exec.Command(s.starterBin, "schedule", "list")
	st.Env = env
	out, err := st.CombinedOutput()
	if err == nil {
		t.Fatalf("starter schedule list with wrong credentials succeeded:\n%s", out)
	}
	return w.Output.String(), string(out)
}

func mustSay(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s does not say %q:\n%s", what, w, out)
		}
	}
}

// Mutual TLS from TEMPORAL_* variables: the worker serves and an episode
// runs to the end; without a client certificate both binaries stop, naming
// the variables to set.
func TestWorkerAndStarterOverMutualTLS(t *testing.T) {
	srv := allottest.StartMTLSServer(t)
	s := newSecureSetup(t, srv)
	base := []string{"TEMPORAL_ADDRESS=" + srv.Address, "TEMPORAL_NAMESPACE=" + srv.Namespace,
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + srv.Certs.CAPath}
	good := s.env(t, append(base,
		"TEMPORAL_TLS_CLIENT_CERT_PATH="+srv.Certs.ClientCertPath,
		"TEMPORAL_TLS_CLIENT_KEY_PATH="+srv.Certs.ClientKeyPath)...)

	worker, starter := s.refused(t, s.env(t, base...))
	for what, out := range map[string]string{"worker": worker, "starter": starter} {
		mustSay(t, what, out, "client certificate", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH")
	}

	s.serve(t, good)
	s.runEpisode(t, good, "2026-08-03T02:00:00Z")
}

// An API key from a profile (TEMPORAL_CONFIG_FILE and TEMPORAL_PROFILE),
// then from TEMPORAL_API_KEY: the worker serves and an episode runs to the
// end. A wrong key stops both binaries naming TEMPORAL_API_KEY and the
// profile, and no key, right or wrong, is ever in their output.
func TestWorkerAndStarterWithAnAPIKey(t *testing.T) {
	key := fmt.Sprintf("allot-test-key-%d-KEEP-SECRET", time.Now().UnixNano())
	wrong := "wrong-" + key
	srv := allottest.StartAPIKeyServer(t, key)
	s := newSecureSetup(t, srv)
	config := filepath.Join(t.TempDir(), "temporal.toml")
	profile := fmt.Sprintf(`[profile.cloud]
address = %q
namespace = %q
api_key = %q

[profile.cloud.tls]
server_ca_cert_path = %q
`, srv.Address, srv.Namespace, key, srv.Certs.CAPath)
	if err := os.WriteFile(config, []byte(profile), 0o600); err != nil {
		t.Fatal(err)
	}
	fromProfile := []string{"TEMPORAL_CONFIG_FILE=" + config, "TEMPORAL_PROFILE=cloud"}

	worker, starter := s.refused(t, s.env(t, append(fromProfile, "TEMPORAL_API_KEY="+wrong)...))
	for what, out := range map[string]string{"worker": worker, "starter": starter} {
		mustSay(t, what, out, "refused the API key", "TEMPORAL_API_KEY", `profile "cloud"`)
		if strings.Contains(out, key) {
			t.Errorf("%s shows the API key:\n%s", what, out)
		}
	}

	w := s.serve(t, s.env(t, fromProfile...))
	s.runEpisode(t, s.env(t, fromProfile...), "2026-08-03T02:00:00Z")
	fromEnv := s.env(t, "TEMPORAL_ADDRESS="+srv.Address, "TEMPORAL_NAMESPACE="+srv.Namespace,
		"TEMPORAL_API_KEY="+key, "TEMPORAL_TLS_SERVER_CA_CERT_PATH="+srv.Certs.CAPath)
	s.runEpisode(t, fromEnv, "2026-08-10T02:00:00Z")
	if strings.Contains(w.Output.String(), key) {
		t.Errorf("the worker's log shows the API key:\n%s", w.Output.String())
	}
}
