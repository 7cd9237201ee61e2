package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/devstack"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/step"
)

func TestTallyWritesTheDigestAndParksWithoutATopic(t *testing.T) {
	dir := t.TempDir()
	in := step.Input{Step: "tally", Period: "2026-W32", EpisodeID: "2026-W32-0", Dir: dir, Params: map[string]string{"topic": "engineering"}}
	out, err := tally(context.Background(), in)
	if err != nil || len(out.Files) != 1 || out.Files[0] != "digest.txt" {
		t.Fatalf("tally: %+v, %v", out, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "digest.txt"))
	if err != nil || !strings.Contains(string(data), "2026-W32") {
		t.Fatalf("digest %q, %v", data, err)
	}
	in.Params = nil
	if _, err := tally(context.Background(), in); !step.IsPark(err) {
		t.Fatalf("tally without a topic: %v, want an error marked with step.Park", err)
	}
}

func TestOutboxDeliversOncePerKeyAndLooksUp(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o, err := newOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	const key = "6f1c8a52-1d4e-5b7a-9a0e-3c2d1f0e9b8a"
	if _, err := o.LookupByIdempotencyKey(ctx, key); !errors.Is(err, paidvendor.ErrNotFound) {
		t.Fatalf("look-up before any delivery: %v, want ErrNotFound", err)
	}
	for range 2 {
		task, err := o.Submit(ctx, paidvendor.SubmitRequest{IdempotencyKey: key, Kind: "announce", Params: map[string]string{"to": "team@example.com"}})
		if err != nil || task.ID != "outbox-"+key || task.Status != paidvendor.StatusSucceeded {
			t.Fatalf("submit: %+v, %v", task, err)
		}
	}
	if got := messages(t, dir); len(got) != 1 {
		t.Fatalf("two submits of one key left %v, want one message", got)
	}
	if task, err := o.LookupByIdempotencyKey(ctx, key); err != nil || task.ID != "outbox-"+key {
		t.Fatalf("look-up after delivery: %+v, %v", task, err)
	}
}

