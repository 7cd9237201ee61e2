// Package execstep runs the command of an exec step the way a crontab job
// expects to be run, with what allot needs around it: in the episode's
// directory, with the step's input as ALLOT_* environment variables and as
// JSON on stdin, stdout and stderr kept in files beside the outputs, and the
// exit code sorted into done, retry later, or failed. The exit of the
// command's own process decides; every process it started is ended with it
// (after it exits, when it times out, and when it is cancelled), so no child
// outlives its step (see docs/design.md, "Steps").
package execstep

import (
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
	// KillGrace is how long the command's processes have between SIGTERM
	// and SIGKILL (default 5 s).
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

// pollEvery is how often the processes of a command being stopped are
// looked at again.
const pollEvery = 20 * time.Millisecond

// Run runs the command to completion. It returns nil on exit 0; an *Error
// wrapping ErrRetry or ErrFailed when the command said so, failed to
// start, or timed out; and ctx's error when the caller cancelled.
//
// The command's own exit decides, even when a process it left behind still
// holds its stdout or stderr: the output goes straight to the files, and
// nothing waits for a pipe to close. Every process the command started is
// then ended: SIGTERM, and SIGKILL after the grace period. The same happens
// to all of them on timeout and on cancellation. On Linux that is every
// descendant, also one that left the process group (setsid); elsewhere, the
// command's process group. beat, if not nil, is called every tick while the
// command runs.
func Run(ctx context.Context, spec Spec, tick time.Duration, beat func()) error {
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return &Error{kind: ErrFailed, ExitCode: -1, Reason: "no command to run"}
	}
	files, err := openFiles(spec)
	if err != nil {
		return err
	}
	defer files.close()

	runCtx := ctx
	var cancel context.CancelFunc
	if spec.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
	}
	tr := newTracker()
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir, cmd.Env = spec.Dir, append(slices.Clip(spec.Env), tr.env()...)
	// Files, not writers: exec.Cmd copies from a pipe for anything else,
	// and Wait then waits for every process holding that pipe.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files.stdin, files.stdout, files.stderr
	tr.prepare(cmd)
	if err := cmd.Start(); err != nil {
		return &Error{kind: ErrFailed, ExitCode: -1, Reason: fmt.Sprintf("start %q: %v", spec.Command[0], err)}
	}
	tr.started(cmd.Process.Pid)
	files.close() // the command has its own copies
	r := &running{tr: tr, done: make(chan error, 1)}
	go func() { r.done <- cmd.Wait() }()
	grace := spec.KillGrace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	var ticks <-chan time.Time
	if tick > 0 {
		t := time.NewTicker(tick)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case err := <-r.done:
			r.exit(err)
			// The step is over: whatever it left running goes with it.
			r.stop(grace)
			return exitResult(r.waitErr, spec)
		case <-ticks:
			tr.record()
			if beat != nil {
				beat()
			}
		case <-runCtx.Done():
			r.stop(grace)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &Error{kind: ErrFailed, ExitCode: -1, Reason: fmt.Sprintf("timed out after %s; it and every process it started were killed", spec.Timeout), Tail: tail(spec.Stderr)}
		}
	}
}

// tracker finds and signals the processes of one command (procs_*.go).
type tracker interface {
	// env is what the command's environment gets in addition.
	env() []string
	// prepare sets the command up before it starts.
	prepare(cmd *exec.Cmd)
	// started is told the command's PID.
	started(pid int)
	// record notes the command's processes while it runs, so that one that
	// leaves them later is still known.
	record()
	// leaderExited is told when the command's own process was waited for:
	// its PID may be another process's from then on.
	leaderExited()
	// signal sends SIGTERM (or SIGKILL) to every process of the command.
	signal(kill bool)
	// alive reports whether a process of the command other than the
	// command itself is still there.
	alive() bool
}

// running is a started command.
type running struct {
	tr      tracker
	done    chan error
	exited  bool
	waitErr error
}

func (r *running) exit(err error) {
	r.exited, r.waitErr = true, err
	r.tr.leaderExited()
}

// poll takes the command's exit if it has come.
func (r *running) poll() {
	if r.exited {
		return
	}
	select {
	case err := <-r.done:
		r.exit(err)
	default:
	}
}

// stop ends every process of the command: SIGTERM, then SIGKILL to what
// is left after grace; it returns once the command has exited and no other
// process of it is left (or, for a process that even SIGKILL does not end,
// a while after that).
func (r *running) stop(grace time.Duration) {
	gone := func() bool { r.poll(); return r.exited && !r.tr.alive() }
	r.tr.signal(false)
	deadline := time.Now().Add(grace)
	for !gone() {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(pollEvery)
	}
	// A process in uninterruptible sleep ends only when its I/O does.
	deadline = time.Now().Add(grace + 10*time.Second)
	for !gone() {
		r.tr.signal(true)
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(pollEvery)
	}
	if !r.exited {
		r.exit(<-r.done)
	}
}

