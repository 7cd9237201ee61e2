// Package execstep runs the command of an exec step the way a crontab job
// expects to be run, with what allot needs around it: in the episode's
// directory, with the step's input as ALLOT_* environment variables and as
// JSON on stdin, stdout and stderr kept in files beside the outputs, the
// whole process group killed when the step times out or is cancelled, and
// the exit code sorted into done, retry later, or failed.
package execstep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Spec is one run of a command.
type Spec struct {
	Command []string // program and arguments, placeholders already expanded
	Dir     string   // working directory (the episode's directory)
	Env     []string // the whole environment of the command
	Stdin   []byte
	// Stdout and Stderr are the files the command's output goes to; they
	// are truncated first.
	Stdout, Stderr string
	Timeout        time.Duration
	// RetryExitCodes are the exit codes that mean "run me again later".
	RetryExitCodes []int
	// KillGrace is how long the process group has between SIGTERM and
	// SIGKILL (default 5 s).
	KillGrace time.Duration
}

// Outcome of a run that did not succeed.
var (
	// ErrRetry: the command exited with a retry exit code.
	ErrRetry = errors.New("the command asked to be run again later")
	// ErrFailed: the command exited with another non-zero code, could not
	// be started, or timed out.
	ErrFailed = errors.New("the command failed")
)

// Error says how a run ended: its exit code and the last lines of its
// stderr. It wraps ErrRetry or ErrFailed.
type Error struct {
	kind     error
	ExitCode int // -1 if the command did not exit by itself
	Reason   string
	Tail     string // last lines of stderr
}

func (e *Error) Error() string {
	msg := e.Reason
	if e.Tail != "" {
		msg += "; last lines of stderr:\n" + e.Tail
	}
	return msg
}

func (e *Error) Unwrap() error { return e.kind }

// tailLines is how many lines of stderr an Error carries.
const tailLines = 20

// Run runs the command to completion. It returns nil on exit 0; an *Error
// wrapping ErrRetry or ErrFailed when the command said so, failed to
// start, or timed out; and ctx's error when the caller cancelled. On
// timeout and on cancellation the whole process group gets SIGTERM, then
// SIGKILL after the grace period, so no child of the command outlives it.
// beat, if not nil, is called every tick while the command runs.
func Run(ctx context.Context, spec Spec, tick time.Duration, beat func()) error {
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return &Error{kind: ErrFailed, ExitCode: -1, Reason: "no command to run"}
	}
	stdout, err := create(spec.Stdout)
	if err != nil {
		return err
	}
	defer stdout.Close()
	stderr, err := create(spec.Stderr)
	if err != nil {
		return err
	}
	defer stderr.Close()
	tail := &tailWriter{}

	runCtx := ctx
	var cancel context.CancelFunc
	if spec.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
	}
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir, cmd.Env = spec.Dir, spec.Env
	cmd.Stdin = bytes.NewReader(spec.Stdin)
	cmd.Stdout = stdout
	cmd.Stderr = io.MultiWriter(stderr, tail)
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return &Error{kind: ErrFailed, ExitCode: -1, Reason: fmt.Sprintf("start %q: %v", spec.Command[0], err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	grace := spec.KillGrace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	var ticks <-chan time.Time
	if beat != nil && tick > 0 {
		t := time.NewTicker(tick)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case err := <-done:
			return exitResult(err, spec, tail)
		case <-ticks:
			beat()
		case <-runCtx.Done():
			stopGroup(cmd, grace, done)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &Error{kind: ErrFailed, ExitCode: -1, Reason: fmt.Sprintf("timed out after %s; its process group was killed", spec.Timeout), Tail: tail.String()}
		}
	}
}

func exitResult(err error, spec Spec, tail *tailWriter) error {
	if err == nil {
		return nil
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return &Error{kind: ErrFailed, ExitCode: -1, Reason: fmt.Sprintf("run %q: %v", spec.Command[0], err), Tail: tail.String()}
	}
	code := exitErr.ExitCode()
	if code < 0 {
		return &Error{kind: ErrFailed, ExitCode: code, Reason: fmt.Sprintf("%q was killed by a signal (%v)", spec.Command[0], exitErr), Tail: tail.String()}
	}
	if slices.Contains(spec.RetryExitCodes, code) {
		return &Error{kind: ErrRetry, ExitCode: code, Reason: fmt.Sprintf("%q exited %d: run it again later", spec.Command[0], code), Tail: tail.String()}
	}
	return &Error{kind: ErrFailed, ExitCode: code, Reason: fmt.Sprintf("%q exited %d", spec.Command[0], code), Tail: tail.String()}
}

// stopGroup terminates the command's process group and waits for the
// command to exit.
func stopGroup(cmd *exec.Cmd, grace time.Duration, done <-chan error) {
	signalGroup(cmd, false)
	select {
	case <-done:
		// The leader is gone; make sure nothing of its group stays.
		signalGroup(cmd, true)
	case <-time.After(grace):
		signalGroup(cmd, true)
		<-done
	}
}

func create(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
}

// tailWriter keeps the last tailLines lines written to it (and no more than
// 64 KiB).
type tailWriter struct{ buf []byte }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 64<<10 {
		t.buf = t.buf[len(t.buf)-64<<10:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	lines := strings.Split(strings.TrimRight(string(t.buf), "\n"), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return strings.Join(lines, "\n")
}

// Expand replaces {name} placeholders in a command's arguments with vars;
// a placeholder without a value is an error naming it and the known ones,
// so a typo never runs a command with a literal "{perod}" in it. "{{" and
// "}}" stand for literal braces.
func Expand(args []string, vars map[string]string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		var b strings.Builder
		for j := 0; j < len(a); j++ {
			switch {
			case strings.HasPrefix(a[j:], "{{"):
				b.WriteByte('{')
				j++
			case strings.HasPrefix(a[j:], "}}"):
				b.WriteByte('}')
				j++
			case a[j] == '{':
				end := strings.IndexByte(a[j:], '}')
				if end < 0 {
					return nil, fmt.Errorf("argument %q has an unclosed {: write {{ for a literal brace", a)
				}
				name := a[j+1 : j+end]
				v, ok := vars[name]
				if !ok {
					known := make([]string, 0, len(vars))
					for k := range vars {
						known = append(known, "{"+k+"}")
					}
					slices.Sort(known)
					return nil, fmt.Errorf("argument %q names {%s}, which is not a placeholder: use one of %s", a, name, strings.Join(known, ", "))
				}
				b.WriteString(v)
				j += end
			default:
				b.WriteByte(a[j])
			}
		}
		out[i] = b.String()
	}
	return out, nil
}
