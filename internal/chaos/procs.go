package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one real binary the chaos run starts, kills and starts again.
// Every generation's output is appended to one log file, behind a header
// line, so a failed run can be read afterwards.
type proc struct {
	name string
	path string
	args []string
	env  []string
	dir  string
	log  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	gen    int
	offset int64 // where the current generation's output starts in log
}

func newProc(name, path string, args, env []string, dir string) *proc {
	return &proc{name: name, path: path, args: args, env: env, dir: dir, log: filepath.Join(dir, "logs", name+".log")}
}

// start starts a new generation; it fails if one is running.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is running", p.name)
		}
	}
	if err := os.MkdirAll(filepath.Dir(p.log), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.gen++
	fmt.Fprintf(f, "=== %s generation %d started %s: %s %s\n", p.name, p.gen, time.Now().UTC().Format(time.RFC3339Nano), p.path, strings.Join(p.args, " "))
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	p.offset = st.Size()
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a Ctrl-C of the chaos run must not reach the
	// children before the run stops them itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "=== %s generation exited %s: %v\n", p.name, time.Now().UTC().Format(time.RFC3339Nano), err)
		f.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// running reports whether the current generation still runs.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the current generation and waits up to timeout for
// it to exit; then it is killed.
func (p *proc) signal(sig syscall.Signal, timeout time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
	}
}

// kill SIGKILLs the current generation and waits for it to be gone.
func (p *proc) kill() { p.signal(syscall.SIGKILL, 10*time.Second) }

// pid is the current generation's process ID; 0 if none was started.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// stop asks the current generation to stop (SIGTERM), then kills it.
func (p *proc) stop(timeout time.Duration) { p.signal(syscall.SIGTERM, timeout) }

// output is what the current generation wrote so far.
func (p *proc) output() string {
	p.mu.Lock()
	off := p.offset
	p.mu.Unlock()
	b, err := os.ReadFile(p.log)
	if err != nil || int64(len(b)) < off {
		return ""
	}
	return string(b[off:])
}

// waitOutput waits until the current generation prints something matching
// re, and returns the submatches.
func (p *proc) waitOutput(ctx context.Context, re *regexp.Regexp, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		out := p.output()
		if m := re.FindStringSubmatch(out); m != nil {
			return m, nil
		}
		if !p.running() {
			return nil, fmt.Errorf("%s exited before printing %q; its log: %s\n%s", p.name, re, p.log, tail(p.output(), 20))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not print %q within %s; its log: %s\n%s", p.name, re, timeout, p.log, tail(out, 20))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePort asks the kernel for a free TCP port on the loopback address.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitTCP waits until addr accepts connections.
func waitTCP(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not accept connections after %s: %w", addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cleanEnv is the chaos run's environment without anything that would point
// its children elsewhere (the user's ALLOT_*, TEMPORAL_* and vendor keys).
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "ALLOT_") || strings.HasPrefix(name, "TEMPORAL_") || strings.HasPrefix(name, "CHAOS_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Binaries are the real programs a chaos run starts.
type Binaries struct {
	Worker    string
	VendorSim string
	Starter   string
	DevServer string
	// ActivityVendor is the activity-adapter vendor's worker
	// (internal/chaos/activityvendor); the kill measurement does not use it.
	ActivityVendor string
}

// BuildBinaries builds allot's worker, vendorsim, starter and devserver,
// and the chaos run's activityvendor, into dir with the go command, one
// build invocation for all.
func BuildBinaries(ctx context.Context, dir string) (Binaries, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(os.PathSeparator),
		"allot/worker", "allot/vendorsim", "allot/starter", "allot/devserver", "allot/internal/chaos/activityvendor")
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("go build: %v\n%s", err, out)
	}
	return Binaries{
		Worker:    filepath.Join(dir, "worker"),
		VendorSim: filepath.Join(dir, "vendorsim"),
		Starter:   filepath.Join(dir, "starter"),
		DevServer: filepath.Join(dir, "devserver"),

		ActivityVendor: filepath.Join(dir, "activityvendor"),
	}, nil
}

// check makes sure the binaries are files: the chaos run's all
// (needAll), the kill measurement's worker, vendorsim and devserver.
func (b Binaries) check(needAll bool) error {
	paths := map[string]string{"worker": b.Worker, "vendorsim": b.VendorSim, "devserver": b.DevServer}
	if needAll {
		paths["starter"] = b.Starter
		paths["activityvendor"] = b.ActivityVendor
	}
	var errs []error
	for name, p := range paths {
		if p == "" {
			errs = append(errs, fmt.Errorf("no %s binary given", name))
			continue
		}
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			errs = append(errs, fmt.Errorf("%s binary %s: not a file (%v)", name, p, err))
		}
	}
	return errors.Join(errs...)
}
