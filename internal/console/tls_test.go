package console_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot/internal/console"
	"allot/internal/ledgertest"
	"allot/internal/testcerts"
)

// With --tls-cert and --tls-key the page speaks HTTPS only: its session
// cookie is Secure, browsers are told to keep to HTTPS, and plain HTTP on
// its port gets no page.
func TestServeOverTLS(t *testing.T) {
	certs := testcerts.New(t, "operator page")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "page.pem"), filepath.Join(dir, "page.key")
	for file, data := range map[string][]byte{certFile: certs.ServerCertPEM, keyFile: certs.ServerKeyPEM} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice:"+testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	creds, err := console.LoadCredentials(tokens)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := ledgertest.BudgetLedger(t)
	set := ledgertest.BudgetPipelines(t)
	in := console.ReadInput{Ledger: l.Led, Pipelines: set, Now: ledgertest.BudgetMonday.Add(3 * time.Hour)}

	ctx, cancel := context.WithCancel(context.Background())
	addrs, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- console.Serve(ctx, console.ServerConfig{Addr: "127.0.0.1:0", Read: in, Credentials: creds, Actions: &console.Actions{Ledger: l.Led, Pipelines: set},
			TLSCertFile: certFile, TLSKeyFile: keyFile, Ready: func(a string) { addrs <- a }})
	}()
	var addr string
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("Serve over TLS: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve after its context ended: %v", err)
		}
	}()

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certs.CAPEM)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "https://" + addr
	res, err := c.Get(base + "/")
	if err != nil {
		t.Fatalf("GET over HTTPS: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "video-weekly") || res.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("GET / over HTTPS = %d, HSTS %q; want the page and Strict-Transport-Security", res.StatusCode, res.Header.Get("Strict-Transport-Security"))
	}

	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var session *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "allot_operator" {
			session = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || session == nil || !session.Secure || !session.HttpOnly {
		t.Fatalf("sign-in over HTTPS = %d, session cookie %+v; want a Secure, HttpOnly session", res.StatusCode, session)
	}

	plain, err := http.Get("http://" + addr + "/")
	if err == nil {
		page, _ := io.ReadAll(plain.Body)
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK || strings.Contains(string(page), "video-weekly") {
			t.Errorf("plain HTTP on the TLS port = %d, want no page", plain.StatusCode)
		}
	}
}

func TestLoadTLSRefusesHalfOrBadFiles(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := console.LoadTLS("", ""); cfg != nil || err != nil {
		t.Errorf("LoadTLS of neither = %v, %v; want plain HTTP", cfg, err)
	}
	for _, tc := range []struct{ cert, key, want string }{
		{junk, "", "--tls-cert and --tls-key go together"},
		{"", junk, "--tls-cert and --tls-key go together"},
		{junk, junk, "--tls-cert " + junk},
		{filepath.Join(dir, "missing.pem"), junk, "missing.pem"},
	} {
		if _, err := console.LoadTLS(tc.cert, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadTLS(%q, %q) = %v, want an error naming %q", tc.cert, tc.key, err, tc.want)
		}
	}
	listened := false
	err := console.Serve(context.Background(), console.ServerConfig{Addr: "127.0.0.1:0", TLSCertFile: junk, TLSKeyFile: junk, Ready: func(string) { listened = true }})
	if err == nil || listened {
		t.Errorf("Serve with a bad certificate = %v, listened %v; want a refusal before listening", err, listened)
	}
}
