package console_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/console"
	"allot/internal/patience"
)

// A session cookie made without the token (a guessed signature, or a
// real one's name with another expiry) signs no one in: the page offers
// the sign-in form and no action, so no CSRF token leaks to its bearer.
func TestForgedSessionIsRefused(t *testing.T) {
	p := newActingPage(t, true)
	u, _ := url.Parse(p.srv.URL)
	name := base64.RawURLEncoding.EncodeToString([]byte("alice"))
	future := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	// A real session's signature under another ID or expiry.
	genuine := strings.Split(p.mustSignIn(t, testToken), ".")
	for _, forged := range []string{
		genuine[0] + "." + genuine[1] + ".BBBBBBBBBBBBBBBBBBBBBB." + genuine[3],
		genuine[0] + "." + future + "." + genuine[2] + "." + genuine[3],
		name + "." + future + ".AAAAAAAAAAAAAAAAAAAAAA." + strings.Repeat("0", 64),
		name + "." + future + "..",
		name + "." + future + "." + strings.Repeat("0", 64),
		name + "." + future + ".",
		name + "." + future,
		"garbage",
	} {
		p.client.Jar.SetCookies(u, []*http.Cookie{{Name: "allot_operator", Value: forged, Path: "/"}})
		page := p.get(t, "/")
		if strings.Contains(page, "Signed in as") || strings.Contains(page, `name="csrf"`) {
			t.Errorf("the forged session %q signed someone in", forged)
		}
		if code, _ := p.post(t, "/act", pauseForm("", "forged"), nil); code != http.StatusForbidden {
			t.Errorf("an action with the forged session %q = %d, want 403", forged, code)
		}
	}
	if p.paused(t, "covers") {
		t.Fatal("a forged session paused a vendor")
	}
}

// Signing out ends the session on the server: a copy of the cookie taken
// before (a shared machine, a stolen cookie) no longer signs anyone in or
// acts, here nor on another page server of the same ledger and token
// file.
func TestSignOutEndsTheSession(t *testing.T) {
	p := newActingPage(t, true)
	p.signIn(t)
	if page := p.get(t, "/"); !strings.Contains(page, "Signed in as <strong>alice</strong>") {
		t.Fatal("the signed-in page does not say who is signed in")
	}
	copied, csrf := p.sessionCookie(t), p.csrf(t)
	if code, body := p.post(t, "/logout", url.Values{}, nil); code != http.StatusSeeOther {
		t.Fatalf("sign out = %d\n%s", code, body)
	}
	if page := p.get(t, "/"); strings.Contains(page, "Signed in as") || !strings.Contains(page, `action="/login"`) {
		t.Fatal("after signing out the page still acts")
	}
	other := p.twin(t)
	for _, base := range []string{p.srv.URL, other.URL} {
		if _, page, _ := send(t, base, http.MethodGet, "/", copied, nil); strings.Contains(page, "Signed in as") {
			t.Errorf("%s: the cookie copied before signing out still signs alice in", base)
		}
		if code, body, _ := send(t, base, http.MethodPost, "/act", copied, pauseForm(csrf, "a copied cookie")); code != http.StatusForbidden {
			t.Errorf("%s: an action with the cookie copied before signing out = %d, want 403\n%s", base, code, body)
		}
	}
	if p.paused(t, "covers") {
		t.Fatal("a signed-out session paused a vendor")
	}
}

