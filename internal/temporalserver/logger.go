package temporalserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// serverLogLevel is the lowest level of server log records that reach the
// configured slog.Logger. The server logs a great deal at info and below.
const serverLogLevel = slog.LevelWarn

// maxStartupRecords bounds the records held back during start-up.
const maxStartupRecords = 500

// benignMessages are warnings the server prints on every start of this
// setup that call for no action.
var benignMessages = []string{
	// No frontend HTTP API port: the dev server does not offer Nexus.
	"HTTP API port has not been set",
}

// fatalError is what the adapter panics with when the server calls Fatal
// (for example when it cannot bind a port). Start recovers it and returns it
// as an ordinary error instead of letting the process exit.
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return "temporal server fatal error: " + e.msg }

// slogLogger adapts a *slog.Logger to the server's log.Logger interface,
// passing on only records at serverLogLevel or above.
//
// While the services start they complain about each other ("frontend is not
// healthy yet", ...); those records are held back and shown only if Start
// fails. While they stop they complain about the ones already gone; those
// are dropped.
type slogLogger struct {
	l     *slog.Logger
	with  []tag.Tag // converted only when a record is actually emitted
	state *logState // shared by every logger derived with With
}

type logState struct {
	mu        sync.Mutex
	starting  bool
	held      []slog.Record
	truncated int
	stopping  bool
}

var (
	_ log.Logger     = (*slogLogger)(nil)
	_ log.WithLogger = (*slogLogger)(nil)
)

func newSlogLogger(l *slog.Logger) *slogLogger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &slogLogger{
		l:     l.With("component", "temporal-server"),
		state: &logState{starting: true},
	}
}

// started ends the start-up phase: held records are written if failed,
// dropped otherwise.
func (s *slogLogger) started(failed bool) {
	s.state.mu.Lock()
	held, truncated := s.state.held, s.state.truncated
	s.state.starting, s.state.held, s.state.truncated = false, nil, 0
	s.state.mu.Unlock()
	if !failed {
		return
	}
	for _, r := range held {
		_ = s.l.Handler().Handle(context.Background(), r)
	}
	if truncated > 0 {
		s.l.Warn("more server log records during start-up were dropped", "count", truncated)
	}
}

// silence drops every further record; Stop calls it first.
func (s *slogLogger) silence() {
	s.state.mu.Lock()
	s.state.stopping = true
	s.state.mu.Unlock()
}

func (s *slogLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	if level < serverLogLevel || !s.l.Enabled(context.Background(), level) {
		return
	}
	for _, b := range benignMessages {
		if strings.HasPrefix(msg, b) {
			return
		}
	}
	if level == slog.LevelError && (cancelledByCaller(tags) || cancelledByCaller(s.with)) {
		level = slog.LevelWarn
	}
	r := slog.NewRecord(time.Now(), level, msg, 0)
	for _, t := range s.with {
		r.AddAttrs(tagAttr(t))
	}
	for _, t := range tags {
		r.AddAttrs(tagAttr(t))
	}

	s.state.mu.Lock()
	switch {
	case s.state.stopping:
		s.state.mu.Unlock()
		return
	case s.state.starting:
		if len(s.state.held) < maxStartupRecords {
			s.state.held = append(s.state.held, r)
		} else {
			s.state.truncated++
		}
		s.state.mu.Unlock()
		return
	}
	s.state.mu.Unlock()
	_ = s.l.Handler().Handle(context.Background(), r)
}

// cancelledByCaller reports whether a record's error is the context of the
// request it served, cancelled: the client went away mid-request (a
// worker's stop cuts its heartbeat calls short), and the server logs the
// persistence write it abandoned at ERROR. Nothing failed on the server's
// side, so such a record is written at WARN: seen, not alarming (a stop is
// normal operation, docs/operating.md).
func cancelledByCaller(tags []tag.Tag) bool {
	for _, t := range tags {
		zt, ok := t.(tag.ZapTag)
		if !ok {
			continue
		}
		// The server's persistence errors carry the message, not always
		// the wrapped value.
		if err, ok := zt.Field().Interface.(error); ok && (errors.Is(err, context.Canceled) || err.Error() == context.Canceled.Error()) {
			return true
		}
	}
	return false
}

func tagAttr(t tag.Tag) slog.Attr {
	if t == nil {
		return slog.Attr{}
	}
	v := t.Value()
	if err, ok := v.(error); ok {
		return slog.String(t.Key(), err.Error())
	}
	return slog.Any(t.Key(), v)
}

func (s *slogLogger) Debug(msg string, tags ...tag.Tag) { s.emit(slog.LevelDebug, msg, tags) }
func (s *slogLogger) Info(msg string, tags ...tag.Tag)  { s.emit(slog.LevelInfo, msg, tags) }
func (s *slogLogger) Warn(msg string, tags ...tag.Tag)  { s.emit(slog.LevelWarn, msg, tags) }
func (s *slogLogger) Error(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }

// DPanic only panics in the server's development mode; here it is an error.
func (s *slogLogger) DPanic(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }

func (s *slogLogger) Panic(msg string, tags ...tag.Tag) {
	s.emit(slog.LevelError, msg, tags)
	panic(msg)
}

// Fatal logs and panics with a *fatalError rather than exiting the process:
// the server is embedded in a process that owns its own lifetime.
func (s *slogLogger) Fatal(msg string, tags ...tag.Tag) {
	s.emit(slog.LevelError, msg, tags)
	detail := msg
	for _, t := range tags {
		if t != nil && t.Key() == "error" {
			detail = fmt.Sprintf("%s: %v", msg, t.Value())
		}
	}
	panic(&fatalError{msg: detail})
}

func (s *slogLogger) With(tags ...tag.Tag) log.Logger {
	if len(tags) == 0 {
		return s
	}
	with := make([]tag.Tag, 0, len(s.with)+len(tags))
	with = append(with, s.with...)
	with = append(with, tags...)
	return &slogLogger{l: s.l, with: with, state: s.state}
}
