package activities

// Steps that are not paid: local (allot's built-in steps), go (functions a
// custom worker registers), exec (commands) and activity (activities of
// workers in any language). Each gets a step.Input, gives a step.Output,
// and has its outputs recorded in the ledger with their sha256; a step
// completed at its revision with intact outputs never runs again.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"allot"
	"allot/artifacts"
	"allot/internal/execstep"
	"allot/internal/ledger"
	"allot/pipeline"
	"allot/step"
)

// RunLocalStepInput names a step of an existing episode that runs on this
// worker (local, go or exec).
type RunLocalStepInput struct {
	Pipeline  string `json:"pipeline"`
	EpisodeID string `json:"episode_id"`
	Step      string `json:"step"`
	// LedgerID is the ledger the workflow belongs to; "" for workflows
	// started before ledgers had one. A worker on another ledger refuses.
	LedgerID string `json:"ledger_id,omitempty"`
}

// BuiltinSteps are allot's own local steps: plan, assemble, publish. Each
// writes one JSON file whose bytes depend only on the step's input, so
// running it again writes the same file.
func BuiltinSteps() map[string]step.Func {
	return map[string]step.Func{
		pipeline.ActionPlan:     writePlan,
		pipeline.ActionAssemble: writeManifest("manifest.json"),
		pipeline.ActionPublish:  writeManifest("published.json"),
	}
}

// stepFunc finds the function a local or go step runs: the worker's
// registered steps first, then the built-in ones.
func (a *Activities) stepFunc(name string) (step.Func, bool) {
	if f, ok := a.Steps[name]; ok {
		return f, true
	}
	f, ok := BuiltinSteps()[name]
	return f, ok
}

// RunLocalStep runs a local or go step: the function the step names, with
// the step's input, heartbeating while it runs. Its files and result are
// recorded. An error the function returns is retried; one marked with
// step.Park parks the episode (StepFailure).
func (a *Activities) RunLocalStep(ctx context.Context, in RunLocalStepInput) (StepState, error) {
	sc, done, err := a.prepareStep(ctx, in, allot.KindLocal, allot.KindGo)
	if err != nil || done != nil {
		return deref(done), err
	}
	fn, ok := a.stepFunc(sc.step.Action)
	if !ok {
		return StepState{}, nonRetryable(allot.StepNotFound, "step %q runs function %q, which this worker has not registered: register it with app.WorkerConfig.Steps (registered: %v)",
			sc.step.Name, sc.step.Action, a.registeredSteps())
	}
	// Input.Dir is where the step writes its files: it exists when the
	// step runs, even if no step of the episode has written there yet.
	if err := artifacts.MkdirAll(sc.input.Dir); err != nil {
		return StepState{}, fmt.Errorf("create the episode directory: %w", err)
	}
	out, err := withHeartbeat(ctx, func(ctx context.Context) (step.Output, error) { return fn(ctx, sc.input) })
	if err != nil {
		if step.IsPark(err) {
			return StepState{}, nonRetryable(allot.StepFailure, "step %s: %v", sc.step.Name, err)
		}
		return StepState{}, fmt.Errorf("step %s: %w", sc.step.Name, err)
	}
	return a.recordOutputs(ctx, sc, out)
}

