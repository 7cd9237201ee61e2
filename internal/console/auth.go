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
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
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

// reloadEvery is how often, at most, a use of the credentials reads the
// token file again: an edit takes effect within about this.
const reloadEvery = time.Second

// Credentials are the operators a token file names, as the file is now:
// each use reads it again when it last did reloadEvery ago or more, so an
// added line signs in, and a removed line or a replaced token ends its
// sessions (their key is gone) within seconds (docs/design.md, "The
// operator page"). An edit that does not load fails closed: nobody signs
// in or acts until the file loads again.
type Credentials struct {
	path string

	mu      sync.Mutex
	checked time.Time // when the file was last read
	digest  [sha256.Size]byte
	set     *tokenSet
}

// tokenSet is the operators of one reading of the file, or why it did not
// load (err), which lets no one in.
type tokenSet struct {
	ops []operatorToken
	err error
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
// No error ever quotes a token. The credentials keep the path and follow
// the file's later edits.
func LoadCredentials(path string) (*Credentials, error) {
	data, digest, err := readTokenFile(path)
	if err != nil {
		return nil, err
	}
	ops, err := parseTokens(path, data)
	if err != nil {
		return nil, err
	}
	return &Credentials{path: path, checked: time.Now(), digest: digest, set: &tokenSet{ops: ops}}, nil
}

// current is the token file's operators as of now, reading the file
// again if it was last read reloadEvery ago or more; changed says this
// call found it changed. The file's bytes are compared, not its size and
// time: a rewrite within one tick of the file system's clock keeps both.
func (c *Credentials) current(now time.Time) (set *tokenSet, changed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.checked) < reloadEvery && now.After(c.checked) {
		return c.set, false
	}
	c.checked = now
	data, digest, err := readTokenFile(c.path)
	if err == nil && digest == c.digest && c.set.err == nil {
		return c.set, false
	}
	if err == nil {
		var ops []operatorToken
		ops, err = parseTokens(c.path, data)
		if err == nil {
			c.digest, c.set = digest, &tokenSet{ops: ops}
			return c.set, true
		}
	}
	if c.set.err != nil && c.set.err.Error() == err.Error() {
		return c.set, false
	}
	// Fail closed: never keep the old operators over a file that does not
	// load (a removed operator's line may be what is half-written).
	c.digest, c.set = [sha256.Size]byte{}, &tokenSet{err: err}
	return c.set, true
}

// readTokenFile reads the file and its mode through one descriptor,
// refusing a file others may read; the digest covers both.
func readTokenFile(path string) ([]byte, [sha256.Size]byte, error) {
	var digest [sha256.Size]byte
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, digest, fmt.Errorf("operator token file %s: no such file or directory: create it with `%s`", path, allot.OperatorTokenCommand("NAME", path))
		}
		return nil, digest, fmt.Errorf("operator token file %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, digest, fmt.Errorf("operator token file %s: %w", path, err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, digest, fmt.Errorf("operator token file %s can be read by others (mode %s): its tokens let anyone act on the page; run `chmod 600 %s`", path, info.Mode().Perm(), path)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, digest, fmt.Errorf("operator token file %s: %w", path, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%o\x00", info.Mode())
	h.Write(data)
	copy(digest[:], h.Sum(nil))
	return data, digest, nil
}

func parseTokens(path string, data []byte) ([]operatorToken, error) {
	var ops []operatorToken
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
		case !named && len(token) < MinTokenLen:
			return nil, fmt.Errorf("operator token file %s, line %d: the line has no colon, so it is read as a bare token, and it is shorter than %d characters: write it as NAME:TOKEN, or delete it and add the operator with `%s`", path, n, MinTokenLen, allot.OperatorTokenCommand("NAME", path))
		case names[name]:
			return nil, fmt.Errorf("operator token file %s, line %d: operator %q is named twice: give each operator one line", path, n, name)
		case len(token) < MinTokenLen:
			return nil, fmt.Errorf("operator token file %s, line %d: the token of %q is shorter than %d characters: delete the line and make a new one with `%s`", path, n, name, MinTokenLen, allot.OperatorTokenCommand(name, path))
		}
		for _, o := range ops {
			if subtle.ConstantTimeCompare(o.token, []byte(token)) == 1 {
				return nil, fmt.Errorf("operator token file %s, line %d: %q has the token of %q: give each operator their own", path, n, name, o.name)
			}
		}
		names[name] = true
		key := sha256.Sum256([]byte("allot operator page session\x00" + token))
		ops = append(ops, operatorToken{name: name, token: []byte(token), key: key[:]})
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("operator token file %s holds no token: add one with `%s`", path, allot.OperatorTokenCommand("NAME", path))
	}
	return ops, nil
}

// signIn returns who the pasted text signs in: an operator's token, or
// an operator's whole line, NAME:TOKEN, as the file holds it (what
// someone handed the line pastes). Every operator's token is compared, in
// constant time, whatever matches; a line's token signs in only its own
// name.
func (s *tokenSet) signIn(pasted string) (string, bool) {
	pasted = strings.TrimSpace(pasted)
	lineName, lineToken, _ := strings.Cut(pasted, ":")
	lineName, lineToken = strings.TrimSpace(lineName), strings.TrimSpace(lineToken)
	name, ok := "", false
	for _, o := range s.ops {
		whole := subtle.ConstantTimeCompare(o.token, []byte(pasted))
		line := subtle.ConstantTimeCompare(o.token, []byte(lineToken)) & subtle.ConstantTimeCompare([]byte(o.name), []byte(lineName))
		if whole|line == 1 {
			name, ok = o.name, true
		}
	}
	return name, ok
}

func (s *tokenSet) keyOf(name string) []byte {
	for _, o := range s.ops {
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

// signedSession is what a session cookie says: who, until when, and the
// session's random ID, which a sign-out records in the ledger as ended.
type signedSession struct {
	operator string
	id       string
	expires  time.Time
}

// newSessionID draws a session's ID: 16 random bytes.
func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// session is the cookie value of name's sign-in id until expires.
func (s *tokenSet) session(name, id string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	n := base64.RawURLEncoding.EncodeToString([]byte(name))
	return n + "." + exp + "." + id + "." + mac(s.keyOf(name), "session", name, exp, id)
}

// sessionOf is the sign-in a session cookie value holds, if its
// signature is valid under its operator's current key and it has not
// expired. Whether it was signed out is the ledger's to say.
func (s *tokenSet) sessionOf(value string, now time.Time) (signedSession, bool) {
	parts := strings.Split(value, ".")
	if len(parts) != 4 {
		return signedSession{}, false
	}
	nb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return signedSession{}, false
	}
	name, id := string(nb), parts[2]
	key := s.keyOf(name)
	if key == nil || id == "" {
		return signedSession{}, false
	}
	if !hmac.Equal([]byte(parts[3]), []byte(mac(key, "session", name, parts[1], id))) {
		return signedSession{}, false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return signedSession{}, false
	}
	return signedSession{operator: name, id: id, expires: time.Unix(exp, 0)}, true
}

// csrf is the form token of a session: a page of another site cannot
// read it, so it cannot forge a form that carries it.
func (s *tokenSet) csrf(name, session string) string {
	return mac(s.keyOf(name), "csrf", session)
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
		if c.set.keyOf(name) != nil {
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