// The "Build your own worker" section of docs/steps-and-vendors.md is followed to the letter: its Go
// excerpt is this program's, and its commands, run as written (with the
// embedded server in-process and the data in temporary directories), start
// one episode whose Go step's file is recorded with its sha256 and whose
// effect reached the outbox once, however often the run is started.
func TestDocsBuildAndRunTheCustomWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and starts the embedded server")
	}
	readme, err := os.ReadFile("../../docs/steps-and-vendors.md")
	if err != nil {
		t.Fatal(err)
	}
	section := sectionOf(t, string(readme), "### Build your own worker")
	goBlock, shBlock := block(t, section, "go"), block(t, section, "sh")
	source, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dedent(string(source)), dedent(goBlock)) {
		t.Fatalf("the README's Go excerpt is not main.go's:\n%s", goBlock)
	}

	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	dev := allottest.StartDevWith(t, devstack.Config{DataDir: filepath.Join(tmp, "server"), NoWorker: true, Headless: true})
	workerBin := allottest.BuildBinary(t, "allot/examples/custom-worker")
	starterBin := allottest.BuildBinary(t, "allot/starter")
	ledgerURL := "sqlite:" + filepath.Join(tmp, "allot.db")
	env := cleanenv.Environ(
		"TEMPORAL_ADDRESS="+dev.Info.Frontend, "TEMPORAL_NAMESPACE="+dev.Info.Namespace,
		"ALLOT_LEDGER="+ledgerURL, "ALLOT_DATA_DIR="+filepath.Join(tmp, "data"))
	outbox := filepath.Join(tmp, "outbox")

	var starterLine string
	var worker *allottest.Process
	t.Cleanup(func() {
		if t.Failed() && worker != nil {
			t.Logf("worker output:\n%s", worker.Output.String())
		}
	})
	for _, line := range strings.Split(strings.TrimSpace(shBlock), "\n") {
		switch {
		case line == "go run ./devserver --no-worker &":
			// Running in-process above.
		case strings.HasPrefix(line, "export "):
			for _, kv := range strings.Fields(strings.TrimPrefix(line, "export ")) {
				name, value, _ := strings.Cut(kv, "=")
				switch name {
				case "OUTBOX_DIR":
					value = outbox
				case "ALLOT_PIPELINES":
					value = filepath.Join(root, value)
				default:
					t.Fatalf("the README exports %s, which this test does not know", name)
				}
				env = append(env, name+"="+value)
			}
		case line == "go run ./examples/custom-worker &":
			cmd := exec.Command(workerBin)
			cmd.Env, cmd.Dir = env, tmp
			worker = allottest.StartProcess(t, cmd)
			worker.WaitOutput(t, regexp.MustCompile(`allot worker starting`), time.Minute)
		case strings.HasPrefix(line, "go run ./starter "):
			starterLine = line
			runStarter(t, starterBin, env, tmp, line)
		case strings.HasPrefix(line, "ls "):
			if got := messages(t, outbox); len(got) != 1 {
				t.Fatalf("the outbox holds %v, want one message", got)
			}
		default:
			t.Fatalf("the README's commands have a line this test does not run: %q", line)
		}
	}
	if starterLine == "" {
		t.Fatal("the README starts no run")
	}
	// Again, as the README says: the same episode, still one message.
	runStarter(t, starterBin, env, tmp, starterLine)
	if got := messages(t, outbox); len(got) != 1 {
		t.Fatalf("after the run started again the outbox holds %v, want one message", got)
	}

	led, err := ledger.OpenReadOnly(context.Background(), ledgerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	records, err := led.Steps(context.Background(), "weekly-digest", "2026-W32-0")
	if err != nil {
		t.Fatal(err)
	}
	digest, err := os.ReadFile(filepath.Join(tmp, "data", "artifacts", "weekly-digest", "2026-W32-0", "digest.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(digest)
	var recorded bool
	for _, r := range records {
		if r.Step == "tally" && len(r.Outputs) == 1 && r.Outputs[0].SHA256 == hex.EncodeToString(sum[:]) && strings.Contains(string(r.Result), `"topic":"engineering"`) {
			recorded = true
		}
	}
	if !recorded {
		t.Fatalf("the Go step's file and result are not recorded: %+v", records)
	}
}

// A worker whose pipelines name a Go step it does not register refuses to
// start, naming the step and where to register it.
func TestWorkerRefusesAPipelineWithAnUnregisteredGoStep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	tmp := t.TempDir()
	pipelines := filepath.Join(tmp, "pipelines.toml")
	if err := os.WriteFile(pipelines, []byte("[[pipeline]]\nname = \"p\"\n  [[pipeline.step]]\n  name = \"count\"\n  kind = \"go\"\n  func = \"count-rows\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(allottest.BuildBinary(t, "allot/examples/custom-worker"))
	cmd.Env = cleanenv.Environ("ALLOT_PIPELINES="+pipelines, "ALLOT_LEDGER=sqlite:"+filepath.Join(tmp, "allot.db"), "TEMPORAL_ADDRESS=127.0.0.1:1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), `"count-rows"`) || !strings.Contains(string(out), "app.WorkerConfig.Steps") {
		t.Fatalf("worker with an unregistered go step: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(tmp, "allot.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused worker created its ledger (%v)", err)
	}
}

func runStarter(t *testing.T, bin string, env []string, dir, line string) {
	t.Helper()
	ctx, cancel := allottest.Context(t, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, strings.Fields(strings.TrimPrefix(line, "go run ./starter "))...)
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "2026-W32-0") || !regexp.MustCompile(`episode stage\s+completed`).Match(out) {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
}

func messages(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func sectionOf(t *testing.T, doc, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("the README has no %q", heading)
	}
	if i := strings.Index(rest, "\n#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

func block(t *testing.T, section, lang string) string {
	t.Helper()
	_, rest, ok := strings.Cut(section, "```"+lang+"\n")
	if !ok {
		t.Fatalf("no %s block in the section", lang)
	}
	body, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("the %s block does not end", lang)
	}
	return body
}

func dedent(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