// RunExecStep runs an exec step's command in the episode's directory, with
// the step input as ALLOT_* environment variables and as JSON on stdin, its
// stdout and stderr in <step>.r<revision>.stdout and .stderr there. Exit 0
// completes the step and records its declared outputs; a retry exit code
// (75 by default) is retried; any other exit, and a timeout, park the
// episode with the last lines of stderr (StepFailure). Every process the
// command started is ended with it (package execstep).
func (a *Activities) RunExecStep(ctx context.Context, in RunLocalStepInput) (StepState, error) {
	sc, done, err := a.prepareStep(ctx, in, allot.KindExec)
	if err != nil || done != nil {
		return deref(done), err
	}
	args, err := execstep.Expand(sc.step.Command, placeholders(sc.input))
	if err != nil {
		// Only a plan pinned before placeholders were checked at load
		// gets here: the episode runs that command, so it parks.
		return StepState{}, nonRetryable(allot.StepFailure, "step %s: %v; the episode runs the command it was allocated with, so abandon the step to go on", sc.step.Name, err)
	}
	args[0] = sc.p.CommandPath(args[0])
	stdin, err := json.Marshal(sc.input)
	if err != nil {
		return StepState{}, fmt.Errorf("encode the input of step %s: %w", sc.step.Name, err)
	}
	if err := artifacts.MkdirAll(sc.input.Dir); err != nil {
		return StepState{}, fmt.Errorf("create the episode directory: %w", err)
	}
	logs := filepath.Join(sc.input.Dir, fmt.Sprintf("%s.r%d", sc.step.Name, sc.input.Revision))
	spec := execstep.Spec{
		Command: args, Dir: sc.input.Dir, Env: a.execEnv(sc.input, a.execEnvNames(sc.p.Name, sc.step.Name)), Stdin: stdin,
		Stdout: logs + ".stdout", Stderr: logs + ".stderr",
		Timeout: sc.step.TimeoutDuration(), RetryExitCodes: sc.step.RetryExitCodeList(),
	}
	beat := func() {}
	if activity.IsActivity(ctx) {
		beat = func() { activity.RecordHeartbeat(ctx) }
	}
	err = execstep.Run(ctx, spec, heartbeatEvery, beat)
	switch {
	case errors.Is(err, execstep.ErrRetry):
		return StepState{}, fmt.Errorf("step %s: %w", sc.step.Name, err)
	case errors.Is(err, execstep.ErrFailed):
		return StepState{}, nonRetryable(allot.StepFailure, "step %s: %v", sc.step.Name, err)
	case err != nil:
		return StepState{}, err
	}
	for _, o := range sc.step.Outputs {
		if _, err := os.Lstat(filepath.Join(sc.input.Dir, o)); err != nil {
			return StepState{}, nonRetryable(allot.StepFailure, "step %s exited 0 but did not write its declared output %s: %v", sc.step.Name, o, err)
		}
	}
	return a.recordOutputs(ctx, sc, step.Output{Files: sc.step.Outputs})
}

// PrepareStepResult is an activity step's input, or its recorded state if
// it has completed already.
type PrepareStepResult struct {
	Done  *StepState `json:"done,omitempty"`
	Input step.Input `json:"input"`
}

// PrepareStep gives the input of an activity step, which the Episode then
// sends to the step's activity on its task queue; a step completed at its
// revision with intact outputs comes back as Done instead.
func (a *Activities) PrepareStep(ctx context.Context, in RunLocalStepInput) (PrepareStepResult, error) {
	sc, done, err := a.prepareStep(ctx, in, allot.KindActivity)
	if err != nil {
		return PrepareStepResult{}, err
	}
	if done != nil {
		return PrepareStepResult{Done: done}, nil
	}
	// The step's worker writes into Dir (on storage this worker shares
	// with it): it exists before the step runs, as for go and exec steps.
	if err := artifacts.MkdirAll(sc.input.Dir); err != nil {
		return PrepareStepResult{}, fmt.Errorf("create the episode directory: %w", err)
	}
	return PrepareStepResult{Input: sc.input}, nil
}

// RecordStepOutputInput is what an activity step's activity returned.
type RecordStepOutputInput struct {
	RunLocalStepInput
	Revision int         `json:"revision"`
	Output   step.Output `json:"output"`
}

// RecordStepOutput records an activity step's output: its files (which
// must be in the episode's directory, on storage this worker sees) and its
// result.
func (a *Activities) RecordStepOutput(ctx context.Context, in RecordStepOutputInput) (StepState, error) {
	sc, done, err := a.prepareStep(ctx, in.RunLocalStepInput, allot.KindActivity)
	if err != nil || done != nil {
		return deref(done), err
	}
	if sc.input.Revision != in.Revision {
		return StepState{}, nonRetryable(allot.InvalidInput, "step %s was reopened (revision %d) while revision %d ran: its output is not recorded; the step runs again", sc.step.Name, sc.input.Revision, in.Revision)
	}
	return a.recordOutputs(ctx, sc, in.Output)
}

// stepContext is one run of a step: where it stands and what it is given.
type stepContext struct {
	p     *pipeline.Pipeline
	ep    ledger.Episode
	step  pipeline.Step
	input step.Input
}