func exitResult(err error, spec Spec) error {
	if err == nil {
		return nil
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return &Error{kind: ErrFailed, ExitCode: -1, Reason: fmt.Sprintf("run %q: %v", spec.Command[0], err), Tail: tail(spec.Stderr)}
	}
	code := exitErr.ExitCode()
	if code < 0 {
		return &Error{kind: ErrFailed, ExitCode: code, Reason: fmt.Sprintf("%q was killed by a signal (%v)", spec.Command[0], exitErr), Tail: tail(spec.Stderr)}
	}
	if slices.Contains(spec.RetryExitCodes, code) {
		return &Error{kind: ErrRetry, ExitCode: code, Reason: fmt.Sprintf("%q exited %d: run it again later", spec.Command[0], code), Tail: tail(spec.Stderr)}
	}
	return &Error{kind: ErrFailed, ExitCode: code, Reason: fmt.Sprintf("%q exited %d", spec.Command[0], code), Tail: tail(spec.Stderr)}
}

// files are the command's stdin, stdout and stderr.
type files struct {
	stdin, stdout, stderr *os.File
	stdinPath             string // to remove, where it could not be at once
}

func openFiles(spec Spec) (*files, error) {
	f := &files{}
	var err error
	if f.stdout, err = create(spec.Stdout); err != nil {
		return nil, err
	}
	if f.stderr, err = create(spec.Stderr); err != nil {
		f.close()
		return nil, err
	}
	if f.stdin, f.stdinPath, err = stdinFile(spec.Stdin); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

func (f *files) close() {
	for _, file := range []**os.File{&f.stdin, &f.stdout, &f.stderr} {
		if *file != nil {
			(*file).Close()
			*file = nil
		}
	}
	if f.stdinPath != "" && os.Remove(f.stdinPath) == nil {
		f.stdinPath = ""
	}
}

func create(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
}

// stdinFile is a file holding data, read from its start: unlike a pipe,
// nothing has to keep writing it for a reader that may never read.
// It is unlinked at once where an open file may be (it goes with its last
// descriptor); elsewhere its path is returned, to remove after the run.
func stdinFile(data []byte) (*os.File, string, error) {
	f, err := os.CreateTemp("", "allot-stdin-*")
	if err != nil {
		return nil, "", fmt.Errorf("write the command's stdin: %w", err)
	}
	path := f.Name()
	if os.Remove(path) == nil {
		path = ""
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, path, fmt.Errorf("write the command's stdin: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, path, err
	}
	return f, path, nil
}

// tail is the last tailLines lines of the file at path (of its last 64 KiB).
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		if _, err := f.Seek(fi.Size()-max, io.SeekStart); err != nil {
			return ""
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return strings.Join(lines, "\n")
}

// Placeholders lists the {name} placeholders that args use, in order, once
// each; an unclosed brace is an error. "{{" and "}}" stand for literal
// braces.
func Placeholders(args []string) ([]string, error) {
	var names []string
	for _, a := range args {
		if _, err := expandArg(a, func(name string) (string, bool) {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
			return "", true
		}); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// Expand replaces {name} placeholders in a command's arguments with vars;
// a placeholder without a value is an error naming it and the known ones,
// so a typo never runs a command with a literal "{perod}" in it. "{{" and
// "}}" stand for literal braces.
func Expand(args []string, vars map[string]string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		v, err := expandArg(a, func(name string) (string, bool) { v, ok := vars[name]; return v, ok })
		if err != nil {
			if errors.Is(err, errUnknown) {
				known := make([]string, 0, len(vars))
				for k := range vars {
					known = append(known, "{"+k+"}")
				}
				slices.Sort(known)
				return nil, fmt.Errorf("%w: use one of %s", err, strings.Join(known, ", "))
			}
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

var errUnknown = errors.New("not a placeholder")

func expandArg(a string, value func(name string) (string, bool)) (string, error) {
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
				return "", fmt.Errorf("argument %q has an unclosed {: write {{ for a literal brace", a)
			}
			name := a[j+1 : j+end]
			v, ok := value(name)
			if !ok {
				return "", fmt.Errorf("argument %q names {%s}, which is %w", a, name, errUnknown)
			}
			b.WriteString(v)
			j += end
		default:
			b.WriteByte(a[j])
		}
	}
	return b.String(), nil
}
