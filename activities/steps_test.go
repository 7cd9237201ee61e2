package activities

// Tests of the steps that are not paid: go steps (RunLocalStep with a
// registered step.Func), exec steps (RunExecStep) and activity steps
// (PrepareStep and RecordStepOutput).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/ledger"
	"allot/internal/pipelinetest"
	"allot/pipeline"
	"allot/step"
)

// stepsPipelines has one pipeline, "works" (days in Asia/Tokyo, so that
// tokyoNominal allocates tokyoEpisode), with a step of each kind that runs
// on or through this worker. SCRATCH is replaced by a directory outside the
// artifacts, where exec commands count their runs and dump their
// environment.
const stepsPipelines = `
[[vendor]]
name        = "videogen"
adapter     = "go"
api_key_env = "VIDEOGEN_KEY"

[[pipeline]]
name      = "works"
period    = "day"
time_zone = "Asia/Tokyo"

  [[pipeline.step]]
  name = "plan"
  kind = "local"

  [[pipeline.step]]
  name   = "render"
  kind   = "go"
  func   = "frames"
  params = { quality = "high" }

  [[pipeline.step]]
  name = "flaky"
  kind = "go"

  [[pipeline.step]]
  name = "stuck"
  kind = "go"

  [[pipeline.step]]
  name = "ghost"
  kind = "go"
  func = "unregistered"

  [[pipeline.step]]
  name    = "settle"
  kind    = "exec"
  command = ["sh", "-c", 'cat > input.json; env > "$ALLOT_PARAM_SCRATCH/env.txt"; pwd -P > cwd.txt; echo settled; echo "warming up" >&2; echo "all good" >&2; printf "region,amount\n%s,42\n" "$ALLOT_PARAM_REGION" > settle.csv; echo run >> "$ALLOT_PARAM_SCRATCH/count"']
  outputs = ["settle.csv"]
  params  = { region = "eu", scratch = "SCRATCH" }
  env     = ["SETTLE_DB"]

  [[pipeline.step]]
  name    = "busy"
  kind    = "exec"
  command = ["sh", "-c", 'echo "source table locked" >&2; exit 75']

  [[pipeline.step]]
  name             = "later"
  kind             = "exec"
  command          = ["sh", "-c", 'exit 42']
  retry_exit_codes = [42]

  [[pipeline.step]]
  name             = "not-later"
  kind             = "exec"
  command          = ["sh", "-c", 'exit 75']
  retry_exit_codes = [42]

  [[pipeline.step]]
  name    = "broken"
  kind    = "exec"
  command = ["sh", "-c", 'echo "opening the ledger" >&2; echo "disk quota exceeded on /data" >&2; exit 3']

  [[pipeline.step]]
  name    = "silent"
  kind    = "exec"
  command = ["sh", "-c", 'echo "nothing to do"']
  outputs = ["missing.csv"]

  [[pipeline.step]]
  name    = "linked-out"
  kind    = "exec"
  command = ["sh", "-c", 'echo secret > "$ALLOT_PARAM_SCRATCH/outside.csv"; ln -s "$ALLOT_PARAM_SCRATCH/outside.csv" linked.csv']
  outputs = ["linked.csv"]
  params  = { scratch = "SCRATCH" }

  [[pipeline.step]]
  name    = "linked-in"
  kind    = "exec"
  command = ["sh", "-c", 'mkdir -p data; echo 7 > data/real.csv; ln -s data/real.csv alias.csv']
  outputs = ["alias.csv"]

  [[pipeline.step]]
  name       = "notify"
  kind       = "activity"
  activity   = "Notify"
  task_queue = "notify-q"
  params     = { channel = "ops" }
`

var stepsStepNames = []string{"plan", "render", "flaky", "stuck", "ghost", "settle", "busy", "later", "not-later", "broken", "silent", "linked-out", "linked-in", "notify"}

// stepsFixture is a fixture on stepsPipelines with tokyoEpisode of "works"
// allocated (key "run-1"), and the scratch directory.
func stepsFixture(t *testing.T, funcs map[string]step.Func) (*fixture, string) {
	t.Helper()
	f := newFixture(t, nil)
	scratch := t.TempDir()
	set, err := pipeline.Parse([]byte(strings.ReplaceAll(stepsPipelines, "SCRATCH", scratch)), "steps_test")
	if err != nil {
		t.Fatalf("parse the steps pipelines: %v", err)
	}
	f.acts.Pipelines = set
	f.acts.Steps = funcs
	f.acts.SecretEnv = VendorKeyEnv(set)
	f.mustAllocate(t, "works", "run-1", tokyoNominal)
	return f, scratch
}