// prepareStep resolves a step of an existing episode, of one of kinds, and
// builds its input. If the ledger has it completed at its current revision
// with every output file intact, that record is returned as done.
func (a *Activities) prepareStep(ctx context.Context, in RunLocalStepInput, kinds ...allot.StepKind) (*stepContext, *StepState, error) {
	p, ep, err := a.episode(ctx, EpisodeRef{Pipeline: in.Pipeline, EpisodeID: in.EpisodeID, LedgerID: in.LedgerID})
	if err != nil {
		return nil, nil, err
	}
	st, ok := p.Step(in.Step)
	if !ok {
		return nil, nil, nonRetryable(allot.StepNotFound, "pipeline %q has no step %q: its steps are %v", p.Name, in.Step, p.StepNames())
	}
	kindOK := false
	for _, k := range kinds {
		kindOK = kindOK || st.Kind == k
	}
	if !kindOK {
		return nil, nil, nonRetryable(allot.InvalidInput, "step %q of pipeline %q is %s, not %v", st.Name, p.Name, st.Kind, kinds)
	}
	records, err := a.Ledger.Steps(ctx, p.Name, ep.ID)
	if err != nil {
		return nil, nil, classify(err)
	}
	sc := &stepContext{p: p, ep: ep, step: st}
	var rec *ledger.StepRecord
	for i := range records {
		if records[i].Step == st.Name {
			rec = &records[i]
		}
	}
	if rec != nil && rec.Status == allot.StepCompleted && outputsIntact(*rec) {
		done := recordState(st, *rec)
		return sc, &done, nil
	}
	// A completed step whose files are gone or differ runs again.
	revision := 0
	if rec != nil {
		revision = rec.Revision
	}
	if sc.input, err = a.stepInput(ctx, p, ep, st, revision, records); err != nil {
		return nil, nil, err
	}
	return sc, nil, nil
}

// stepInput builds what a step is given: the episode, the step's params,
// its idempotency key, its directory, and the outputs of the steps before
// it (the succeeded latest revision of each paid step).
func (a *Activities) stepInput(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, st pipeline.Step, revision int, records []ledger.StepRecord) (step.Input, error) {
	in := step.Input{
		Pipeline: p.Name, EpisodeID: ep.ID, Period: ep.Period, Sequence: ep.Sequence,
		AllocationKey: ep.AllocationKey, NominalTime: ep.NominalTime, Step: st.Name, Steps: p.StepNames(), Revision: revision,
		Params: st.Params, IdempotencyKey: allot.IdempotencyKey(p.Name, ep.ID, st.Name, revision),
		Dir: artifacts.EpisodeDir(a.ArtifactsDir, p.Name, ep.ID), Artifacts: []step.Artifact{},
	}
	claimed, err := a.Ledger.EpisodeInput(ctx, p.Name, ep.ID)
	if err != nil {
		return step.Input{}, classify(err)
	}
	if claimed != nil {
		in.Claimed = &step.Claimed{Ref: claimed.Ref, ReadyAt: claimed.ReadyAt, Payload: claimed.Payload}
	}
	byStep := map[string]ledger.StepRecord{}
	for _, r := range records {
		byStep[r.Step] = r
	}
	paid, err := a.latestPaidResults(ctx, p, ep.ID)
	if err != nil {
		return step.Input{}, err
	}
	for _, s := range p.Steps {
		if s.Name == st.Name {
			break
		}
		if t, ok := paid[s.Name]; ok && t.Artifact != "" {
			in.Artifacts = append(in.Artifacts, step.Artifact{Step: s.Name, Path: t.Artifact, SHA256: t.SHA256, Revision: t.Revision, RemoteRef: t.RemoteRef})
			continue
		}
		if r, ok := byStep[s.Name]; ok && r.Status == allot.StepCompleted {
			for _, o := range recordOutputs(r) {
				in.Artifacts = append(in.Artifacts, step.Artifact{Step: s.Name, Path: o.Path, SHA256: o.SHA256, Revision: r.Revision})
			}
		}
	}
	return in, nil
}

