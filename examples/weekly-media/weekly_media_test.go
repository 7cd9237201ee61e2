package weeklymedia_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"allot"
	"allot/activities"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/devstack"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/paidvendor/vendorapi"
	"allot/pipeline"
	"allot/workflows"
)

// The two vendors' keys: each simulator accepts only its own, so a worker
// that sent one vendor's key to the other would be refused (and the
// episode would park instead of completing).
const (
	videogenKey = "sk-videogen-test-0f3a71-DO-NOT-LEAK"
	coverartKey = "sk-coverart-test-9c1e25-DO-NOT-LEAK"
)

// The README's run: Monday 2026-08-03 06:00 UTC, in ISO week 2026-W32.
const (
	pipelineName = "weekly-media"
	nominalTime  = "2026-08-03T06:00:00Z"
	episodeID    = "2026-W32-0"
)

// The prices the simulators charge: different vendors, amounts and
// currencies, so a cost booked to the wrong vendor or step shows.
var (
	videoPrice = paidvendor.Cost{Amount: 1250, Currency: "USD"}
	coverPrice = paidvendor.Cost{Amount: 180, Currency: "EUR"}
)

// The example end to end, with the pipeline file as shipped (only the
// vendors' URLs replaced by the test's), allot's own worker and starter as
// real processes, and two simulated vendors configured differently: each
// vendor is charged exactly once, for its own step only; the ledger's costs
// are each vendor's charges (starter costs, starter check --vendor); both
// files are kept with the sha256 the vendor promised, and the assembled
// manifest lists them; the episode waits for the operator's approval and
// publishes after it; and starting the same run again, before or after the
// approval, changes nothing.
func TestWeeklyMediaTwoVendorsApprovedAndPublishedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and starts the embedded server")
	}
	videogen := newVendor(t, "videogen", paidvendortest.SimConfig{
		APIKey: videogenKey, PricePerKind: map[string]paidvendor.Cost{"render-video": videoPrice},
		TaskDuration: 1500 * time.Millisecond, Latency: 20 * time.Millisecond, Seed: 1,
	})
	coverart := newVendor(t, "coverart", paidvendortest.SimConfig{
		APIKey: coverartKey, PricePerKind: map[string]paidvendor.Cost{"cover-image": coverPrice},
		TaskDuration: 200 * time.Millisecond, Latency: 120 * time.Millisecond, Seed: 2,
	})

	readmeCommands(t)
	tmp := t.TempDir()
	pipelinesFile := filepath.Join(tmp, "pipelines.toml")
	shipped, err := os.ReadFile("pipelines.toml")
	if err != nil {
		t.Fatal(err)
	}
	toml := string(shipped)
	for from, to := range map[string]string{`"http://127.0.0.1:8801"`: `"` + videogen.url + `"`, `"http://127.0.0.1:8802"`: `"` + coverart.url + `"`} {
		if strings.Count(toml, from) != 1 {
			t.Fatalf("pipelines.toml should name %s once (the README runs a vendor there)", from)
		}
		toml = strings.Replace(toml, from, to, 1)
	}
	if err := os.WriteFile(pipelinesFile, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := pipeline.Load(pipelinesFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get(pipelineName)
	if err != nil {
		t.Fatal(err)
	}

	dev := allottest.StartDevWith(t, devstack.Config{DataDir: filepath.Join(tmp, "server"), NoWorker: true, Headless: true})
	workerBin := allottest.BuildBinary(t, "allot/worker")
	s := &starter{t: t, bin: allottest.BuildBinary(t, "allot/starter"), dir: tmp}
	dataDir := filepath.Join(tmp, "data")
	s.env = cleanenv.Environ(
		"TEMPORAL_ADDRESS="+dev.Info.Frontend, "TEMPORAL_NAMESPACE="+dev.Info.Namespace,
		"ALLOT_LEDGER=sqlite:"+filepath.Join(dataDir, "allot.db"), "ALLOT_DATA_DIR="+dataDir,
		"ALLOT_PIPELINES="+pipelinesFile, "ALLOT_VENDOR_URL=",
		"VIDEOGEN_API_KEY="+videogenKey, "COVERART_API_KEY="+coverartKey)

	cmd := exec.Command(workerBin)
	cmd.Env, cmd.Dir = s.env, tmp
	worker := allottest.StartProcess(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker output:\n%s", worker.Output.String())
		}
	})
	worker.WaitOutput(t, regexp.MustCompile(`allot worker starting`), time.Minute)

	// 1. The run pays both vendors and waits at the approval gate.
	run := s.run("started")
	if run.Result.Outcome != allot.OutcomeAllocated || run.Episode.Stage != allot.StageWaitingApproval {
		t.Fatalf("first run: %+v, episode %+v", run.Result, run.Episode)
	}
	// Started again while it waits: the same episode, nothing paid again.
	s.run("existing")
	videogen.wantOneCharge(t, "video", "render-video")
	coverart.wantOneCharge(t, "cover", "cover-image")

	// 2. The operator approves with the real starter; it publishes.
	var approved operator.CommandResult
	s.json(&approved, approveCommand...)
	if i := slices.IndexFunc(approved.State.Steps, func(s activities.StepState) bool { return s.Name == "approve" }); i < 0 || approved.State.Steps[i].Status != allot.StepApproved {
		t.Fatalf("approve answered %+v", approved.State)
	}
	if run := s.run("existing"); run.Episode.Stage != allot.StageCompleted {
		t.Fatalf("after the approval the episode is %s, want completed", run.Episode.Stage)
	}

	// 3. Each vendor charged once, for its own step only.
	videoCharge := videogen.wantOneCharge(t, "video", "render-video")
	coverCharge := coverart.wantOneCharge(t, "cover", "cover-image")

	// 4. The ledger's costs are the vendors' charges.
	var costs report.CostsResult
	s.json(&costs, costsCommand...)
	byStep := map[string]report.CostLine{}
	for _, l := range costs.Lines {
		byStep[l.Step] = l
	}
	for step, want := range map[string]paidvendor.Charge{"video": videoCharge, "cover": coverCharge} {
		l := byStep[step]
		if l.EpisodeID != episodeID || l.Revisions != 1 || l.Amount != want.Amount || l.Currency != want.Currency {
			t.Fatalf("starter costs for %s: %+v, want the vendor's charge %d %s", step, l, want.Amount, want.Currency)
		}
	}
	if len(costs.Lines) != 2 || len(costs.Totals) != 2 || costs.Totals["USD"] != videoPrice.Amount || costs.Totals["EUR"] != coverPrice.Amount {
		t.Fatalf("starter costs: %+v", costs)
	}
	var check report.CheckResult
	s.json(&check, checkCommand...)
	reconciled := map[string]report.VendorCheck{}
	for _, v := range check.Vendors {
		reconciled[v.Name] = v
	}
	if !check.OK || !reflect.DeepEqual(reconciled["videogen"], report.VendorCheck{Name: "videogen", Status: report.VendorReconciled, Charges: 1, Costs: 1}) ||
		!reflect.DeepEqual(reconciled["coverart"], report.VendorCheck{Name: "coverart", Status: report.VendorReconciled, Charges: 1, Costs: 1}) {
		t.Fatalf("starter check --vendor: %+v", check)
	}

	// 5. The files are the vendors' results, kept with their sha256.
	var show report.ShowResult
	s.json(&show, showCommand...)
	if len(show.PaidTasks) != 2 {
		t.Fatalf("paid tasks %+v, want video and cover", show.PaidTasks)
	}
	results := map[string]string{} // step -> sha256
	for _, task := range show.PaidTasks {
		st, _ := p.Step(task.Step)
		charge := map[string]paidvendor.Charge{"video": videoCharge, "cover": coverCharge}[task.Step]
		params := map[string]string{"pipeline": pipelineName, "episode": episodeID, "step": task.Step, "revision": "0"}
		for k, v := range st.Params {
			params[k] = v
		}
		want := paidvendortest.ResultSHA256(task.RemoteRef, st.Action, params)
		if task.State != allot.PaidSucceeded || task.Revision != 0 || task.RemoteRef != charge.TaskID || task.IdempotencyKey != charge.IdempotencyKey || task.SHA256 != want {
			t.Fatalf("paid task %+v, want succeeded as the vendor's task %s with sha256 %s", task, charge.TaskID, want)
		}
		if got := fileSHA256(t, task.Artifact); got != want {
			t.Fatalf("%s: the file %s has sha256 %s, the ledger %s", task.Step, task.Artifact, got, want)
		}
		if dir := filepath.Join(dataDir, "artifacts", pipelineName, episodeID); filepath.Dir(task.Artifact) != dir {
			t.Fatalf("%s's file %s is not in the episode's directory %s", task.Step, task.Artifact, dir)
		}
		results[task.Step] = want
	}
	steps := map[string]string{} // step -> recorded sha256 of its file
	for _, r := range show.Steps {
		if want := map[bool]allot.StepStatus{true: allot.StepApproved, false: allot.StepCompleted}[r.Step == "approve"]; r.Status != want {
			t.Fatalf("step %s is %s, want %s", r.Step, r.Status, want)
		}
		if r.Artifact != "" {
			if got := fileSHA256(t, r.Artifact); got != r.SHA256 {
				t.Fatalf("step %s: %s has sha256 %s, the ledger %s", r.Step, r.Artifact, got, r.SHA256)
			}
			steps[r.Step] = r.SHA256
		}
	}
	if steps["assemble"] == "" || steps["publish"] == "" {
		t.Fatalf("assemble and publish should have recorded their files: %+v", show.Steps)
	}
	var manifest struct {
		Artifacts []struct {
			Step, SHA256 string
		}
	}
	data, err := os.ReadFile(filepath.Join(dataDir, "artifacts", pipelineName, episodeID, "published.json"))
	if err != nil || json.Unmarshal(data, &manifest) != nil {
		t.Fatalf("published.json: %v\n%s", err, data)
	}
	listed := map[string]string{}
	for _, a := range manifest.Artifacts {
		listed[a.Step] = a.SHA256
	}
	if listed["video"] != results["video"] || listed["cover"] != results["cover"] {
		t.Fatalf("published.json lists %v, want the vendors' files %v", listed, results)
	}
	if len(show.Decisions) != 1 || show.Decisions[0].Action != allot.ActionApprove || show.Decisions[0].Reason != "on brand" {
		t.Fatalf("decisions %+v, want the one approval", show.Decisions)
	}

	// 6. Started again once it is done: nothing changes.
	before := snapshot(s, videogen, coverart)
	if run := s.run("existing"); run.Result.EpisodeID != episodeID || run.Episode.Stage != allot.StageCompleted {
		t.Fatalf("run again: %+v", run)
	}
	if after := snapshot(s, videogen, coverart); after != before {
		t.Fatalf("starting the run again changed something:\nbefore %s\nafter  %s", before, after)
	}
	var eps report.EpisodesResult
	s.json(&eps, "episodes", "--pipeline", pipelineName)
	if len(eps.Episodes) != 1 {
		t.Fatalf("episodes %+v, want one", eps.Episodes)
	}

	// The keys were read by the worker from the environment and went
	// nowhere else.
	for _, key := range []string{videogenKey, coverartKey} {
		if strings.Contains(worker.Output.String(), key) {
			t.Fatal("the worker logged a vendor's API key")
		}
	}
}

