package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"allot/internal/testcerts"
)

// fakeFrontend is a gRPC server that answers every call with
// PermissionDenied unless it carries "authorization: Bearer <key>" (then
// Unimplemented), as a secured frontend refuses a caller: enough to see what
// a client meets while connecting, without a Temporal server.
func fakeFrontend(t *testing.T, tlsCfg *tls.Config, key string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	opts = append(opts, grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		md, _ := metadata.FromIncomingContext(stream.Context())
		if key != "" && len(md.Get("authorization")) == 1 && md.Get("authorization")[0] == "Bearer "+key {
			return status.Error(codes.Unimplemented, "fake frontend")
		}
		return status.Error(codes.PermissionDenied, "Request unauthorized.")
	}))
	s := grpc.NewServer(opts...)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

func serverTLS(t *testing.T, certs *testcerts.Set, requireClientCert bool) *tls.Config {
	t.Helper()
	cert, err := tls.X509KeyPair(certs.ServerCertPEM, certs.ServerKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	if requireClientCert {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(certs.CAPEM)
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg
}

// clearTemporalEnv unsets every TEMPORAL_ variable the caller's shell may
// have, so that only what the test sets reaches envconfig.
func clearTemporalEnv(t *testing.T) {
	t.Helper()
	for _, name := range []string{EnvTemporalAddress, "TEMPORAL_NAMESPACE", EnvTemporalAPIKey, EnvTemporalTLS,
		EnvTemporalClientCert, EnvTemporalClientKey, EnvTemporalServerCA, EnvTemporalServerName,
		EnvTemporalProfile, EnvTemporalConfigFile, "TEMPORAL_TLS_CLIENT_CERT_DATA", "TEMPORAL_TLS_CLIENT_KEY_DATA",
		"TEMPORAL_TLS_SERVER_CA_CERT_DATA", "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "TEMPORAL_CLIENT_AUTHORITY"} {
		// Set or not is what counts to envconfig (an empty
		// TEMPORAL_TLS_CLIENT_CERT_PATH turns TLS on): restore, then unset.
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	// envconfig reads a default file from the user's config directory.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
}

// dialError connects as the worker and the starter do (envconfig from the
// environment) and returns the explained error.
func dialError(t *testing.T) error {
	t.Helper()
	opts, err := TemporalOptions("", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, opts)
	if err == nil {
		c.Close()
		t.Fatal("connected")
	}
	return ConnectError(err, opts, "is the server running?")
}

// A wrong or missing credential is refused with the variables that fix it,
// and the API key is never in the error.
func TestConnectErrorNamesTheSettingToFix(t *testing.T) {
	certs := testcerts.New(t, "allot-test")
	other := testcerts.New(t, "another")
	mtls := fakeFrontend(t, serverTLS(t, certs, true), "")
	const key = "tmprl-key-9f3c1d7e-DO-NOT-LOG"
	keyed := fakeFrontend(t, serverTLS(t, certs, false), key)
	plain := fakeFrontend(t, nil, "")
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"no client certificate", map[string]string{EnvTemporalAddress: mtls, EnvTemporalTLS: "true", EnvTemporalServerCA: certs.CAPath},
			[]string{"client certificate", EnvTemporalClientCert, EnvTemporalClientKey}},
		{"client certificate of another CA", map[string]string{EnvTemporalAddress: mtls, EnvTemporalServerCA: certs.CAPath,
			EnvTemporalClientCert: other.ClientCertPath, EnvTemporalClientKey: other.ClientKeyPath},
			[]string{"client certificate signed by a CA it trusts", EnvTemporalClientCert, EnvTemporalClientKey}},
		{"server CA unknown", map[string]string{EnvTemporalAddress: mtls,
			EnvTemporalClientCert: certs.ClientCertPath, EnvTemporalClientKey: certs.ClientKeyPath},
			[]string{"not trusted", EnvTemporalServerCA}},
		{"no TLS", map[string]string{EnvTemporalAddress: mtls},
			[]string{EnvTemporalTLS + "=true", EnvTemporalClientCert}},
		{"wrong API key", map[string]string{EnvTemporalAddress: keyed, EnvTemporalServerCA: certs.CAPath, EnvTemporalAPIKey: key + "-wrong"},
			[]string{"refused the API key", EnvTemporalAPIKey}},
		{"wrong API key from a profile", map[string]string{EnvTemporalAddress: keyed, EnvTemporalServerCA: certs.CAPath, EnvTemporalAPIKey: key + "-wrong",
			EnvTemporalProfile: "cloud", EnvTemporalConfigFile: writeProfile(t, "cloud")},
			[]string{"refused the API key", EnvTemporalAPIKey, `(or api_key of profile "cloud" in `}},
		{"no credentials", map[string]string{EnvTemporalAddress: plain},
			[]string{"wants credentials", EnvTemporalAPIKey, EnvTemporalClientCert}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearTemporalEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			err := dialError(t)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("error shows the API key:\n%v", err)
			}
		})
	}
}