// latestPaidResults is the succeeded latest revision of each paid step, by
// step: what an assembly is made of.
func (a *Activities) latestPaidResults(ctx context.Context, p *pipeline.Pipeline, episodeID string) (map[string]ledger.PaidTask, error) {
	tasks, err := a.Ledger.PaidTasks(ctx, p.Name, episodeID)
	if err != nil {
		return nil, classify(err)
	}
	latest := map[string]ledger.PaidTask{}
	for _, t := range tasks {
		if cur, ok := latest[t.Step]; !ok || t.Revision > cur.Revision {
			latest[t.Step] = t
		}
	}
	for name, t := range latest {
		if t.State != allot.PaidSucceeded {
			delete(latest, name)
		}
	}
	return latest, nil
}

// recordOutputs checks a step's output (files inside the episode's
// directory, a small JSON result), hashes the files and records the step as
// completed at its revision.
func (a *Activities) recordOutputs(ctx context.Context, sc *stepContext, out step.Output) (StepState, error) {
	if len(out.Result) > step.MaxResultBytes {
		return StepState{}, nonRetryable(allot.StepFailure, "step %s gave a result of %d bytes, over the limit of %d: write it to a file and name it in Output.Files", sc.step.Name, len(out.Result), step.MaxResultBytes)
	}
	if len(out.Result) > 0 && !json.Valid(out.Result) {
		return StepState{}, nonRetryable(allot.StepFailure, "step %s gave a result that is not JSON", sc.step.Name)
	}
	rec := ledger.StepRecord{
		Pipeline: sc.p.Name, EpisodeID: sc.ep.ID, Step: sc.step.Name, Status: allot.StepCompleted,
		Revision: sc.input.Revision, Result: out.Result, CompletedAt: time.Now().UTC(),
	}
	dir, err := filepath.Abs(sc.input.Dir)
	if err != nil {
		return StepState{}, err
	}
	realDir := ""
	for _, f := range out.Files {
		path := f
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, f)
		}
		path = filepath.Clean(path)
		if !inside(dir, path) {
			return StepState{}, nonRetryable(allot.StepFailure, "step %s names output %s, which is not inside the episode's directory %s", sc.step.Name, f, dir)
		}
		// Through links too: a link out of the directory would record
		// (and later hand on) a file the episode does not own.
		if realDir == "" {
			if realDir, err = filepath.EvalSymlinks(dir); err != nil {
				return StepState{}, fmt.Errorf("resolve the episode directory %s: %w", dir, err)
			}
		}
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return StepState{}, nonRetryable(allot.StepFailure, "step %s names output %s, which cannot be read: %v", sc.step.Name, f, err)
		}
		if !inside(realDir, real) {
			return StepState{}, nonRetryable(allot.StepFailure, "step %s names output %s, which is a link to %s, outside the episode's directory %s: write the file itself into the directory", sc.step.Name, f, real, dir)
		}
		sum, err := artifacts.SHA256File(path)
		if err != nil {
			return StepState{}, nonRetryable(allot.StepFailure, "step %s names output %s, which cannot be read: %v", sc.step.Name, f, err)
		}
		rec.Outputs = append(rec.Outputs, ledger.StepOutput{Path: path, SHA256: sum})
	}
	if len(rec.Outputs) > 0 {
		rec.Artifact, rec.SHA256 = rec.Outputs[0].Path, rec.Outputs[0].SHA256
	}
	if err := a.Ledger.RecordStep(ctx, rec); err != nil {
		return StepState{}, classify(err)
	}
	activity.GetLogger(ctx).Info("step done", "pipeline", sc.p.Name, "episode", sc.ep.ID, "step", sc.step.Name, "revision", rec.Revision, "outputs", len(rec.Outputs))
	return recordState(sc.step, rec), nil
}

// inside reports whether path is below dir (both clean and absolute).
func inside(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel) && rel != "."
}

// recordState shows a step record as the step's state.
func recordState(s pipeline.Step, r ledger.StepRecord) StepState {
	st := StepState{Name: s.Name, Kind: string(s.Kind), Action: s.Action, Status: r.Status, Revision: r.Revision, Artifact: r.Artifact, SHA256: r.SHA256}
	if r.Status == allot.StepReset {
		st.Status, st.Artifact, st.SHA256 = allot.StepPending, "", ""
	}
	return st
}

