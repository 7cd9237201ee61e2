package console

// Who may act on the page (docs/design.md, "The operator page"): operator
// tokens read from a file, a signed session cookie, and a CSRF token bound
// to the session. All of it is derived from the token file alone, so
// several page servers with the same file accept each other's sessions
// and keep no state.

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"allot"
)

// MinTokenLen is the shortest token accepted: 32 characters of a
// generated token (NewToken gives 43) leave nothing to guess.
const MinTokenLen = 32

// DefaultOperator is who a token line without a name acts as.
const DefaultOperator = "operator"

// sessionTTL is how long a sign-in lasts.
const sessionTTL = 12 * time.Hour

// Cookie names.
const (
	sessionCookie = "allot_operator"
	noticeCookie  = "allot_notice"
)

// Credentials are the operators a token file names.
type Credentials struct {
	ops []operatorToken
}

type operatorToken struct {
	name  string
	token []byte
	// key signs the operator's sessions: removing the line (or changing
	// the token) ends them.
	key []byte
}

// NewToken returns a fresh random token.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// LoadCredentials reads a token file: one operator a line, "NAME:TOKEN"
// (or a bare TOKEN, who acts as DefaultOperator); blank lines and lines
// starting with # are skipped. The file must not be readable by others.
// No error ever quotes a token.
func LoadCredentials(path string) (*Credentials, error) {
	info, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("operator token file %s: no such file or directory: create it with `%s`", path, allot.OperatorTokenCommand("NAME", path))
		}
		return nil, fmt.Errorf("operator token file %s: %w", path, err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("operator token file %s can be read by others (mode %s): its tokens let anyone act on the page; run `chmod 600 %s`", path, info.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("operator token file %s: %w", path, err)
	}
	c := &Credentials{}
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, token, named := strings.Cut(line, ":")
		if !named {
			name, token = DefaultOperator, line
		}
		name, token = strings.TrimSpace(name), strings.TrimSpace(token)
		switch {
		case allot.CheckText("an operator's name", name) != nil || name == "":
			return nil, fmt.Errorf("operator token file %s, line %d: the name before the colon is empty or too long: write NAME:TOKEN", path, n)
		case names[name]:
			return nil, fmt.Errorf("operator token file %s, line %d: operator %q is named twice: give each operator one line", path, n, name)
		case len(token) < MinTokenLen:
			return nil, fmt.Errorf("operator token file %s, line %d: the token of %q is shorter than %d characters: delete the line and make a new one with `%s`", path, n, name, MinTokenLen, allot.OperatorTokenCommand(name, path))
		}
		for _, o := range c.ops {
			if subtle.ConstantTimeCompare(o.token, []byte(token)) == 1 {
				return nil, fmt.Errorf("operator token file %s, line %d: %q has the token of %q: give each operator their own", path, n, name, o.name)
			}
		}
		names[name] = true
		key := sha256.Sum256([]byte("allot operator page session\x00" + token))
		c.ops = append(c.ops, operatorToken{name: name, token: []byte(token), key: key[:]})
	}
	if len(c.ops) == 0 {
		return nil, fmt.Errorf("operator token file %s holds no token: add one with `%s`", path, allot.OperatorTokenCommand("NAME", path))
	}
	return c, nil
}

// signIn returns who a token belongs to. Every operator's token is
// compared, in constant time, whatever matches.
func (c *Credentials) signIn(token string) (string, bool) {
	if c == nil {
		return "", false
	}
	name, ok := "", false
	for _, o := range c.ops {
		if subtle.ConstantTimeCompare(o.token, []byte(token)) == 1 {
			name, ok = o.name, true
		}
	}
	return name, ok
}

func (c *Credentials) keyOf(name string) []byte {
	if c == nil {
		return nil
	}
	for _, o := range c.ops {
		if o.name == name {
			return o.key
		}
	}
	return nil
}

func mac(key []byte, parts ...string) string {
	h := hmac.New(sha256.New, key)
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// session is the cookie value of name's sign-in until expires.
func (c *Credentials) session(name string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	n := base64.RawURLEncoding.EncodeToString([]byte(name))
	return n + "." + exp + "." + mac(c.keyOf(name), "session", name, exp)
}

// operatorOf is who a session cookie value signs in, if it is valid and
// current.
func (c *Credentials) operatorOf(value string, now time.Time) (string, bool) {
	parts := strings.Split(value, ".")
	if len(parts) != 3 {
		return "", false
	}
	nb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return "", false
	}
	name := string(nb)
	key := c.keyOf(name)
	if key == nil {
		return "", false
	}
	if !hmac.Equal([]byte(parts[2]), []byte(mac(key, "session", name, parts[1]))) {
		return "", false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return "", false
	}
	return name, true
}

// csrf is the form token of a session: a page of another site cannot
// read it, so it cannot forge a form that carries it.
func (c *Credentials) csrf(name, session string) string {
	return mac(c.keyOf(name), "csrf", session)
}

// AddOperator appends an operator with a fresh token to a token file,
// creating it (mode 0600) if it is not there; a name already in the file
// is refused. It returns nothing of the token: it is in the file only.
func AddOperator(path, name string) error {
	if err := allot.CheckText("--name", name); err != nil || strings.TrimSpace(name) == "" || strings.ContainsAny(name, ":\n") {
		return fmt.Errorf("--name %q is not an operator's name: give a short name without a colon, e.g. --name alice", name)
	}
	if _, err := os.Stat(path); err == nil {
		c, err := LoadCredentials(path)
		if err != nil {
			return err
		}
		if c.keyOf(name) != nil {
			return fmt.Errorf("operator %q is in %s already: to give them a new token, delete their line and run `%s`", name, path, allot.OperatorTokenCommand(name, path))
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("operator token file %s: %w", path, err)
	}
	if _, err := fmt.Fprintf(f, "%s:%s\n", name, NewToken()); err != nil {
		f.Close()
		return fmt.Errorf("operator token file %s: %w", path, err)
	}
	return f.Close()
}