// Edits of the token file take effect while the page runs, within
// seconds: a removed line ends that operator's sessions and refuses their
// token, a replaced token stops working (even rewritten in place at the
// same size), an added line signs in, and a file that does not load (its
// mode, a half-written line) lets nobody in while the page still reads,
// until it loads again.
func TestTokenFileEditsTakeEffectWithoutARestart(t *testing.T) {
	const (
		bobToken   = "t0ken-of-bob-0123456789abcdefghijklmnopqrs"
		aliceNew   = "t0ken-of-alice-NEW3456789abcdefghijklmnop"
		carolToken = "t0ken-of-carol-0123456789abcdefghijklmnop"
	)
	if len(aliceNew) != len(testToken) {
		t.Fatal("the replaced token must keep the file's size")
	}
	p := newActingPageWith(t, "alice:"+testToken+"\nbob:"+bobToken+"\n")
	alice, bob := p.mustSignIn(t, testToken), p.mustSignIn(t, bobToken)
	edit := func(content string) {
		t.Helper()
		if err := os.WriteFile(p.tokens, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	signedIn := func(session, name string) bool {
		_, page, _ := send(t, p.srv.URL, http.MethodGet, "/", session, nil)
		return strings.Contains(page, "Signed in as <strong>"+name+"</strong>")
	}

	edit("alice:" + testToken + "\n")
	eventually(t, "bob's session ends once his line is removed", func() bool { return !signedIn(bob, "bob") })
	if code, _, _ := send(t, p.srv.URL, http.MethodPost, "/login", "", url.Values{"token": {bobToken}}); code != http.StatusForbidden {
		t.Errorf("bob's token after his line was removed: sign-in = %d, want 403", code)
	}
	if code, _, _ := send(t, p.srv.URL, http.MethodPost, "/act", bob, pauseForm("", "bob was removed")); code != http.StatusForbidden || p.paused(t, "covers") {
		t.Errorf("bob acted after his line was removed (%d)", code)
	}
	if !signedIn(alice, "alice") {
		t.Fatal("removing bob's line ended alice's session")
	}

	edit("alice:" + aliceNew + "\n") // in place, same size
	eventually(t, "alice's session under her old token ends once it is replaced", func() bool { return !signedIn(alice, "alice") })
	if code, _, _ := send(t, p.srv.URL, http.MethodPost, "/login", "", url.Values{"token": {testToken}}); code != http.StatusForbidden {
		t.Errorf("alice's replaced token: sign-in = %d, want 403", code)
	}
	alice = p.mustSignIn(t, aliceNew)

	// An editor's save: a new file renamed over the old.
	tmp := p.tokens + ".new"
	if err := os.WriteFile(tmp, []byte("alice:"+aliceNew+"\ncarol:"+carolToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p.tokens); err != nil {
		t.Fatal(err)
	}
	eventually(t, "carol signs in once her line is added", func() bool {
		code, _, _ := send(t, p.srv.URL, http.MethodPost, "/login", "", url.Values{"token": {carolToken}})
		return code == http.StatusSeeOther
	})

	// Files that do not load: nobody signs in or acts, the page reads.
	for _, broken := range []struct {
		name, log string
		do        func()
	}{
		{"readable by others", "chmod 600 " + p.tokens, func() {
			if err := os.Chmod(p.tokens, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"half-written", "is shorter than 32 characters: delete the line and make a new one with", func() { edit("alice:" + aliceNew[:10]) }},
	} {
		broken.do()
		eventually(t, "signing in is off once the file is "+broken.name, func() bool {
			code, _, _ := send(t, p.srv.URL, http.MethodPost, "/login", "", url.Values{"token": {aliceNew}})
			return code == http.StatusServiceUnavailable
		})
		code, page, _ := send(t, p.srv.URL, http.MethodGet, "/", alice, nil)
		if code != http.StatusOK || !strings.Contains(page, "video-weekly") || !strings.Contains(page, "Signing in is off") || strings.Contains(page, "Signed in as") {
			t.Errorf("%s: the page = %d; want it to read the ledger, say signing in is off and sign no one in:\n%s", broken.name, code, page)
		}
		if code, _, _ := send(t, p.srv.URL, http.MethodPost, "/act", alice, pauseForm("", "the file is "+broken.name)); code == http.StatusSeeOther || p.paused(t, "covers") {
			t.Errorf("%s: alice acted while the file does not load", broken.name)
		}
		if !strings.Contains(p.logs.String(), broken.log) {
			t.Errorf("%s: the log does not say why with the fix (%q):\n%s", broken.name, broken.log, p.logs)
		}
		edit("alice:" + aliceNew + "\n")
		if err := os.Chmod(p.tokens, 0o600); err != nil {
			t.Fatal(err)
		}
		eventually(t, "signing in works again once the file loads", func() bool {
			code, _, _ := send(t, p.srv.URL, http.MethodPost, "/login", "", url.Values{"token": {aliceNew}})
			return code == http.StatusSeeOther
		})
	}
	for _, token := range []string{testToken, aliceNew, bobToken, carolToken} {
		if strings.Contains(p.logs.String(), token) {
			t.Fatal("the log holds a token")
		}
	}
}

// What someone handed a line of the token file pastes, NAME:TOKEN, signs
// in as NAME when TOKEN is NAME's; anything else gets the one answer of a
// wrong token, which says nothing of the file's other lines.
func TestSignInTakesTheTokenFilesLine(t *testing.T) {
	const bobToken = "t0ken-of-bob-0123456789abcdefghijklmnopqrs"
	p := newActingPageWith(t, "alice:"+testToken+"\nbob:"+bobToken+"\n")
	for _, pasted := range []string{"alice:" + testToken, "  alice:" + testToken + "\n", "alice: " + testToken} {
		code, _, cookie := send(t, p.srv.URL, http.MethodPost, "/login", "", url.Values{"token": {pasted}})
		if _, page, _ := send(t, p.srv.URL, http.MethodGet, "/", cookie, nil); code != http.StatusSeeOther || !strings.Contains(page, "Signed in as <strong>alice</strong>") {
			t.Errorf("the line %q: sign-in = %d, want alice signed in", pasted, code)
		}
	}
	for _, pasted := range []string{"bob:" + testToken, "alice:" + bobToken, "carol:" + testToken, "alice:" + testToken + "x", "alice:"} {
		code, body, cookie := send(t, p.srv.URL, http.MethodPost, "/login", "", url.Values{"token": {pasted}})
		if code != http.StatusForbidden || cookie != "" || !strings.Contains(body, "the token was not accepted: sign in with a token of the operator token file") {
			t.Errorf("%q: sign-in = %d, cookie %v; want 403 and the wrong token's one answer", pasted, code, cookie != "")
		}
	}
}

// A GET of a form's address (a bookmark, a reload, a typed URL) goes back
// to the page, which says what to do, instead of a bare 404.
func TestGetOfAFormsAddressGoesBackToThePage(t *testing.T) {
	for _, acting := range []bool{false, true} {
		p := newActingPage(t, acting)
		for _, path := range []string{"/act", "/login", "/logout"} {
			res, err := p.client.Get(p.srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
				t.Errorf("acting=%v: GET %s = %d to %q, want 303 to /", acting, path, res.StatusCode, res.Header.Get("Location"))
				continue
			}
			if page := p.get(t, "/"); !strings.Contains(page, "takes the page&#39;s forms only") {
				t.Errorf("acting=%v: after GET %s the page does not say what to do", acting, path)
			}
		}
	}
}

// sessionCookie is the session cookie the page's client holds.
func (p *actingPage) sessionCookie(t *testing.T) string {
	t.Helper()
	u, _ := url.Parse(p.srv.URL)
	for _, c := range p.client.Jar.Cookies(u) {
		if c.Name == "allot_operator" {
			return c.Value
		}
	}
	t.Fatal("the client holds no session cookie")
	return ""
}

// mustSignIn signs in with token apart from the page's client and returns
// the session cookie.
func (p *actingPage) mustSignIn(t *testing.T, token string) string {
	t.Helper()
	code, body, cookie := send(t, p.srv.URL, http.MethodPost, "/login", "", url.Values{"token": {token}})
	if code != http.StatusSeeOther || cookie == "" {
		t.Fatalf("sign-in = %d\n%s", code, body)
	}
	return cookie
}

// twin serves another page server on p's ledger and token file.
func (p *actingPage) twin(t *testing.T) *httptest.Server {
	t.Helper()
	creds, err := console.LoadCredentials(p.tokens)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(console.NewActingServer(p.in, creds, &console.Actions{Ledger: p.in.Ledger, Pipelines: p.in.Pipelines}, nil))
	t.Cleanup(srv.Close)
	return srv
}

// send sends one request to the page at base as its own forms do, with
// the session cookie value given ("" none), following no redirect; it
// returns the status, the body and the session cookie set, if any.
func send(t *testing.T, base, method, path, session string, form url.Values) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	if session != "" {
		req.AddCookie(&http.Cookie{Name: "allot_operator", Value: session})
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	set := ""
	for _, c := range res.Cookies() {
		if c.Name == "allot_operator" && c.MaxAge >= 0 {
			set = c.Value
		}
	}
	return res.StatusCode, string(body), set
}

// eventually polls done until it holds, failing the test at a deadline:
// a change the page notices within seconds, waited for without a fixed
// sleep.
func eventually(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := patience.Deadline(t, 20*time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not by %v", what, deadline)
		}
		<-tick.C
	}
}

func writeTokens(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// A bad token file is refused with what to do, and no error quotes a
// token.
func TestLoadCredentialsRefusesABadFile(t *testing.T) {
	long := strings.Repeat("k", console.MinTokenLen)
	for name, c := range map[string]struct {
		content string
		mode    os.FileMode
		want    string
	}{
		"readable by others": {"alice:" + long + "\n", 0o644, "chmod 600 "},
		"short token":        {"alice:short-secret\n", 0o600, "shorter than 32 characters: delete the line and make a new one with `starter operator-token --name 'alice' --file "},
		"no token":           {"# nobody\n\n", 0o600, "holds no token: add one with `starter operator-token"},
		"named twice":        {"alice:" + long + "\nalice:" + long + "z\n", 0o600, "named twice"},
		"shared token":       {"alice:" + long + "\nbob:" + long + "\n", 0o600, "has the token of"},
		"empty name":         {":" + long + "\n", 0o600, "write NAME:TOKEN"},
	} {
		_, err := console.LoadCredentials(writeTokens(t, c.content, c.mode))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to say %q", name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), long) || strings.Contains(err.Error(), "short-secret") {
			t.Errorf("%s: the error quotes a token: %v", name, err)
		}
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, err := console.LoadCredentials(missing); err == nil || !strings.Contains(err.Error(), allot.OperatorTokenCommand("NAME", missing)) {
		t.Errorf("a missing file: %v, want the command that makes it", err)
	}
}

// AddOperator makes the file private, gives each operator a token that
// LoadCredentials accepts, and refuses a name twice.
func TestAddOperatorMakesAPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	for _, name := range []string{"alice", "bob"} {
		if err := console.AddOperator(path, name); err != nil {
			t.Fatal(err)
		}
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the token file's mode = %v (%v), want 0600", info.Mode().Perm(), err)
	}
	if _, err := console.LoadCredentials(path); err != nil {
		t.Fatal(err)
	}
	if err := console.AddOperator(path, "alice"); err == nil || !strings.Contains(err.Error(), "in "+path+" already") {
		t.Errorf("alice again: %v", err)
	}
	if err := console.AddOperator(path, "a:b"); err == nil {
		t.Error("a name with a colon was accepted")
	}
}
