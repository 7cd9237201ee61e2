package allottest

import (
	"log/slog"
	"testing"
	"time"

	"allot/internal/cleanenv"
	"allot/internal/temporalserver"
	"allot/internal/testcerts"
	"allot/workflows"
)

// SecureServer is an embedded Temporal server whose frontend wants
// credentials, as Temporal Cloud or a cluster with mTLS does: its address,
// namespace, certificates and API key are what an operator would be given.
type SecureServer struct {
	Address, Namespace string
	// Certs signed the server's certificate; with mutual TLS, the client's
	// too (Certs.ClientCertPath and ClientKeyPath).
	Certs *testcerts.Set
	// APIKey is the one key the server accepts, "" when it checks none.
	APIKey string
	// Logs holds what the server logged (warnings and above).
	Logs *SyncBuffer
}

// StartMTLSServer starts a server on a free port that serves TLS and
// requires a client certificate signed by its CA. It stops when the test
// ends; it skips the test under -short.
func StartMTLSServer(t *testing.T) *SecureServer {
	t.Helper()
	certs := testcerts.New(t, "allot-mtls")
	return startSecure(t, certs, temporalserver.Config{TLS: &temporalserver.TLS{
		CertPEM: certs.ServerCertPEM, KeyPEM: certs.ServerKeyPEM, ClientCAPEM: certs.CAPEM,
	}})
}

// StartAPIKeyServer starts a server on a free port that serves TLS (no
// client certificate) and accepts only calls carrying apiKey, as Temporal
// Cloud's API-key endpoints do.
func StartAPIKeyServer(t *testing.T, apiKey string) *SecureServer {
	t.Helper()
	certs := testcerts.New(t, "allot-apikey")
	s := startSecure(t, certs, temporalserver.Config{APIKey: apiKey, TLS: &temporalserver.TLS{
		CertPEM: certs.ServerCertPEM, KeyPEM: certs.ServerKeyPEM,
	}})
	s.APIKey = apiKey
	return s
}

func startSecure(t *testing.T, certs *testcerts.Set, cfg temporalserver.Config) *SecureServer {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs an embedded Temporal server")
	}
	logs := &SyncBuffer{}
	cfg.Port, cfg.DisableUI = temporalserver.FreePort, true
	cfg.SearchAttributes = workflows.SearchAttributeTypes()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := Context(t, 3*time.Minute)
	defer cancel()
	srv, err := temporalserver.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	return &SecureServer{Address: srv.FrontendAddress(), Namespace: srv.Namespace(), Certs: certs, Logs: logs}
}

// CleanEnv is the environment of a test's process: the caller's without
// any ALLOT_ or TEMPORAL_ setting (and no Temporal config file of the
// user's), then vars. See internal/cleanenv.
func CleanEnv(t *testing.T, vars ...string) []string {
	t.Helper()
	return cleanenv.Environ(vars...)
}
