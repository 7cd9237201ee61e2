package console

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/tls"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"allot"
	"allot/internal/ledger"
)

// DefaultAddr is where the page listens unless told otherwise: loopback
// only.
const DefaultAddr = "127.0.0.1:8090"

// pollEvery is how often /events reads the ledger's change marker: a
// ledger write shows on an open page within about this and one redraw.
const pollEvery = 500 * time.Millisecond

// maxForm bounds a POST's body: a form of the page is far smaller.
const maxForm = 64 << 10

//go:embed assets
var assets embed.FS

var pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"bsCommand": allot.BudgetShowCommand,
	"act":       func(s session, a Act) actView { return actView{Session: s, Act: a} },
	"need":      func(s session, it NeedItem) needView { return needView{Session: s, Item: it} },
	"actOf":     actOf,
	"inUnit":    func(a Act, unit string) Act { a.Unit = unit; return a },
	"prefill":   func(a Act, value string) Act { a.Value = value; return a },
	"exitLabel": func(exit string) string { return exitLabels[exit] },
	"offers":    func(a Act, exit string) bool { return slices.Contains(a.Exits, exit) },
	"ackCommand": func(budget, period string) string {
		return allot.BudgetAcknowledgeCommand(budget, period, "spent before the budget covered the step")
	},
	"raiseCommand": func(budget, period string, limit int64) string {
		return allot.BudgetRaiseCommand(budget, period, limit, "admit the parked episodes")
	},
	"rfc3339":     func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"seriesClass": SeriesClass,
	"runs":        Runs,
	"maxText":     func() int { return allot.MaxTextLen },
}).ParseFS(assets, "assets/page.html"))

// ServerConfig is how the page is served.
type ServerConfig struct {
	// Addr is host:port; "" is DefaultAddr. Port 0 picks one. Without
	// Credentials it must be loopback (CheckAddr).
	Addr string
	Read ReadInput
	// Credentials and Actions let signed-in operators act; both nil serve
	// the page read-only.
	Credentials *Credentials
	Actions     *Actions
	// TLSCertFile and TLSKeyFile, both or neither, serve the page over
	// HTTPS with that certificate (PEM): the session cookie is then
	// Secure and browsers are told to keep to HTTPS.
	TLSCertFile, TLSKeyFile string
	// AllowHosts are host names the page answers besides its own address
	// and loopback names (hostPolicy).
	AllowHosts []string
	// AllowHostCommand is the complete command that serves this page with
	// one more name allowed, which the log gives for a refused Host; nil
	// when it has no such flag (the devserver's page answers loopback
	// names only).
	AllowHostCommand func(name string) string
	// Ready, when set, is called with the address listened on, once the
	// page answers.
	Ready  func(addr string)
	Logger *slog.Logger
}

// Server serves the page. It holds no state of its own: every request
// reads the ledger, and sessions are signed with the token file's tokens,
// so several servers may serve one ledger.
type Server struct {
	read    ReadInput
	log     *slog.Logger
	creds   *Credentials
	actions *Actions
	origin  *http.CrossOriginProtection
	hosts   hostPolicy
}

// NewServer returns the page's handler, read-only.
func NewServer(in ReadInput, logger *slog.Logger) *Server {
	return NewActingServer(in, nil, nil, logger)
}

// NewActingServer returns the page's handler; with creds and actions,
// signed-in operators act through it.
func NewActingServer(in ReadInput, creds *Credentials, actions *Actions, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if creds == nil || actions == nil {
		creds, actions = nil, nil
	}
	return &Server{read: in, log: logger, creds: creds, actions: actions, origin: http.NewCrossOriginProtection(),
		hosts: hostPolicy{names: map[string]bool{}}}
}

// CheckAddr refuses an address the page must not listen on: anything but
// loopback when it has no operator tokens (docs/design.md, "The operator
// page"); with them, any address.
func CheckAddr(addr string, withTokens bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q is not host:port: give a loopback address, e.g. --addr %s", addr, DefaultAddr)
	}
	if withTokens || loopback(host) {
		return nil
	}
	return fmt.Errorf("--addr %q is not a loopback address: without operator tokens the page serves loopback only; run `%s`, or give it a token file (--token-file FILE, made with `starter operator-token`) to serve it on %s, over TLS (--tls-cert FILE --tls-key FILE, or a TLS proxy)",
		addr, allot.ConsoleCommand(DefaultAddr, ""), addr)
}