// The README's starter commands, in its order. The test runs each of them
// (with --json, to read what it printed); readmeCommands keeps the README
// and this list the same.
var (
	runCommand     = []string{"run", "--pipeline", pipelineName, "--nominal-time", nominalTime, "--follow"}
	approveCommand = []string{"episode", "approve", "--pipeline", pipelineName, "--episode", episodeID, "--reason", "on brand"}
	costsCommand   = []string{"costs", "--pipeline", pipelineName}
	checkCommand   = []string{"check", "--vendor"}
	showCommand    = []string{"episode", "show", "--pipeline", pipelineName, "--episode", episodeID}
)

// readmeCommands fails unless the README's shell block runs the two
// vendors where pipelines.toml has them and its starter lines are the
// ones this test runs.
func readmeCommands(t *testing.T) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(readme), "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var got [][]string
	for _, line := range strings.Split(block, "\n") {
		if rest, ok := strings.CutPrefix(line, "go run ./starter "); ok {
			got = append(got, allottest.SplitCommand(t, rest))
		}
	}
	want := [][]string{runCommand, approveCommand, runCommand, costsCommand, checkCommand, showCommand}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("the README's starter commands are %q, the test runs %q", got, want)
	}
	for _, addr := range []string{"--addr 127.0.0.1:8801", "--addr 127.0.0.1:8802"} {
		if !strings.Contains(block, addr) {
			t.Fatalf("the README runs no vendor with %s, where pipelines.toml has one", addr)
		}
	}
}