func (f *fixture) runWorks(t *testing.T, fn any, stepName string) (StepState, error) {
	t.Helper()
	return execute[StepState](t, f, fn, RunLocalStepInput{Pipeline: "works", EpisodeID: tokyoEpisode, Step: stepName})
}

func (f *fixture) worksDir() string {
	return filepath.Join(f.acts.ArtifactsDir, "works", tokyoEpisode)
}

// worksRecord is the ledger's record of a step of the works episode.
func (f *fixture) worksRecord(t *testing.T, stepName string) (ledger.StepRecord, bool) {
	t.Helper()
	recs, err := f.led.Steps(f.ctx, "works", tokyoEpisode)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Step == stepName {
			return r, true
		}
	}
	return ledger.StepRecord{}, false
}

// wantRetryable asserts that err is an error Temporal retries: not a
// non-retryable application error.
func wantRetryable(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("got no error, want a retryable one")
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.NonRetryable() {
		t.Fatalf("got a non-retryable %s error, want a retryable one: %v", appErr.Type(), err)
	}
}

// recordingStep is a go step that writes frames.txt (content from *body),
// gives a small JSON result, and keeps every input it was called with.
type recordingStep struct {
	mu     sync.Mutex
	inputs []step.Input
	body   string
}

func (r *recordingStep) run(_ context.Context, in step.Input) (step.Output, error) {
	r.mu.Lock()
	r.inputs = append(r.inputs, in)
	body := r.body
	r.mu.Unlock()
	if err := os.WriteFile(filepath.Join(in.Dir, "frames.txt"), []byte(body), 0o644); err != nil {
		return step.Output{}, err
	}
	return step.Output{Files: []string{"frames.txt"}, Result: json.RawMessage(`{"frames":24}`)}, nil
}

func (r *recordingStep) calls() []step.Input {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]step.Input(nil), r.inputs...)
}

