package console_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"allot/internal/console"
	"allot/internal/ledgertest"
)

// The page answers only its own Host names (docs/design.md, "The
// operator page"): a page of another site that points its DNS name at
// 127.0.0.1 (DNS rebinding) gets 421 and nothing of the ledger, on every
// path; the listen address, loopback names and --allow-host's names get
// the page.
func TestPageAnswersOnlyItsOwnHostNames(t *testing.T) {
	l, _ := ledgertest.BudgetLedger(t)
	in := console.ReadInput{Ledger: l.Led, Pipelines: ledgertest.BudgetPipelines(t), Now: ledgertest.BudgetMonday.Add(3 * time.Hour)}
	ctx, cancel := context.WithCancel(context.Background())
	addrs, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- console.Serve(ctx, console.ServerConfig{Addr: "127.0.0.1:0", Read: in, AllowHosts: []string{"allot.example.com"},
			AllowHostCommand: func(name string) string { return "starter console --allow-host " + name },
			Ready:            func(a string) { addrs <- a }})
	}()
	var addr string
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve after its context ended: %v", err)
		}
	}()
	_, port, _ := strings.Cut(addr, ":")
	request := func(method, path, host string) (int, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(url.Values{"token": {testToken}}.Encode())
		}
		req, err := http.NewRequest(method, "http://"+addr+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host // the raw Host header, as a rebinding browser sends it
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			return res.StatusCode, "(the ledger's change stream)" // it does not end
		}
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port, "localhost.evil.example", "10.0.0.1:" + port} {
		for _, path := range []string{"/", "/board", "/events", "/healthz", "/static/live.js"} {
			code, body := request(http.MethodGet, path, host)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "--allow-host") {
				t.Errorf("GET %s with Host %s = %d, want 421 naming --allow-host:\n%s", path, host, code, body)
			}
			if strings.Contains(body, "video-weekly") || strings.Contains(body, "<") {
				t.Errorf("GET %s with Host %s answered with the page:\n%s", path, host, body)
			}
		}
		if code, body := request(http.MethodPost, "/login", host); code != http.StatusMisdirectedRequest {
			t.Errorf("POST /login with Host %s = %d, want 421:\n%s", host, code, body)
		}
	}
	for _, host := range []string{addr, "127.0.0.1", "localhost:" + port, "LocalHost.:" + port, "[::1]:" + port, "127.0.0.2:" + port,
		"allot.example.com", "Allot.Example.COM:443"} {
		if code, body := request(http.MethodGet, "/", host); code != http.StatusOK || !strings.Contains(body, "video-weekly") {
			t.Errorf("GET / with Host %s = %d, want the page:\n%s", host, code, body)
		}
	}
}

func TestAllowHostRefusesWhatIsNotAName(t *testing.T) {
	for _, bad := range []string{"", "example.com:8090", "http://example.com", "*.example.com", "example.com/x"} {
		if err := console.CheckAllowHost(bad); err == nil || !strings.Contains(err.Error(), "--allow-host allot.example.com") {
			t.Errorf("--allow-host %q: %v, want a refusal with an example", bad, err)
		}
	}
	for _, good := range []string{"allot.example.com", "10.0.0.5", "::1", "[fd00::1]", "page"} {
		if err := console.CheckAllowHost(good); err != nil {
			t.Errorf("--allow-host %q: %v", good, err)
		}
	}
}
