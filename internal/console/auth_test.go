package console_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/console"
)

// A session cookie made without the token (a guessed signature, or a
// real one's name with another expiry) signs no one in: the page offers
// the sign-in form and no action, so no CSRF token leaks to its bearer.
func TestForgedSessionIsRefused(t *testing.T) {
	p := newActingPage(t, true)
	u, _ := url.Parse(p.srv.URL)
	name := base64.RawURLEncoding.EncodeToString([]byte("alice"))
	future := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	for _, forged := range []string{
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

func TestSignOutEndsTheSession(t *testing.T) {
	p := newActingPage(t, true)
	p.signIn(t)
	if page := p.get(t, "/"); !strings.Contains(page, "Signed in as <strong>alice</strong>") {
		t.Fatal("the signed-in page does not say who is signed in")
	}
	if code, body := p.post(t, "/logout", url.Values{}, nil); code != http.StatusSeeOther {
		t.Fatalf("sign out = %d\n%s", code, body)
	}
	if page := p.get(t, "/"); strings.Contains(page, "Signed in as") || !strings.Contains(page, `action="/login"`) {
		t.Fatal("after signing out the page still acts")
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