// A go step gets the documented input, its files and result are recorded,
// a completed step with intact outputs is not called again, and one whose
// output went missing or changed is.
func TestGoStepInputOutputsAndRunOnce(t *testing.T) {
	rec := &recordingStep{body: "frame 1\nframe 2\n"}
	f, _ := stepsFixture(t, map[string]step.Func{"frames": rec.run})
	plan, err := f.runWorks(t, f.acts.RunLocalStep, "plan")
	if err != nil {
		t.Fatal(err)
	}

	st, err := f.runWorks(t, f.acts.RunLocalStep, "render")
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	calls := rec.calls()
	if len(calls) != 1 {
		t.Fatalf("the step function ran %d times, want 1", len(calls))
	}
	in := calls[0]
	dir := f.worksDir()
	if in.Pipeline != "works" || in.EpisodeID != tokyoEpisode || in.Period != tokyoPeriod || in.Sequence != 0 ||
		in.AllocationKey != "run-1" || !in.NominalTime.Equal(tokyoNominal) || in.Step != "render" || in.Revision != 0 {
		t.Errorf("input = %+v, want works/%s period %s sequence 0 key run-1 at %s, step render revision 0", in, tokyoEpisode, tokyoPeriod, tokyoNominal)
	}
	if !equalStrings(in.Steps, stepsStepNames) {
		t.Errorf("input steps = %v, want the pinned plan %v", in.Steps, stepsStepNames)
	}
	if !reflect.DeepEqual(in.Params, map[string]string{"quality": "high"}) {
		t.Errorf("input params = %v, want quality=high", in.Params)
	}
	if in.Dir != dir {
		t.Errorf("input dir = %s, want the episode's directory %s", in.Dir, dir)
	}
	if in.IdempotencyKey == "" {
		t.Error("input has no idempotency key")
	}
	wantArtifacts := []step.Artifact{{Step: "plan", Path: filepath.Join(dir, "plan.json"), SHA256: plan.SHA256}}
	if !reflect.DeepEqual(in.Artifacts, wantArtifacts) {
		t.Errorf("input artifacts = %+v, want %+v", in.Artifacts, wantArtifacts)
	}

	framesPath := filepath.Join(dir, "frames.txt")
	sum := sha256Of(t, framesPath)
	if st.Name != "render" || st.Kind != "go" || st.Action != "frames" || st.Status != allot.StepCompleted || st.Artifact != framesPath || st.SHA256 != sum {
		t.Fatalf("render state = %+v, want completed go step frames at %s with sha %s", st, framesPath, sum)
	}
	r, ok := f.worksRecord(t, "render")
	if !ok {
		t.Fatal("render has no record in the ledger")
	}
	if r.Status != allot.StepCompleted || r.Revision != 0 || !reflect.DeepEqual(r.Outputs, []ledger.StepOutput{{Path: framesPath, SHA256: sum}}) {
		t.Fatalf("render record = %+v, want completed revision 0 with output %s %s", r, framesPath, sum)
	}
	var result map[string]int
	if err := json.Unmarshal(r.Result, &result); err != nil || result["frames"] != 24 || len(result) != 1 {
		t.Fatalf("recorded result = %s (%v), want {\"frames\":24}", r.Result, err)
	}

	t.Run("completed is not called again", func(t *testing.T) {
		again, err := f.runWorks(t, f.acts.RunLocalStep, "render")
		if err != nil {
			t.Fatal(err)
		}
		if n := len(rec.calls()); n != 1 {
			t.Fatalf("the step function ran %d times, want still 1", n)
		}
		if again != st {
			t.Fatalf("second run = %+v, want the recorded %+v", again, st)
		}
		if r2, _ := f.worksRecord(t, "render"); !r2.CompletedAt.Equal(r.CompletedAt) {
			t.Fatalf("the record was rewritten: %+v, was %+v", r2, r)
		}
	})

	t.Run("deleted output runs it again with the same key", func(t *testing.T) {
		if err := os.Remove(framesPath); err != nil {
			t.Fatal(err)
		}
		again, err := f.runWorks(t, f.acts.RunLocalStep, "render")
		if err != nil {
			t.Fatal(err)
		}
		calls := rec.calls()
		if len(calls) != 2 {
			t.Fatalf("the step function ran %d times, want 2", len(calls))
		}
		if calls[1].IdempotencyKey != calls[0].IdempotencyKey || calls[1].Revision != 0 {
			t.Fatalf("second call key %q revision %d, first %q: want the same key for the same revision", calls[1].IdempotencyKey, calls[1].Revision, calls[0].IdempotencyKey)
		}
		if again.SHA256 != sum || sha256Of(t, framesPath) != sum {
			t.Fatalf("rewritten output %+v, want sha %s", again, sum)
		}
	})

	t.Run("changed output runs it again", func(t *testing.T) {
		if err := os.WriteFile(framesPath, []byte("tampered\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		rec.body = "frame 1\nframe 2\nframe 3\n"
		rec.mu.Unlock()
		again, err := f.runWorks(t, f.acts.RunLocalStep, "render")
		if err != nil {
			t.Fatal(err)
		}
		if n := len(rec.calls()); n != 3 {
			t.Fatalf("the step function ran %d times, want 3", n)
		}
		newSum := sha256Of(t, framesPath)
		if newSum == sum || again.SHA256 != newSum {
			t.Fatalf("state after the rerun = %+v, file sha %s (old %s): want the new file recorded", again, newSum, sum)
		}
		if r, _ := f.worksRecord(t, "render"); len(r.Outputs) != 1 || r.Outputs[0].SHA256 != newSum {
			t.Fatalf("record after the rerun = %+v, want sha %s", r, newSum)
		}
	})
}

// The idempotency key is per (episode, step, revision): another step and
// another revision of the same step get other keys.
func TestGoStepIdempotencyKeyFollowsStepAndRevision(t *testing.T) {
	rec := &recordingStep{body: "x"}
	var flakyKey string
	f, _ := stepsFixture(t, map[string]step.Func{
		"frames": rec.run,
		"flaky": func(_ context.Context, in step.Input) (step.Output, error) {
			flakyKey = in.IdempotencyKey
			return step.Output{}, nil
		},
	})
	if _, err := f.runWorks(t, f.acts.RunLocalStep, "plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.runWorks(t, f.acts.RunLocalStep, "render"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.runWorks(t, f.acts.RunLocalStep, "flaky"); err != nil {
		t.Fatal(err)
	}
	first := rec.calls()[0].IdempotencyKey
	if flakyKey == "" || flakyKey == first {
		t.Fatalf("steps render and flaky got keys %q and %q: want two different keys", first, flakyKey)
	}
	// The step is reopened, as a rework does: revision 1.
	if err := f.led.RecordStep(f.ctx, ledger.StepRecord{Pipeline: "works", EpisodeID: tokyoEpisode, Step: "render", Status: allot.StepReset, Revision: 1}); err != nil {
		t.Fatal(err)
	}
	st, err := f.runWorks(t, f.acts.RunLocalStep, "render")
	if err != nil {
		t.Fatal(err)
	}
	calls := rec.calls()
	if len(calls) != 2 {
		t.Fatalf("a reopened step was not run again: %d calls", len(calls))
	}
	if calls[1].Revision != 1 || st.Revision != 1 {
		t.Fatalf("reopened run: input revision %d, state %+v; want revision 1", calls[1].Revision, st)
	}
	if calls[1].IdempotencyKey == first || calls[1].IdempotencyKey == "" {
		t.Fatalf("revision 1 got key %q, revision 0 had %q: want a new key", calls[1].IdempotencyKey, first)
	}
}

// An error marked with step.Park parks the episode (non-retryable
// StepFailure); a plain one is retried; neither records the step.
func TestGoStepErrors(t *testing.T) {
	flakyCalls := 0
	f, _ := stepsFixture(t, map[string]step.Func{
		"stuck": func(context.Context, step.Input) (step.Output, error) {
			return step.Output{}, step.Parkf("the source has no data for %s", "2026-08-07")
		},
		"flaky": func(_ context.Context, in step.Input) (step.Output, error) {
			flakyCalls++
			if flakyCalls == 1 {
				return step.Output{}, errors.New("connection reset by peer")
			}
			return step.Output{}, nil
		},
	})

	_, err := f.runWorks(t, f.acts.RunLocalStep, "stuck")
	wantAppError(t, err, allot.StepFailure)
	if _, ok := f.worksRecord(t, "stuck"); ok {
		t.Fatal("a parked step was recorded")
	}

	_, err = f.runWorks(t, f.acts.RunLocalStep, "flaky")
	wantRetryable(t, err)
	if _, ok := f.worksRecord(t, "flaky"); ok {
		t.Fatal("a failed step was recorded")
	}
	st, err := f.runWorks(t, f.acts.RunLocalStep, "flaky")
	if err != nil || st.Status != allot.StepCompleted {
		t.Fatalf("the retry = %+v, %v; want completed", st, err)
	}
	if r, ok := f.worksRecord(t, "flaky"); !ok || r.Status != allot.StepCompleted || len(r.Outputs) != 0 {
		t.Fatalf("record after the retry = %+v, %v; want completed without outputs", r, ok)
	}
}

// A go step whose function this worker has not registered is StepNotFound.
func TestGoStepUnregisteredFunc(t *testing.T) {
	f, _ := stepsFixture(t, map[string]step.Func{"frames": (&recordingStep{}).run})
	_, err := f.runWorks(t, f.acts.RunLocalStep, "ghost")
	wantAppError(t, err, allot.StepNotFound)
	if _, ok := f.worksRecord(t, "ghost"); ok {
		t.Fatal("an unregistered step was recorded")
	}
}

// envFile reads an `env` dump into name -> value.
func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the command did not dump its environment: %v", err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if name, value, ok := strings.Cut(line, "="); ok {
			env[name] = value
		}
	}
	return env
}

