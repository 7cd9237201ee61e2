package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"allot/internal/cleanenv"
	"allot/internal/ledger"
	"allot/internal/report"
)

// Variables of the test binary run again as a process of its own.
const (
	// starterArgsEnv: run the starter with these arguments (JSON) and exit
	// with its status.
	starterArgsEnv = "ALLOT_TEST_STARTER_ARGS"
	// writerEnv: allocate episodes in the ledger at this URL, one a
	// transaction, opening and closing the ledger around each as a
	// starter command that writes does, and print each one's number once
	// its commit returned.
	writerEnv = "ALLOT_TEST_LEDGER_WRITER"
)

// writerPeriod is where the writer allocates: one episode per key, the
// sequences 0, 1, 2, ... in commit order.
const writerPeriod = "2026-W40"

// TestHelperStarterProcess is not a test of its own: it runs the starter
// in a process of its own (starterArgsEnv).
func TestHelperStarterProcess(t *testing.T) {
	spec := os.Getenv(starterArgsEnv)
	if spec == "" {
		t.Skip("run by the tests that need the starter as a process")
	}
	var args []string
	if err := json.Unmarshal([]byte(spec), &args); err != nil {
		t.Fatal(err)
	}
	os.Exit(execute(context.Background(), args, os.Stdout, os.Stderr))
}

// TestHelperLedgerWriter is not a test of its own (writerEnv).
func TestHelperLedgerWriter(t *testing.T) {
	url := os.Getenv(writerEnv)
	if url == "" {
		t.Skip("run by TestReadOnlyCommandsReadOneCommittedStateUnderALiveWriter")
	}
	ctx := context.Background()
	stop := make(chan struct{})
	go func() { // the test closes stdin to stop it
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(stop)
	}()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		led, err := ledger.OpenExisting(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly-video", Key: fmt.Sprintf("weekly-video/live-%06d", i),
			Period: writerPeriod, NominalTime: time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)})
		if cerr := led.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println(i)
	}
}

// Invariant 19 under a live writer: while another process commits one
// allocation after another, opening and closing the ledger around each (as
// the starter's writing commands do, so the -wal comes and goes), the
// read-only commands, each a process of its own, read one committed state
// every time: no error, the writer's episodes a gapless run of sequences
// (no torn read), never fewer than the writer had committed when the
// command started (no stale read), and check clean.
func TestReadOnlyCommandsReadOneCommittedStateUnderALiveWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes")
	}
	l := newReadOnlyLedger(t)
	writer := exec.Command(os.Args[0], "-test.run=^TestHelperLedgerWriter$", "-test.count=1")
	writer.Env = cleanenv.Environ(writerEnv + "=" + l.url)
	writer.Stderr = os.Stderr
	stdin, err := writer.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := writer.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	var committed atomic.Int64 // allocations whose commit returned
	firstCommit := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			n, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64)
			if err != nil {
				continue // go test's own lines
			}
			if committed.Swap(n+1) == 0 {
				close(firstCommit)
			}
		}
	}()
	stopped := false
	stopWriter := func() {
		if !stopped {
			stopped = true
			stdin.Close()
			if err := writer.Wait(); err != nil {
				t.Errorf("the writer: %v", err)
			}
		}
	}
	defer stopWriter()
	select {
	case <-firstCommit:
	case <-time.After(time.Minute):
		t.Fatal("the writer committed nothing in a minute")
	}

	flags := []string{"--json", "--ledger", l.url, "--pipelines", l.pipelines}
	const reads = 24
	for i := range reads {
		args := append([]string{"episodes", "--pipeline", "weekly-video", "--period", writerPeriod}, flags...)
		if i%4 == 3 {
			args = append([]string{"check"}, flags...)
		}
		before := committed.Load()
		out, errOut, code := starterProcess(t, args)
		if code != exitOK {
			t.Fatalf("read %d, %v, with %d allocations committed: exit %d\n%s\n%s", i, args, before, code, out, errOut)
		}
		if args[0] == "check" {
			if !strings.Contains(out, `"ok": true`) {
				t.Fatalf("read %d: check under a live writer is not clean:\n%s", i, out)
			}
			continue
		}
		var res report.EpisodesResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("read %d: %v\n%s", i, err, out)
		}
		for seq, e := range res.Episodes {
			if e.Sequence != seq {
				t.Fatalf("read %d: the writer's episodes skip from sequence %d to %d: a torn read", i, seq-1, e.Sequence)
			}
		}
		if int64(len(res.Episodes)) < before {
			t.Fatalf("read %d saw %d of the writer's episodes, but %d were committed before it started: a stale read", i, len(res.Episodes), before)
		}
	}
	stopWriter()
	if n := committed.Load(); n < 2 {
		t.Fatalf("the writer committed %d allocations during the reads: the test proves nothing", n)
	}
	t.Logf("%d read-only commands while the writer committed %d allocations", reads, committed.Load())
}

// starterProcess runs the starter with args in a process of its own.
func starterProcess(t *testing.T, args []string) (stdout, stderr string, code int) {
	t.Helper()
	spec, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStarterProcess$", "-test.count=1")
	cmd.Env = cleanenv.Environ(starterArgsEnv + "=" + string(spec))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}