// vendor is one simulated vendor on its own HTTP server, recording the
// submissions it receives.
type vendor struct {
	name string
	sim  *paidvendortest.Simulator
	url  string

	mu          sync.Mutex
	submissions []submission
}

type submission struct {
	key, kind string
	params    map[string]string
}

func newVendor(t *testing.T, name string, cfg paidvendortest.SimConfig) *vendor {
	t.Helper()
	v := &vendor{name: name, sim: paidvendortest.NewSimulator(cfg)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == vendorapi.TasksPath {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req vendorapi.SubmitRequest
			_ = json.Unmarshal(body, &req)
			v.mu.Lock()
			v.submissions = append(v.submissions, submission{key: r.Header.Get(vendorapi.IdempotencyKeyHeader), kind: req.Kind, params: req.Params})
			v.mu.Unlock()
		}
		v.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	v.url = srv.URL
	return v
}

// wantOneCharge fails unless the vendor charged exactly once, for step's
// revision 0 of the episode, and was only ever sent tasks of that step (of
// the vendor's kind, with the step's idempotency key). It returns the
// charge.
func (v *vendor) wantOneCharge(t *testing.T, step, kind string) paidvendor.Charge {
	t.Helper()
	key := allot.IdempotencyKey(pipelineName, episodeID, step, 0)
	charges := v.sim.Charges()
	if len(charges) != 1 || charges[0].IdempotencyKey != key {
		t.Fatalf("vendor %s charged %+v, want one charge for %s/%s step %s revision 0 (key %s)", v.name, charges, pipelineName, episodeID, step, key)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, sub := range v.submissions {
		if sub.key != key || sub.kind != kind || sub.params["step"] != step {
			t.Fatalf("vendor %s was sent %+v, want only step %s's tasks (%s, key %s)", v.name, sub, step, kind, key)
		}
	}
	return charges[0]
}

// snapshot is everything a second start could change: the vendors'
// charges, the ledger's costs, the episode as starter shows it (its steps,
// paid tasks, decisions) and the files in its directory.
func snapshot(s *starter, vendors ...*vendor) string {
	var b strings.Builder
	for _, v := range vendors {
		b.WriteString(v.name + " " + strconv.Itoa(len(v.sim.Charges())) + " charges\n")
	}
	b.Write(s.out(append(costsCommand, "--json")...))
	var show report.ShowResult
	s.json(&show, showCommand...)
	show.Workflow = nil // the workflow's run, not the episode
	data, _ := json.Marshal(show)
	b.Write(data)
	dir := filepath.Dir(show.PaidTasks[0].Artifact)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b.WriteString("\n" + e.Name() + " " + fileSHA256(s.t, filepath.Join(dir, e.Name())))
	}
	return b.String()
}

// starter runs the real starter binary as an operator at a shell would.
type starter struct {
	t        *testing.T
	bin, dir string
	env      []string
}

func (s *starter) out(args ...string) []byte {
	s.t.Helper()
	return allottest.Starter{Bin: s.bin, Dir: s.dir, Env: s.env}.Out(s.t, args...)
}

func (s *starter) json(v any, args ...string) {
	s.t.Helper()
	allottest.Starter{Bin: s.bin, Dir: s.dir, Env: s.env}.JSON(s.t, v, args...)
}

type followedRun struct {
	operator.RunResult
	Episode workflows.EpisodeState `json:"episode"`
}

// run starts the README's run with --follow and checks what starter did
// (started, existing) and that it is the week's one episode.
func (s *starter) run(action string) followedRun {
	s.t.Helper()
	var r followedRun
	s.json(&r, runCommand...)
	if r.Action != action || r.Result == nil || r.Result.EpisodeID != episodeID || r.Result.Period != "2026-W32" ||
		r.WorkflowID != allot.AllocationKey(pipelineName, mustTime(nominalTime)) {
		s.t.Fatalf("starter run: %+v, want %s episode %s", r, action, episodeID)
	}
	if !slices.Contains([]allot.Stage{allot.StageWaitingApproval, allot.StageCompleted}, r.Episode.Stage) {
		s.t.Fatalf("the episode is %s: %+v", r.Episode.Stage, r.Episode)
	}
	return r
}

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