// An exec step's command gets the input as ALLOT_* variables and JSON on
// stdin, runs in the episode's directory with its logs there, has its
// declared outputs recorded, and does not run again once completed. Its
// environment is an allow-list (issue 15): PATH, HOME, LANG, TZ, its
// ALLOT_* variables and what its env names; the worker's credentials, and
// anything else the worker holds (a database password, cloud keys), never
// reach it.
func TestExecStepRunsWithInputAndWithoutSecrets(t *testing.T) {
	secrets := map[string]string{
		"ALLOT_VENDOR_API_KEY":             "sk-default-vendor-4b1d",
		"ALLOT_LEDGER":                     "postgres://allot:ledger-pw-31ab@db/allot",
		"VIDEOGEN_KEY":                     "sk-videogen-9f3e",
		"TEMPORAL_API_KEY":                 "tmprl-api-key-77aa",
		"TEMPORAL_TLS_CLIENT_KEY_DATA":     "-----BEGIN PRIVATE KEY-----c0ffee",
		"TEMPORAL_GRPC_META_AUTHORIZATION": "Bearer tmprl-meta-5eed",
		"TEMPORAL_CODEC_AUTH":              "codec-auth-d00d",
		"PGPASSWORD":                       "pg-pw-4411",
		"AWS_SECRET_ACCESS_KEY":            "aws-secret-9b9b",
		"UNLISTED":                         "unlisted-value-77",
	}
	for name, value := range secrets {
		t.Setenv(name, value)
	}
	allowed := map[string]string{"SETTLE_DB": "/data/settle.db", "HOME": "/home/worker", "LANG": "C.UTF-8", "TZ": "Europe/Berlin"}
	for name, value := range allowed {
		t.Setenv(name, value)
	}
	f, scratch := stepsFixture(t, nil)
	if !equalStrings(f.acts.SecretEnv, []string{"VIDEOGEN_KEY"}) {
		t.Fatalf("SecretEnv = %v, want [VIDEOGEN_KEY]", f.acts.SecretEnv)
	}
	if _, err := f.runWorks(t, f.acts.RunLocalStep, "plan"); err != nil {
		t.Fatal(err)
	}

	st, err := f.runWorks(t, f.acts.RunExecStep, "settle")
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	dir := f.worksDir()

	env := envFile(t, filepath.Join(scratch, "env.txt"))
	for name, value := range secrets {
		if _, ok := env[name]; ok {
			t.Errorf("the command saw %s", name)
		}
		for n, v := range env {
			if strings.Contains(v, value) {
				t.Errorf("the command saw the value of %s in %s", name, n)
			}
		}
	}
	for name, value := range allowed {
		if env[name] != value {
			t.Errorf("%s = %q, want %q (allowed, or named in the step's env)", name, env[name], value)
		}
	}
	if env["PATH"] != os.Getenv("PATH") {
		t.Errorf("PATH = %q, want the worker's", env["PATH"])
	}
	for name := range env {
		if _, ok := allowed[name]; !ok && name != "PATH" && name != "PWD" && name != "SHLVL" && name != "_" && !strings.HasPrefix(name, "ALLOT_") {
			t.Errorf("the command saw %s, which is not on the allow-list", name)
		}
	}

	// The input, on stdin and as variables.
	data, err := os.ReadFile(filepath.Join(dir, "input.json"))
	if err != nil {
		t.Fatalf("the command did not run in the episode's directory, or got no stdin: %v", err)
	}
	var in step.Input
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatalf("stdin is not a step.Input: %v\n%s", err, data)
	}
	if in.Pipeline != "works" || in.EpisodeID != tokyoEpisode || in.Period != tokyoPeriod || in.Step != "settle" ||
		in.AllocationKey != "run-1" || in.Dir != dir || in.IdempotencyKey == "" || in.Params["region"] != "eu" ||
		len(in.Artifacts) != 1 || in.Artifacts[0].Step != "plan" {
		t.Errorf("stdin input = %+v", in)
	}
	for name, want := range map[string]string{
		"ALLOT_PIPELINE": "works", "ALLOT_EPISODE": tokyoEpisode, "ALLOT_PERIOD": tokyoPeriod, "ALLOT_SEQUENCE": "0",
		"ALLOT_KEY": "run-1", "ALLOT_NOMINAL_TIME": "2026-08-06T20:00:00Z", "ALLOT_DIR": dir, "ALLOT_REVISION": "0",
		"ALLOT_STEP": "settle", "ALLOT_IDEMPOTENCY_KEY": in.IdempotencyKey, "ALLOT_PARAM_REGION": "eu", "ALLOT_PARAM_SCRATCH": scratch,
	} {
		if got, ok := env[name]; !ok || got != want {
			t.Errorf("%s = %q (set %v), want %q", name, got, ok, want)
		}
	}
	cwd, err := os.ReadFile(filepath.Join(dir, "cwd.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if realDir, _ := filepath.EvalSymlinks(dir); strings.TrimSpace(string(cwd)) != realDir {
		t.Errorf("the command ran in %s, want %s", strings.TrimSpace(string(cwd)), realDir)
	}

	// Logs beside the outputs.
	if out, err := os.ReadFile(filepath.Join(dir, "settle.r0.stdout")); err != nil || string(out) != "settled\n" {
		t.Errorf("settle.r0.stdout = %q, %v", out, err)
	}
	if errOut, err := os.ReadFile(filepath.Join(dir, "settle.r0.stderr")); err != nil || string(errOut) != "warming up\nall good\n" {
		t.Errorf("settle.r0.stderr = %q, %v", errOut, err)
	}

	// The declared output, hashed and recorded.
	csv := filepath.Join(dir, "settle.csv")
	sum := sha256Of(t, csv)
	if st.Status != allot.StepCompleted || st.Kind != "exec" || st.Artifact != csv || st.SHA256 != sum {
		t.Fatalf("settle state = %+v, want completed with %s %s", st, csv, sum)
	}
	r, ok := f.worksRecord(t, "settle")
	if !ok || r.Status != allot.StepCompleted || !reflect.DeepEqual(r.Outputs, []ledger.StepOutput{{Path: csv, SHA256: sum}}) {
		t.Fatalf("settle record = %+v, want completed with output %s %s", r, csv, sum)
	}

	runs := func() int {
		data, err := os.ReadFile(filepath.Join(scratch, "count"))
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(data, []byte("run\n"))
	}
	if n := runs(); n != 1 {
		t.Fatalf("the command ran %d times, want 1", n)
	}
	again, err := f.runWorks(t, f.acts.RunExecStep, "settle")
	if err != nil {
		t.Fatal(err)
	}
	if n := runs(); n != 1 || again != st {
		t.Fatalf("a completed exec step ran again (%d runs) or changed: %+v, was %+v", n, again, st)
	}
	if err := os.Remove(csv); err != nil {
		t.Fatal(err)
	}
	if _, err := f.runWorks(t, f.acts.RunExecStep, "settle"); err != nil {
		t.Fatal(err)
	}
	if n := runs(); n != 2 {
		t.Fatalf("an exec step whose output was deleted ran %d times in all, want 2", n)
	}
}

