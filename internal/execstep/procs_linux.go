package execstep

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// On Linux the worker finds every process of a command, also one that left
// the command's process group (setsid) and whose parent exited:
//
//   - the worker is a child subreaper (PR_SET_CHILD_SUBREAPER), so such an
//     orphan becomes the worker's child instead of init's, and the worker
//     reaps it once it is one of a command's;
//   - the command's environment carries ALLOT_EXEC_ID, a token of this run,
//     which its descendants inherit;
//   - a process of the command is: the command itself, a member of its
//     process group, a child of the worker (or of init, if the subreaper
//     could not be set) that carries the token, a process seen as one while
//     the command ran, and every descendant of these.
//
// Only a process that left the group, cleared its environment and lost its
// parent before it was ever seen escapes. Processes are signalled through a
// pidfd after their start time is checked, so a reused PID is never hit.

// ExecIDEnv names the variable that marks a command's processes.
const ExecIDEnv = "ALLOT_EXEC_ID"

const (
	prSetChildSubreaper = 36  // PR_SET_CHILD_SUBREAPER
	sysPidfdSendSignal  = 424 // the same number on every architecture Go supports
	sysPidfdOpen        = 434
)

var subreaper = sync.OnceValue(func() bool {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	return errno == 0
})

type linuxTracker struct {
	self   int
	token  string
	leader int // 0 once it exited
	group  int
	seen   map[int]uint64 // PID -> start time of processes seen as the command's
	// others are the worker's (or init's) children found without the
	// token, by PID -> start time: an environment is set once, by exec.
	others map[int]uint64
}

func newTracker() tracker {
	subreaper()
	var b [16]byte
	_, _ = rand.Read(b[:])
	return &linuxTracker{self: os.Getpid(), token: hex.EncodeToString(b[:]), seen: map[int]uint64{}, others: map[int]uint64{}}
}

func (t *linuxTracker) env() []string { return []string{ExecIDEnv + "=" + t.token} }

func (t *linuxTracker) prepare(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func (t *linuxTracker) started(pid int) { t.leader, t.group = pid, pid }

func (t *linuxTracker) leaderExited() { t.leader = 0 }

func (t *linuxTracker) record() { t.members() }

func (t *linuxTracker) signal(kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	for pid, p := range t.members() {
		if !p.zombie {
			signalProcess(pid, p.start, sig)
		}
	}
}

func (t *linuxTracker) alive() bool {
	left := false
	for pid, p := range t.members() {
		switch {
		case !p.zombie:
			if pid != t.leader {
				left = true
			}
		case p.ppid == t.self && pid != t.leader:
			// An orphan of the command that became the worker's child:
			// the worker reaps it. The command itself is exec.Cmd's.
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
	return left
}

// proc is a line of /proc/PID/stat.
type proc struct {
	ppid, pgid int
	start      uint64
	zombie     bool
}

// members finds the processes of the command now, and remembers them.
func (t *linuxTracker) members() map[int]proc {
	all := processes()
	out := map[int]proc{}
	for pid, p := range all {
		switch {
		case pid == t.self:
		case pid == t.leader, p.pgid == t.group:
			out[pid] = p
		case t.seen[pid] != 0 && t.seen[pid] == p.start:
			out[pid] = p
		case (p.ppid == t.self || p.ppid == 1) && t.others[pid] != p.start:
			if t.carriesToken(pid) {
				out[pid] = p
			} else {
				t.others[pid] = p.start
			}
		}
	}
	// And their descendants: children are found from their parents, over
	// as many rounds as the tree is deep.
	for added := true; added; {
		added = false
		for pid, p := range all {
			if _, ok := out[pid]; ok || pid == t.self {
				continue
			}
			if _, ok := out[p.ppid]; ok {
				out[pid] = p
				added = true
			}
		}
	}
	// Remembered: a zombie has no environment left to show the token by,
	// and a process whose parent exits is no one's descendant any more.
	for pid, p := range out {
		t.seen[pid] = p.start
	}
	return out
}

func (t *linuxTracker) carriesToken(pid int) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	want := []byte(ExecIDEnv + "=" + t.token)
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, want) {
			return true
		}
	}
	return false
}

// processes reads every process's parent, group, start time and state.
func processes() map[int]proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make(map[int]proc, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			out[pid] = p
		}
	}
	return out
}

func readStat(pid int) (proc, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	// The command name is in parentheses and may hold anything: the
	// fields start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return proc{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return proc{}, false
	}
	return proc{ppid: ppid, pgid: pgid, start: start, zombie: f[0] == "Z" || f[0] == "X"}, true
}

// signalProcess signals the process with pid only if it is still the one
// that started at start.
func signalProcess(pid int, start uint64, sig syscall.Signal) {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ENOSYS {
		// A kernel before 5.3: the start time was read a moment ago.
		if p, ok := readStat(pid); ok && p.start == start {
			_ = syscall.Kill(pid, sig)
		}
		return
	}
	if errno != 0 {
		return
	}
	defer syscall.Close(int(fd))
	// The pidfd is that process for good; the PID was it when it was
	// opened if the start time still matches.
	if p, ok := readStat(pid); !ok || p.start != start {
		return
	}
	_, _, _ = syscall.Syscall6(sysPidfdSendSignal, fd, uintptr(sig), 0, 0, 0, 0)
}