// recordOutputs lists a record's files: its outputs, or (for records
// written before outputs were kept) its one artifact.
func recordOutputs(r ledger.StepRecord) []ledger.StepOutput {
	if len(r.Outputs) > 0 {
		return r.Outputs
	}
	if r.Artifact != "" {
		return []ledger.StepOutput{{Path: r.Artifact, SHA256: r.SHA256}}
	}
	return nil
}

// outputsIntact reports whether every output file of a record is there with
// the recorded sha256.
func outputsIntact(r ledger.StepRecord) bool {
	for _, o := range recordOutputs(r) {
		if sum, err := artifacts.SHA256File(o.Path); err != nil || sum != o.SHA256 {
			return false
		}
	}
	return true
}

func deref(s *StepState) StepState {
	if s == nil {
		return StepState{}
	}
	return *s
}

func (a *Activities) registeredSteps() []string {
	names := make([]string, 0, len(a.Steps)+3)
	for n := range a.Steps {
		names = append(names, n)
	}
	for n := range BuiltinSteps() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// placeholders are the values an exec step's command may name.
func placeholders(in step.Input) map[string]string {
	vars := map[string]string{
		"pipeline": in.Pipeline, "episode": in.EpisodeID, "period": in.Period, "sequence": strconv.Itoa(in.Sequence),
		"key": in.AllocationKey, "nominal_time": in.NominalTime.UTC().Format(time.RFC3339), "dir": in.Dir,
		"revision": strconv.Itoa(in.Revision), "step": in.Step, "idempotency_key": in.IdempotencyKey,
	}
	for k, v := range in.Params {
		vars["param."+k] = v
	}
	if in.Claimed != nil {
		vars["input"] = in.Claimed.Ref
	}
	return vars
}

// execEnv is an exec step's environment, from an allow-list: the worker's
// PATH, HOME, LANG and TZ, the variables the step's env names, and the
// step's input as ALLOT_* variables. Nothing else of the worker's
// environment reaches the command: not its settings, not the vendors' keys,
// not Temporal's credentials, not a database password it happens to hold.
// A name that is one of those is dropped even if listed (the pipeline file
// refuses them; this guards a file checked by an older worker).
func (a *Activities) execEnv(in step.Input, names []string) []string {
	var env []string
	for _, name := range append(slices.Clone(pipeline.AlwaysPassedEnv), names...) {
		if slices.Contains(a.SecretEnv, name) || strings.HasPrefix(name, "ALLOT_") || temporalSecret(name) {
			continue
		}
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	vars := placeholders(in)
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		name := "ALLOT_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(k))
		env = append(env, name+"="+vars[k])
	}
	return env
}

// execEnvNames is the env list of an exec step as the pipeline file has it
// now: it describes this worker's machine, so it is not pinned with the
// plan, and a fix to it applies when the step is retried.
func (a *Activities) execEnvNames(pipelineName, stepName string) []string {
	p, err := a.Pipelines.Get(pipelineName)
	if err != nil {
		return nil
	}
	st, _ := p.Step(stepName)
	return st.Env
}

// temporalSecret reports whether an environment variable is the worker's
// Temporal connection: every TEMPORAL_ variable, since envconfig reads
// credentials from more than the API key and TLS material (gRPC metadata
// such as an Authorization header, codec auth, a config file or profile).
func temporalSecret(name string) bool {
	return strings.HasPrefix(name, "TEMPORAL_")
}

// writePlan is the built-in plan step: plan.json describes the episode.
func writePlan(_ context.Context, in step.Input) (step.Output, error) {
	return writeJSON(in, "plan.json", map[string]any{
		"pipeline": in.Pipeline, "episode": in.EpisodeID, "period": in.Period, "sequence": in.Sequence,
		"allocation_key": in.AllocationKey, "nominal_time": in.NominalTime.UTC().Format(time.RFC3339),
		"steps": in.Steps,
	})
}

// writeManifest is the built-in assemble and publish step: a manifest of
// the artifacts of the steps before it, with their hashes.
func writeManifest(name string) step.Func {
	return func(_ context.Context, in step.Input) (step.Output, error) {
		type entry struct {
			Step      string `json:"step"`
			File      string `json:"file"`
			SHA256    string `json:"sha256"`
			Revision  int    `json:"revision,omitempty"`
			RemoteRef string `json:"remote_ref,omitempty"`
		}
		entries := []entry{}
		for _, a := range in.Artifacts {
			entries = append(entries, entry{Step: a.Step, File: filepath.Base(a.Path), SHA256: a.SHA256, Revision: a.Revision, RemoteRef: a.RemoteRef})
		}
		sort.SliceStable(entries, func(i, j int) bool { return entries[i].Step < entries[j].Step })
		return writeJSON(in, name, map[string]any{"pipeline": in.Pipeline, "episode": in.EpisodeID, "artifacts": entries})
	}
}

func writeJSON(in step.Input, name string, doc any) (step.Output, error) {
	body, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return step.Output{}, fmt.Errorf("encode %s: %w", name, err)
	}
	if _, err := artifacts.WriteFile(filepath.Join(in.Dir, name), append(body, '\n')); err != nil {
		return step.Output{}, err
	}
	return step.Output{Files: []string{name}}, nil
}