// LoadTLS is the page's TLS configuration from a certificate and key in
// PEM files: nil for neither, an error naming the fix for one alone or
// files that do not load. TLS 1.2 at least.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, fmt.Errorf("--tls-cert and --tls-key go together: give the certificate and its private key (PEM files), or neither to serve plain HTTP on loopback: `%s`", allot.ConsoleCommand(DefaultAddr, ""))
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s and --tls-key %s do not load as a PEM certificate and its private key: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// Serve serves the page on cfg.Addr until ctx ends.
func Serve(ctx context.Context, cfg ServerConfig) error {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if (cfg.Credentials == nil) != (cfg.Actions == nil) {
		return fmt.Errorf("operator page: credentials and actions go together")
	}
	if err := CheckAddr(cfg.Addr, cfg.Credentials != nil); err != nil {
		return err
	}
	tlsConfig, err := LoadTLS(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return err
	}
	s := NewActingServer(cfg.Read, cfg.Credentials, cfg.Actions, cfg.Logger)
	if s.hosts, err = newHostPolicy(cfg.Addr, cfg.AllowHosts); err != nil {
		return err
	}
	s.hosts.command = cfg.AllowHostCommand
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("operator page: listen on %s: %w (another process may hold the port: give another with --addr 127.0.0.1:PORT)", cfg.Addr, err)
	}
	s.hosts.listen = ln.Addr().String()
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	} else if host, _, _ := net.SplitHostPort(cfg.Addr); cfg.Credentials != nil && !loopback(host) {
		s.log.Warn("operator page: operators sign in over plain HTTP on a non-loopback address: serve it with --tls-cert and --tls-key, or behind a TLS proxy", "addr", cfg.Addr)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// Open /events streams end with ctx (their requests' base context).
	if err := srv.Shutdown(shut); err != nil {
		return fmt.Errorf("operator page: shut down: %w", err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeHTTP routes: / the page, /board its board alone (what the live
// script swaps in), /events the change stream, /healthz, /static/; and
// the POSTs /login, /logout and /act. A GET of a form's address goes
// back to the page. A request for a Host the page does not answer
// (hostPolicy) gets 421 and nothing else.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	if !s.hosts.allows(r.Host) {
		s.misdirected(w, r)
		return
	}
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("Referrer-Policy", "no-referrer")
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if r.Method == http.MethodPost {
		s.post(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD, POST")
		http.Error(w, "the operator page answers GET, HEAD and its forms' POSTs", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case r.URL.Path == "/":
		s.render(w, r, "page", http.StatusOK, s.takeNotice(w, r))
	case r.URL.Path == "/board":
		s.render(w, r, "board", http.StatusOK, notice{})
	case r.URL.Path == "/events":
		s.events(w, r)
	case r.URL.Path == "/healthz":
		h.Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	case strings.HasPrefix(r.URL.Path, "/static/"):
		static, _ := fs.Sub(assets, "assets")
		http.StripPrefix("/static/", http.FileServerFS(static)).ServeHTTP(w, r)
	case r.URL.Path == "/login", r.URL.Path == "/logout", r.URL.Path == "/act":
		// A bookmark, a reload after a refusal, a typed address: the page
		// holds the form.
		s.redirect(w, r, msgUseTheForm)
	default:
		http.NotFound(w, r)
	}
}

// Messages of the refusals that must not say more: whether a token file
// exists, or whose token was close, is nobody's business.
const (
	msgCrossSite  = "refused: the request came from another site (its Origin or Sec-Fetch-Site says so); act from the page itself"
	msgBadToken   = "the token was not accepted: sign in with a token of the operator token file"
	msgSignIn     = "sign in with an operator token first: the page acts only for a signed-in operator (or run the CLI command it shows)"
	msgStaleForm  = "refused: the form's CSRF token does not match your session (the form is stale or from another site); reload the page and try again"
	msgNotAllowed = "the operator page has no such form"
	msgUseTheForm = "that address takes the page's forms only: sign in, act and sign out with the forms on this page"
	msgSigningOff = "signing in is off: the operator token file does not load, so nobody signs in or acts until it does; the page server's log says why and how to fix it"
	msgNotEnded   = "sign-out could not be recorded in the ledger, so a copy of this session would still act: sign out again (the page server's log says why)"
)

// post handles the forms: every one passes the cross-origin check first;
// an action needs a session and its CSRF token too. A refusal changes
// nothing.
func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	if err := s.origin.Check(r); err != nil {
		s.refuse(w, r, http.StatusForbidden, msgCrossSite)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		s.refuse(w, r, http.StatusBadRequest, "the form could not be read: reload the page and try again")
		return
	}
	switch r.URL.Path {
	case "/login":
		set := s.tokens()
		if set != nil && set.err != nil {
			s.refuse(w, r, http.StatusServiceUnavailable, msgSigningOff)
			return
		}
		var name string
		ok := false
		if set != nil {
			name, ok = set.signIn(r.PostForm.Get("token"))
		}
		if !ok {
			s.log.Warn("operator page: a sign-in was refused", "remote", r.RemoteAddr)
			s.refuse(w, r, http.StatusForbidden, msgBadToken)
			return
		}
		http.SetCookie(w, s.cookie(r, sessionCookie, set.session(name, newSessionID(), time.Now().Add(sessionTTL)), sessionTTL))
		s.log.Info("operator page: signed in", "operator", name, "remote", r.RemoteAddr)
		s.redirect(w, r, "signed in as "+name)
	case "/logout":
		// Ended in the ledger, where every page server looks: a copy of
		// the cookie is refused from now on, not only this browser's.
		se := s.sessionOf(r)
		switch {
		case se.Off:
			s.refuse(w, r, http.StatusServiceUnavailable, msgSigningOff)
			return
		case se.unread != nil:
			s.refuse(w, r, http.StatusServiceUnavailable, msgNotEnded)
			return
		}
		if se.Operator != "" {
			err := s.actions.Ledger.EndSession(r.Context(), ledger.EndedSession{ID: se.id, Operator: se.Operator, Expires: se.expires}, time.Time{})
			if err != nil {
				s.log.Error("operator page: a sign-out could not be recorded", "operator", se.Operator, "err", err)
				s.refuse(w, r, http.StatusServiceUnavailable, msgNotEnded)
				return
			}
			s.log.Info("operator page: signed out", "operator", se.Operator, "remote", r.RemoteAddr)
		}
		http.SetCookie(w, s.cookie(r, sessionCookie, "", -1))
		s.redirect(w, r, "signed out")
	case "/act":
		se := s.sessionOf(r)
		if se.Off {
			s.refuse(w, r, http.StatusServiceUnavailable, msgSigningOff)
			return
		}
		if se.Operator == "" {
			s.refuse(w, r, http.StatusForbidden, msgSignIn)
			return
		}
		if !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(se.CSRF)) {
			s.refuse(w, r, http.StatusForbidden, msgStaleForm)
			return
		}
		done, err := s.actions.Do(r.Context(), se.Operator, r.PostForm)
		if err != nil {
			status := statusOf(err)
			msg := allot.ErrorMessage(err)
			if status == http.StatusInternalServerError {
				s.log.Error("operator page: an action failed", "operator", se.Operator, "act", r.PostForm.Get("act"), "err", err)
			}
			s.refuse(w, r, status, "refused: "+msg)
			return
		}
		s.log.Info("operator page: acted", "operator", se.Operator, "act", r.PostForm.Get("act"))
		s.redirect(w, r, done)
	default:
		s.refuse(w, r, http.StatusNotFound, msgNotAllowed)
	}
}

// session is the signed-in operator of a request, if any, and what the
// page's forms carry.
type session struct {
	Acting bool // the page takes operator tokens
	// Off: the token file does not load, so nobody signs in.
	Off       bool
	Operator  string
	CSRF      string
	RequestID string
	id        string
	expires   time.Time
	// unread: the ledger did not say whether a validly signed session was
	// signed out, so it acts on nothing.
	unread error
}

// tokens is the token file's operators now (nil on a read-only page),
// logging when the file changed.
func (s *Server) tokens() *tokenSet {
	if s.creds == nil {
		return nil
	}
	set, changed := s.creds.current(time.Now())
	switch {
	case changed && set.err != nil:
		s.log.Error("operator page: the operator token file does not load: nobody signs in or acts until it does", "err", set.err)
	case changed:
		s.log.Info("operator page: the operator token file changed: its operators sign in now, and no one else", "operators", len(set.ops))
	}
	return set
}

// sessionOf is the request's session: a cookie signed under its
// operator's current key, not expired and not signed out (the ledger's
// ended sessions). A ledger that cannot say signs no one in.
func (s *Server) sessionOf(r *http.Request) session {
	se := session{Acting: s.creds != nil}
	set := s.tokens()
	if set == nil {
		return se
	}
	if set.err != nil {
		se.Off = true
		return se
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return se
	}
	signed, ok := set.sessionOf(c.Value, time.Now())
	if !ok {
		return se
	}
	ended, err := s.actions.Ledger.SessionEnded(r.Context(), signed.id)
	if err != nil {
		s.log.Error("operator page: read whether a session was signed out; it acts on nothing until the ledger answers", "operator", signed.operator, "err", err)
		se.unread = err
		return se
	}
	if ended {
		return se
	}
	se.Operator, se.CSRF, se.RequestID = signed.operator, set.csrf(signed.operator, c.Value), uuid.NewString()
	se.id, se.expires = signed.id, signed.expires
	return se
}

func (s *Server) cookie(r *http.Request, name, value string, ttl time.Duration) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
	if ttl < 0 {
		c.MaxAge = -1
	} else {
		c.MaxAge = int(ttl / time.Second)
	}
	return c
}

// notice is what the page says above the board after a form.
type notice struct {
	Text    string
	Refused bool
}

// redirect sends the browser back to the page, which says done once.
func (s *Server) redirect(w http.ResponseWriter, r *http.Request, done string) {
	http.SetCookie(w, s.cookie(r, noticeCookie, base64.RawURLEncoding.EncodeToString([]byte(done)), time.Minute))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) takeNotice(w http.ResponseWriter, r *http.Request) notice {
	c, err := r.Cookie(noticeCookie)
	if err != nil {
		return notice{}
	}
	http.SetCookie(w, s.cookie(r, noticeCookie, "", -1))
	text, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return notice{}
	}
	return notice{Text: string(text)}
}