// Exit codes: the retry codes (75 by default, or the step's own) are
// retried; any other non-zero exit parks with the last stderr line; exit 0
// without the declared output parks; none of these records the step.
func TestExecStepExitCodes(t *testing.T) {
	f, _ := stepsFixture(t, nil)

	_, err := f.runWorks(t, f.acts.RunExecStep, "busy")
	wantRetryable(t, err)

	_, err = f.runWorks(t, f.acts.RunExecStep, "later")
	wantRetryable(t, err)

	// A step's own retry codes replace the default.
	_, err = f.runWorks(t, f.acts.RunExecStep, "not-later")
	wantAppError(t, err, allot.StepFailure)

	_, err = f.runWorks(t, f.acts.RunExecStep, "broken")
	appErr := wantAppError(t, err, allot.StepFailure)
	if !strings.Contains(appErr.Error(), "disk quota exceeded on /data") {
		t.Errorf("StepFailure %q does not carry the last line of stderr", appErr.Error())
	}

	_, err = f.runWorks(t, f.acts.RunExecStep, "silent")
	wantAppError(t, err, allot.StepFailure)

	for _, name := range []string{"busy", "later", "not-later", "broken", "silent"} {
		if r, ok := f.worksRecord(t, name); ok {
			t.Errorf("step %s was recorded: %+v", name, r)
		}
	}
	if errOut, err := os.ReadFile(filepath.Join(f.worksDir(), "broken.r0.stderr")); err != nil || !strings.Contains(string(errOut), "disk quota exceeded") {
		t.Errorf("broken.r0.stderr = %q, %v", errOut, err)
	}
}