// writeProfile writes a config file with an empty profile name: the
// environment sets its values.
func writeProfile(t *testing.T, name string) string {
	t.Helper()
	path := t.TempDir() + "/temporal.toml"
	if err := os.WriteFile(path, []byte("[profile."+name+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A profile that is not in the file, or a file that is not there, names
// the variable to fix and the profiles there are; a secret that does not
// parse is not shown.
func TestTemporalConfigErrorsNameTheProfileAndHideSecrets(t *testing.T) {
	const secret = "SECRETKEY123"
	dir := t.TempDir()
	file := func(name, body string) string {
		path := dir + "/" + name
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := file("good.toml", "[profile.cloud]\naddress = \"x:7233\"\n[profile.staging]\naddress = \"y:7233\"\n")
	for _, tc := range []struct {
		name, file, profile string
		want                []string
	}{
		{"unknown profile", good, "prod", []string{`TEMPORAL_PROFILE="prod" is not a profile of ` + good, "(it has cloud, staging)", "TEMPORAL_CONFIG_FILE"}},
		{"missing file", dir + "/nope.toml", "cloud", []string{"does not exist", "set TEMPORAL_CONFIG_FILE", "unset TEMPORAL_PROFILE"}},
		{"unquoted key", file("bare.toml", "[profile.cloud]\napi_key = "+secret+"\n"), "cloud", []string{`"profile.cloud.api_key"`, "quoted string"}},
		{"unterminated key", file("open.toml", "[profile.cloud]\napi_key = \""+secret+"\n"), "cloud", []string{`"profile.cloud.api_key"`, "quoted string"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearTemporalEnv(t)
			t.Setenv(EnvTemporalConfigFile, tc.file)
			t.Setenv(EnvTemporalProfile, tc.profile)
			_, err := TemporalOptions("", "", nil)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), secret[:6]) {
				t.Errorf("error shows the key:\n%v", err)
			}
		})
	}
}

// The worker explains a refused connection as ConnectError does.
func TestWorkerNamesTheSettingToFix(t *testing.T) {
	certs := testcerts.New(t, "allot-test")
	const key = "tmprl-key-5b1e-DO-NOT-LOG"
	addr := fakeFrontend(t, serverTLS(t, certs, false), key)
	clearTemporalEnv(t)
	t.Setenv(EnvTemporalAddress, addr)
	t.Setenv(EnvTemporalServerCA, certs.CAPath)
	t.Setenv(EnvTemporalAPIKey, "wrong-"+key)
	opts, err := TemporalOptions("", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pipelines := dir + "/pipelines.toml"
	if err := os.WriteFile(pipelines, []byte("[[pipeline]]\nname = \"weekly\"\n  [[pipeline.step]]\n  name = \"plan\"\n  kind = \"local\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = RunWorker(ctx, WorkerConfig{Config: Config{Ledger: "sqlite:" + dir + "/allot.db", DataDir: dir, Pipelines: pipelines}.WithDefaults(), Temporal: opts})
	if err == nil || !strings.Contains(err.Error(), "refused the API key") || !strings.Contains(err.Error(), EnvTemporalAPIKey) || strings.Contains(err.Error(), key) {
		t.Fatalf("RunWorker = %v, want the refused key named by its variable, not shown", err)
	}
}
