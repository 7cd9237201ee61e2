package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"allot"
)

// DefaultAddr is where the page listens unless told otherwise: loopback
// only, since this stage has no operator token.
const DefaultAddr = "127.0.0.1:8090"

// pollEvery is how often /events reads the ledger's change marker: a
// ledger write shows on an open page within about this and one redraw.
const pollEvery = 500 * time.Millisecond

//go:embed assets
var assets embed.FS

var pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"bsCommand":   allot.BudgetShowCommand,
	"rfc3339":     func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"seriesClass": SeriesClass,
}).ParseFS(assets, "assets/page.html"))

// ServerConfig is how the page is served.
type ServerConfig struct {
	// Addr is a loopback host:port; "" is DefaultAddr. Port 0 picks one.
	Addr string
	Read ReadInput
	// Ready, when set, is called with the address listened on, once the
	// page answers.
	Ready  func(addr string)
	Logger *slog.Logger
}

// Server serves the page. It holds no state of its own: every request
// reads the ledger, so several servers may serve one ledger.
type Server struct {
	read ReadInput
	log  *slog.Logger
}

// NewServer returns the page's handler.
func NewServer(in ReadInput, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{read: in, log: logger}
}

// CheckAddr refuses an address the page must not listen on: anything but
// loopback, until operator tokens exist (docs/design.md, "The operator
// page").
func CheckAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q is not host:port: give a loopback address, e.g. --addr %s", addr, DefaultAddr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--addr %q is not a loopback address: the operator page has no operator tokens or CSRF protection yet (its actions are not built), so it serves 127.0.0.1 only; run `starter console --addr %s` and reach it through an SSH tunnel or a proxy that authenticates", addr, DefaultAddr)
}

// Serve serves the page on cfg.Addr until ctx ends.
func Serve(ctx context.Context, cfg ServerConfig) error {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if err := CheckAddr(cfg.Addr); err != nil {
		return err
	}
	s := NewServer(cfg.Read, cfg.Logger)
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("operator page: listen on %s: %w (another process may hold the port: give another with --addr 127.0.0.1:PORT)", cfg.Addr, err)
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
// script swaps in), /events the change stream, /healthz, /static/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "the operator page is read-only: run the CLI command it shows", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case r.URL.Path == "/":
		s.render(w, r, "page")
	case r.URL.Path == "/board":
		s.render(w, r, "board")
	case r.URL.Path == "/events":
		s.events(w, r)
	case r.URL.Path == "/healthz":
		h.Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	case strings.HasPrefix(r.URL.Path, "/static/"):
		static, _ := fs.Sub(assets, "assets")
		http.StripPrefix("/static/", http.FileServerFS(static)).ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

// view is what the templates render: the board and the marker it was
// read at, from which the live script asks for changes.
type view struct {
	Board
	Marker string
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, name string) {
	ctx := r.Context()
	// The marker first: a write between it and the board shows as a
	// change, never as one missed.
	marker, err := s.read.Ledger.ChangeMarker(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	// A zero Now reads each request at its own time; a set one is a
	// test's fixed clock.
	b, err := Read(ctx, s.read)
	if err != nil {
		s.fail(w, err)
		return
	}
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, name, view{Board: b, Marker: marker}); err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
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