// CheckSteps refuses a worker whose steps do not match its pipelines:
// a go step whose function is not registered (it would only fail when an
// episode reaches it), a registered function that shadows a built-in step
// or is nil, and an exec step whose program is not there
// (CheckExecCommands).
func CheckSteps(set *pipeline.Set, steps map[string]step.Func) error {
	builtin := BuiltinSteps()
	for name, f := range steps {
		if _, ok := builtin[name]; ok {
			return fmt.Errorf("step function %q is one of allot's built-in steps (%s): register yours under another name", name, strings.Join(slices.Sorted(maps.Keys(builtin)), ", "))
		}
		if f == nil {
			return fmt.Errorf("step function %q is nil: register a step.Func", name)
		}
	}
	for _, name := range set.Names() {
		p, err := set.Get(name)
		if err != nil {
			return err
		}
		for _, st := range p.Steps {
			if st.Kind != allot.KindGo {
				continue
			}
			if _, ok := steps[st.Action]; !ok {
				if _, ok := builtin[st.Action]; !ok {
					return fmt.Errorf("pipeline %q: step %q runs Go function %q, which this worker does not register: add it to app.WorkerConfig.Steps[%q] (registered: %s)",
						p.Name, st.Name, st.Action, st.Action, strings.Join(slices.Sorted(maps.Keys(steps)), ", "))
				}
			}
		}
	}
	return CheckExecCommands(set)
}

// CheckExecCommands refuses a worker that could not run an exec step's
// program, before any episode reaches the step: a bare name must be in the
// worker's PATH; a path (absolute, or relative to the pipeline file's
// directory) must be an executable file. A program named by a placeholder
// is only known per episode. Each error says where it looked.
func CheckExecCommands(set *pipeline.Set) error {
	for _, name := range set.Names() {
		p, err := set.Get(name)
		if err != nil {
			return err
		}
		for _, st := range p.Steps {
			if st.Kind != allot.KindExec || len(st.Command) == 0 {
				continue
			}
			if err := checkExecCommand(p, st); err != nil {
				return fmt.Errorf("pipeline %q: step %q: %w", p.Name, st.Name, err)
			}
		}
	}
	return nil
}

func checkExecCommand(p *pipeline.Pipeline, st pipeline.Step) error {
	program := st.Command[0]
	if used, err := execstep.Placeholders([]string{program}); err != nil || len(used) > 0 {
		return nil
	}
	path := p.CommandPath(program)
	from := "the worker's working directory"
	if p.Dir() != "" {
		from = "the pipeline file's directory " + p.Dir()
	}
	if path == program && !filepath.IsAbs(program) {
		if _, err := exec.LookPath(program); err != nil {
			return fmt.Errorf("command %q is not in the worker's PATH (looked in %s): install it there, or give its path in command, absolute or relative to %s", program, os.Getenv("PATH"), from)
		}
		return nil
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		if path == program {
			return fmt.Errorf("command %q: %v", program, err)
		}
		return fmt.Errorf("command %q is not there: looked for %s (a relative command path starts from %s)", program, path, from)
	case fi.IsDir():
		return fmt.Errorf("command %q is %s, a directory: name the program in it", program, path)
	case fi.Mode()&0o111 == 0:
		return fmt.Errorf("command %q is %s, which is not executable: make it so with\n\tchmod +x %s", program, path, allot.ShellQuote(path))
	}
	return nil
}