// refuse answers a refused form with the page and why, at once; nothing
// was written.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, why string) {
	s.render(w, r, "page", status, notice{Text: why, Refused: true})
}

// view is what the templates render: the board, the marker it was read
// at (from which the live script asks for changes), the session and a
// notice.
type view struct {
	Board
	Marker  string
	Session session
	Notice  notice
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, name string, status int, n notice) {
	ctx := r.Context()
	// The marker first: a write between it and the board shows as a
	// change, never as one missed.
	marker, err := s.read.Ledger.ChangeMarker(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	in := s.read
	if name := r.URL.Query().Get("pipeline"); name != "" {
		if _, err := in.Pipelines.Get(name); err != nil {
			status, n = http.StatusNotFound, notice{Text: fmt.Sprintf("The page has no pipeline %q to show: choose one of %s, or all.", name, strings.Join(in.Pipelines.Names(), ", ")), Refused: true}
		} else {
			in.Pipeline = name
		}
	}
	b, err := Read(ctx, in)
	if err != nil {
		s.fail(w, err)
		return
	}
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, name, view{Board: b, Marker: marker, Session: s.sessionOf(r), Notice: n}); err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	s.log.Error("operator page: read the board", "err", err)
	// The ledger's errors name it with its secrets redacted.
	http.Error(w, "the board could not be read: "+err.Error(), http.StatusInternalServerError)
}

// events streams an "update" event each time the ledger's change marker
// moves from the one the page was drawn at (?since=) or, without it, from
// the one at connection.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	last := r.URL.Query().Get("since")
	if last == "" {
		m, err := s.read.Ledger.ChangeMarker(ctx)
		if err != nil {
			s.fail(w, err)
			return
		}
		last = m
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": changes of the ledger\n\n")
	flusher.Flush()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		m, err := s.read.Ledger.ChangeMarker(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("operator page: read the change marker", "err", err)
			}
			continue // the next tick tries again
		}
		if m == last {
			continue
		}
		last, n = m, n+1
		if _, err := fmt.Fprintf(w, "event: update\ndata: %d\n\n", n); err != nil {
			return
		}
		flusher.Flush()
	}
}