// An activity step: PrepareStep gives the input; an output of a revision
// that was reopened meanwhile is refused; the current revision's is
// recorded; then PrepareStep says done.
func TestActivityStepPrepareAndRecord(t *testing.T) {
	f, _ := stepsFixture(t, nil)
	ref := RunLocalStepInput{Pipeline: "works", EpisodeID: tokyoEpisode, Step: "notify"}
	dir := f.worksDir()

	prep, err := execute[PrepareStepResult](t, f, f.acts.PrepareStep, ref)
	if err != nil {
		t.Fatal(err)
	}
	if prep.Done != nil || prep.Input.Step != "notify" || prep.Input.EpisodeID != tokyoEpisode || prep.Input.Revision != 0 ||
		prep.Input.Dir != dir || prep.Input.IdempotencyKey == "" || prep.Input.Params["channel"] != "ops" {
		t.Fatalf("PrepareStep = %+v, want the input of notify revision 0", prep)
	}
	key0 := prep.Input.IdempotencyKey

	// The step is reopened while revision 0 runs.
	if err := f.led.RecordStep(f.ctx, ledger.StepRecord{Pipeline: "works", EpisodeID: tokyoEpisode, Step: "notify", Status: allot.StepReset, Revision: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	notice := filepath.Join(dir, "notice.txt")
	if err := os.WriteFile(notice, []byte("sent to ops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := step.Output{Files: []string{"notice.txt"}, Result: json.RawMessage(`{"sent":true}`)}
	_, err = execute[StepState](t, f, f.acts.RecordStepOutput, RecordStepOutputInput{RunLocalStepInput: ref, Revision: 0, Output: out})
	wantAppError(t, err, allot.InvalidInput)
	if r, _ := f.worksRecord(t, "notify"); r.Status != allot.StepReset || r.Revision != 1 {
		t.Fatalf("a stale output changed the record: %+v", r)
	}

	prep, err = execute[PrepareStepResult](t, f, f.acts.PrepareStep, ref)
	if err != nil {
		t.Fatal(err)
	}
	if prep.Done != nil || prep.Input.Revision != 1 || prep.Input.IdempotencyKey == key0 {
		t.Fatalf("PrepareStep after the reopening = %+v, want revision 1 with a new key", prep)
	}

	// An output outside the episode's directory is refused.
	_, err = execute[StepState](t, f, f.acts.RecordStepOutput, RecordStepOutputInput{RunLocalStepInput: ref, Revision: 1, Output: step.Output{Files: []string{"../escape.txt"}}})
	wantAppError(t, err, allot.StepFailure)

	st, err := execute[StepState](t, f, f.acts.RecordStepOutput, RecordStepOutputInput{RunLocalStepInput: ref, Revision: 1, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256Of(t, notice)
	if st.Status != allot.StepCompleted || st.Revision != 1 || st.Kind != "activity" || st.Artifact != notice || st.SHA256 != sum {
		t.Fatalf("recorded state = %+v, want completed revision 1 with %s %s", st, notice, sum)
	}
	r, _ := f.worksRecord(t, "notify")
	if r.Status != allot.StepCompleted || r.Revision != 1 || !reflect.DeepEqual(r.Outputs, []ledger.StepOutput{{Path: notice, SHA256: sum}}) || string(r.Result) != `{"sent":true}` {
		t.Fatalf("notify record = %+v (result %s)", r, r.Result)
	}

	prep, err = execute[PrepareStepResult](t, f, f.acts.PrepareStep, ref)
	if err != nil {
		t.Fatal(err)
	}
	if prep.Done == nil || *prep.Done != st {
		t.Fatalf("PrepareStep after the record = %+v, want done %+v", prep, st)
	}
}

// A go step that is the first to write in its episode finds its directory
// there: Input.Dir is where it writes its files, as the custom-worker
// example's first step (tally) does with a plain os.WriteFile.
func TestGoStepFirstInEpisodeFindsItsDirectory(t *testing.T) {
	f, _ := stepsFixture(t, map[string]step.Func{
		"frames": func(_ context.Context, in step.Input) (step.Output, error) {
			if err := os.WriteFile(filepath.Join(in.Dir, "frames.txt"), []byte("first\n"), 0o644); err != nil {
				return step.Output{}, err
			}
			return step.Output{Files: []string{"frames.txt"}}, nil
		},
	})
	if _, err := os.Stat(f.worksDir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the episode's directory exists before any step ran (%v): this test proves nothing", err)
	}
	st, err := f.runWorks(t, f.acts.RunLocalStep, "render")
	if err != nil {
		t.Fatalf("the first go step of an episode could not write in Input.Dir: %v", err)
	}
	if want := filepath.Join(f.worksDir(), "frames.txt"); st.Status != allot.StepCompleted || st.Artifact != want {
		t.Fatalf("render = %+v, want completed with %s", st, want)
	}
}

// Issue 15: outputs are resolved through links. A declared output that is
// a link out of the episode's directory parks the step, naming where it
// points, and is not recorded (it used to be hashed and recorded); a link
// to a file inside the directory is a file like any other.
func TestExecOutputLinkedOutOfTheEpisodeIsRefused(t *testing.T) {
	f, scratch := stepsFixture(t, nil)
	_, err := f.runWorks(t, f.acts.RunExecStep, "linked-out")
	appErr := wantAppError(t, err, allot.StepFailure)
	outside, _ := filepath.EvalSymlinks(filepath.Join(scratch, "outside.csv"))
	if !strings.Contains(appErr.Error(), "linked.csv") || !strings.Contains(appErr.Error(), outside) {
		t.Errorf("StepFailure %q does not name the output and where it points (%s)", appErr.Error(), outside)
	}
	if r, ok := f.worksRecord(t, "linked-out"); ok {
		t.Fatalf("a link out of the episode was recorded: %+v", r)
	}

	st, err := f.runWorks(t, f.acts.RunExecStep, "linked-in")
	if err != nil {
		t.Fatalf("a link inside the episode: %v", err)
	}
	alias := filepath.Join(f.worksDir(), "alias.csv")
	if st.Status != allot.StepCompleted || st.Artifact != alias || st.SHA256 != sha256Of(t, filepath.Join(f.worksDir(), "data", "real.csv")) {
		t.Fatalf("linked-in = %+v, want completed with %s and the linked file's sha256", st, alias)
	}

	// The same holds for the files a go or activity step names.
	_, err = execute[StepState](t, f, f.acts.RecordStepOutput, RecordStepOutputInput{
		RunLocalStepInput: RunLocalStepInput{Pipeline: "works", EpisodeID: tokyoEpisode, Step: "notify"},
		Output:            step.Output{Files: []string{"linked.csv"}},
	})
	wantAppError(t, err, allot.StepFailure)
}

// Issue 15: a command that names an unknown placeholder used to fail the
// episode for good (InvalidInput) when it ran. The file refuses it now;
// a plan pinned before that still has it, and parks the step instead
// (StepFailure), so that the operator can abandon it.
func TestExecPlaceholderOfAPinnedPlanParks(t *testing.T) {
	f, _ := stepsFixture(t, nil)
	p, err := f.acts.Pipelines.Get("works")
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Replace(p.Plan(), `"command":["sh","-c","echo \"nothing to do\""]`, `"command":["echo","{perod}"]`, 1)
	if plan == p.Plan() {
		t.Fatal("the test's plan edit found nothing to replace")
	}
	rawSQL(t, f, `UPDATE episodes SET plan = ? WHERE pipeline = 'works'`, plan)
	_, err = f.runWorks(t, f.acts.RunExecStep, "silent")
	appErr := wantAppError(t, err, allot.StepFailure)
	if !strings.Contains(appErr.Error(), "{perod}") || !strings.Contains(appErr.Error(), "abandon") {
		t.Errorf("StepFailure %q does not name the placeholder and the way on", appErr.Error())
	}
}

// Issue 15: the placeholders the file is checked against are the ones a
// running step gets.
func TestPlaceholdersAreTheCheckedOnes(t *testing.T) {
	set, err := pipeline.Parse([]byte("[[pipeline]]\nname = \"p\"\n  [pipeline.inputs]\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"exec\"\n  command = [\"x\"]\n  params = { region = \"eu\", db = \"main\" }\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("p")
	st, _ := p.Step("s")
	got := slices.Sorted(maps.Keys(placeholders(step.Input{Params: st.Params, Claimed: &step.Claimed{Ref: "draft-1"}})))
	if want := slices.Sorted(slices.Values(p.Placeholders(st))); !slices.Equal(got, want) {
		t.Fatalf("a running step gets %q, the file is checked against %q", got, want)
	}
}

// Issue 15: a relative command path starts from the pipeline file's
// directory (it used to start from the episode's directory, where no
// program is).
func TestExecCommandRelativeToThePipelineFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "tally"), []byte("#!/bin/sh\necho \"$ALLOT_PERIOD\" > tally.txt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := pipelinetest.Write(t, dir, "[[pipeline]]\nname = \"works\"\nperiod = \"day\"\ntime_zone = \"Asia/Tokyo\"\n  [[pipeline.step]]\n  name = \"tally\"\n  kind = \"exec\"\n  command = [\"./bin/tally\"]\n  outputs = [\"tally.txt\"]\n")
	set, err := pipeline.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckExecCommands(set); err != nil {
		t.Fatalf("start check: %v", err)
	}
	f := newFixture(t, nil)
	f.acts.Pipelines = set
	f.mustAllocate(t, "works", "run-1", tokyoNominal)
	st, err := f.runWorks(t, f.acts.RunExecStep, "tally")
	if err != nil {
		t.Fatalf("tally: %v", err)
	}
	if out, err := os.ReadFile(filepath.Join(f.worksDir(), "tally.txt")); err != nil || string(out) != tokyoPeriod+"\n" || st.Status != allot.StepCompleted {
		t.Fatalf("tally = %+v, wrote %q, %v", st, out, err)
	}
}

// Issue 15: the worker refuses to start when it could not run an exec
// step's program, and says where it looked; the printed remedy for a
// program that is not executable runs as printed and fixes it.
func TestCheckExecCommands(t *testing.T) {
	dir := t.TempDir()
	load := func(command string) *pipeline.Set {
		t.Helper()
		file := pipelinetest.Write(t, dir, "[[pipeline]]\nname = \"p\"\n  [[pipeline.step]]\n  name = \"run\"\n  kind = \"exec\"\n  command = ["+command+"]\n")
		set, err := pipeline.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	emptyPath := t.TempDir()
	t.Setenv("PATH", emptyPath)
	err := CheckExecCommands(load(`"settle-day"`))
	if err == nil || !strings.Contains(err.Error(), `step "run"`) || !strings.Contains(err.Error(), "PATH") || !strings.Contains(err.Error(), emptyPath) {
		t.Errorf("a program not in PATH: %v, want the step and the PATH looked in named", err)
	}
	// Loading the file (what the starter does) checks no program; the
	// worker's start check (CheckSteps) does.
	missing := load(`"./bin/settle"`)
	err = CheckSteps(missing, nil)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "bin", "settle")) || !strings.Contains(err.Error(), dir) {
		t.Errorf("a missing relative program: %v, want the path looked for named", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckExecCommands(load(`"./bin"`)); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("a directory: %v", err)
	}
	settle := filepath.Join(dir, "bin", "settle")
	if err := os.WriteFile(settle, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = CheckExecCommands(load(`"./bin/settle"`))
	if err == nil || !strings.Contains(err.Error(), "chmod +x") {
		t.Fatalf("a program that is not executable: %v, want the chmod that fixes it", err)
	}
	_, remedy, _ := strings.Cut(err.Error(), "\n\t")
	t.Setenv("PATH", "/usr/bin:/bin")
	if out, err := exec.Command("/bin/sh", "-c", remedy).CombinedOutput(); err != nil {
		t.Fatalf("the printed remedy %q: %v\n%s", remedy, err, out)
	}
	for _, ok := range []string{`"./bin/settle"`, `"bin/settle", "{period}"`, `"` + settle + `"`, `"sh", "-c", "true"`, `"{dir}/run.sh"`} {
		if err := CheckExecCommands(load(ok)); err != nil {
			t.Errorf("command [%s]: %v", ok, err)
		}
	}
	if err := CheckExecCommands(load(`"/no/such/program"`)); err == nil || !strings.Contains(err.Error(), "/no/such/program") {
		t.Errorf("a missing absolute program: %v", err)
	}
}
