package activities

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	_ "modernc.org/sqlite" // the "sqlite" driver, for raw edits of the ledger file

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// testPipelines defines the pipelines the tests run against:
//   - tokyo: daily periods counted in Asia/Tokyo (UTC+9, no DST), so that a
//     nominal time's UTC date and its period differ for half the day;
//   - capped: ISO weeks in UTC with at most one episode per week.
const testPipelines = `
[[pipeline]]
name      = "tokyo"
period    = "day"
time_zone = "Asia/Tokyo"

  [[pipeline.step]]
  name = "plan"
  kind = "local"

  [[pipeline.step]]
  name = "video"
  kind = "paid"

  [[pipeline.step]]
  name = "assemble"
  kind = "local"

  [[pipeline.step]]
  name = "publish"
  kind = "local"

[[pipeline]]
name                    = "capped"
period                  = "iso-week"
max_episodes_per_period = 1

  [[pipeline.step]]
  name = "plan"
  kind = "local"
`

// tokyoNominal is 2026-08-06 20:00 UTC, i.e. 2026-08-07 05:00 in Tokyo.
var tokyoNominal = time.Date(2026, 8, 6, 20, 0, 0, 0, time.UTC)

const (
	tokyoPeriod  = "2026-08-07"
	tokyoEpisode = "2026-08-07-0"
)

type fixture struct {
	ctx    context.Context
	dbPath string
	led    *ledger.Ledger
	acts   *Activities
	env    *testsuite.TestActivityEnvironment
}

// newFixture opens a real SQLite ledger in a temporary directory and an
// activity test environment with the Activities registered. hook, if not
// nil, runs after every Allocate that committed, before it returns: a
// failure there is a crash or a lost response after the write landed.
func newFixture(t testing.TB, hook func(context.Context, AllocateResult) error) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "ledger.db")
	led, err := ledger.Open(ctx, "sqlite:"+dbPath)
	if err != nil {
		t.Fatalf("open ledger: %v", err)
	}
	t.Cleanup(func() {
		if err := led.Close(); err != nil {
			t.Errorf("close ledger: %v", err)
		}
	})
	set, err := pipeline.Parse([]byte(testPipelines), "activities_test")
	if err != nil {
		t.Fatalf("parse test pipelines: %v", err)
	}
	acts := &Activities{
		Ledger:       led,
		Pipelines:    set,
		ArtifactsDir: filepath.Join(dir, "artifacts"),
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	if hook != nil {
		env.RegisterActivityWithOptions(func(ctx context.Context, in AllocateInput) (AllocateResult, error) {
			res, err := acts.Allocate(ctx, in)
			if err == nil {
				err = hook(ctx, res)
			}
			return res, err
		}, activity.RegisterOptions{Name: "Allocate", DisableAlreadyRegisteredCheck: true})
	}
	return &fixture{ctx: ctx, dbPath: dbPath, led: led, acts: acts, env: env}
}

// execute runs one activity through the test environment and decodes its
// result into T.
func execute[T any](t *testing.T, f *fixture, fn any, in any) (T, error) {
	t.Helper()
	var out T
	val, err := f.env.ExecuteActivity(fn, in)
	if err != nil {
		return out, err
	}
	if err := val.Get(&out); err != nil {
		t.Fatalf("decode activity result: %v", err)
	}
	return out, nil
}

func (f *fixture) allocate(t *testing.T, pipelineName, key string, nominal time.Time) (AllocateResult, error) {
	t.Helper()
	return execute[AllocateResult](t, f, f.acts.Allocate, AllocateInput{Pipeline: pipelineName, Key: key, NominalTime: nominal})
}

func (f *fixture) mustAllocate(t *testing.T, pipelineName, key string, nominal time.Time) AllocateResult {
	t.Helper()
	res, err := f.allocate(t, pipelineName, key, nominal)
	if err != nil {
		t.Fatalf("allocate %s/%s: %v", pipelineName, key, err)
	}
	return res
}

func (f *fixture) runLocalStep(t *testing.T, episodeID, step string) (StepState, error) {
	t.Helper()
	return execute[StepState](t, f, f.acts.RunLocalStep, RunLocalStepInput{Pipeline: "tokyo", EpisodeID: episodeID, Step: step})
}

func (f *fixture) mustRunLocalStep(t *testing.T, episodeID, step string) StepState {
	t.Helper()
	st, err := f.runLocalStep(t, episodeID, step)
	if err != nil {
		t.Fatalf("run local step %s of %s: %v", step, episodeID, err)
	}
	return st
}

func (f *fixture) loadEpisode(t *testing.T, episodeID string) (LoadEpisodeResult, error) {
	t.Helper()
	return execute[LoadEpisodeResult](t, f, f.acts.LoadEpisode, EpisodeRef{Pipeline: "tokyo", EpisodeID: episodeID})
}

func (f *fixture) completeEpisode(t *testing.T, episodeID string, at time.Time) (time.Time, error) {
	t.Helper()
	return execute[time.Time](t, f, f.acts.CompleteEpisode, CompleteEpisodeInput{Pipeline: "tokyo", EpisodeID: episodeID, CompletedAt: at})
}

// episodeIDs lists a pipeline's episodes in the ledger, all periods.
func (f *fixture) episodeIDs(t *testing.T, pipelineName string) []string {
	t.Helper()
	eps, err := f.led.ListEpisodes(f.ctx, pipelineName, "")
	if err != nil {
		t.Fatalf("list episodes of %s: %v", pipelineName, err)
	}
	ids := make([]string, len(eps))
	for i, e := range eps {
		ids[i] = e.ID
	}
	return ids
}

// artifactFiles lists every file under the artifacts directory.
func (f *fixture) artifactFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(f.acts.ArtifactsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("walk artifacts: %v", err)
	}
	return files
}

// wantAppError asserts that err carries a non-retryable application error of
// the given type.
func wantAppError(t *testing.T, err error, errType string) *temporal.ApplicationError {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", errType)
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("got %T (%v), want an application error of type %s", err, err, errType)
	}
	if appErr.Type() != errType {
		t.Fatalf("got error type %q (%v), want %q", appErr.Type(), err, errType)
	}
	if !appErr.NonRetryable() {
		t.Fatalf("%s error is retryable, want non-retryable: %v", errType, err)
	}
	return appErr
}

func sha256Of(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAllocateNewKeyUsesPipelineZone(t *testing.T) {
	f := newFixture(t, nil)

	res := f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)
	want := AllocateResult{Decision: "allocated", Reason: "new_episode", EpisodeID: tokyoEpisode, Period: tokyoPeriod, Sequence: 0, LedgerID: f.led.ID()}
	if res != want {
		t.Fatalf("first allocation = %+v, want %+v (period in Asia/Tokyo, not UTC %s)", res, want, tokyoNominal.Format("2006-01-02"))
	}

	ep, err := f.led.Episode(f.ctx, "tokyo", tokyoEpisode)
	if err != nil {
		t.Fatalf("ledger has no episode %s after allocation: %v", tokyoEpisode, err)
	}
	if ep.AllocationKey != "run-a" || ep.Period != tokyoPeriod || ep.Sequence != 0 || !ep.NominalTime.Equal(tokyoNominal) {
		t.Fatalf("ledger episode = %+v, want key run-a, period %s, sequence 0, nominal time %s", ep, tokyoPeriod, tokyoNominal)
	}

	// Another key in the same period gets the next sequence.
	res2 := f.mustAllocate(t, "tokyo", "run-b", tokyoNominal.Add(time.Hour))
	if res2.Decision != "allocated" || res2.Sequence != 1 || res2.EpisodeID != tokyoPeriod+"-1" {
		t.Fatalf("second key = %+v, want allocated sequence 1 (%s-1)", res2, tokyoPeriod)
	}
}

func TestAllocateSameKeyIsReused(t *testing.T) {
	f := newFixture(t, nil)
	first := f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)

	again := f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)
	want := AllocateResult{Decision: "reused", Reason: "key_bound", EpisodeID: first.EpisodeID, Period: tokyoPeriod, Sequence: 0, LedgerID: f.led.ID()}
	if again != want {
		t.Fatalf("same key again = %+v, want %+v", again, want)
	}

	// 2026-08-06 15:00 UTC is midnight in Tokyo: still the same period
	// although the UTC time is five hours earlier.
	midnight := time.Date(2026, 8, 6, 15, 0, 0, 0, time.UTC)
	sameDay := f.mustAllocate(t, "tokyo", "run-a", midnight)
	if sameDay != want {
		t.Fatalf("same key, other nominal time in the same Tokyo day = %+v, want %+v", sameDay, want)
	}

	if ids := f.episodeIDs(t, "tokyo"); !equalStrings(ids, []string{tokyoEpisode}) {
		t.Fatalf("ledger episodes = %v, want only %s", ids, tokyoEpisode)
	}
}

func TestAllocateKeyCrossingPeriodFails(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)

	// One second before midnight in Tokyo: the previous day there.
	before := time.Date(2026, 8, 6, 14, 59, 59, 0, time.UTC)
	_, err := f.allocate(t, "tokyo", "run-a", before)
	appErr := wantAppError(t, err, allot.AllocationKeyCrossesPeriod)
	// The operator must be told which episode the key is bound to and which
	// periods clash.
	for _, name := range []string{tokyoEpisode, tokyoPeriod, "2026-08-06"} {
		if !strings.Contains(appErr.Error(), name) {
			t.Errorf("crossing error does not name %s: %v", name, appErr)
		}
	}

	if ids := f.episodeIDs(t, "tokyo"); !equalStrings(ids, []string{tokyoEpisode}) {
		t.Fatalf("ledger episodes after a refused crossing = %v, want only %s", ids, tokyoEpisode)
	}

	// Still bound where it was.
	res := f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)
	if res.Decision != "reused" || res.EpisodeID != tokyoEpisode {
		t.Fatalf("key after a refused crossing = %+v, want reused %s", res, tokyoEpisode)
	}
}

func TestAllocateRejectsBadPipeline(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name, pipeline, errType string
	}{
		{"unknown", "no-such-pipeline", allot.PipelineNotFound},
		{"uppercase and underscore", "Tokyo_Daily", allot.InvalidPipelineName},
		{"empty", "", allot.InvalidPipelineName},
		{"path", "../tokyo", allot.InvalidPipelineName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.allocate(t, tc.pipeline, "run-a", tokyoNominal)
			wantAppError(t, err, tc.errType)
		})
	}
	if ids := f.episodeIDs(t, "tokyo"); len(ids) != 0 {
		t.Fatalf("ledger episodes after refused allocations = %v, want none", ids)
	}
}

func TestAllocateRejectsBadKeyAndWritesNothing(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name, key string
	}{
		{"empty", ""},
		{"201 bytes", strings.Repeat("k", 201)},
		{"newline", "run-a\n"},
		{"nul", "run\x00a"},
		{"del", "run-a\x7f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.allocate(t, "tokyo", tc.key, tokyoNominal)
			wantAppError(t, err, allot.InvalidAllocationKey)
		})
	}
	if ids := f.episodeIDs(t, "tokyo"); len(ids) != 0 {
		t.Fatalf("ledger episodes after refused keys = %v, want none", ids)
	}
}

func TestAllocateZeroNominalTime(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.allocate(t, "tokyo", "run-a", time.Time{})
	wantAppError(t, err, allot.InvalidInput)
	if ids := f.episodeIDs(t, "tokyo"); len(ids) != 0 {
		t.Fatalf("ledger episodes after a zero nominal time = %v, want none", ids)
	}
}

func TestAllocateCapReached(t *testing.T) {
	f := newFixture(t, nil)
	week := time.Date(2026, 8, 7, 10, 0, 0, 0, time.UTC) // 2026-W32

	first := f.mustAllocate(t, "capped", "run-a", week)
	if first.Decision != "allocated" || first.EpisodeID != "2026-W32-0" {
		t.Fatalf("first allocation = %+v, want allocated 2026-W32-0", first)
	}

	skipped := f.mustAllocate(t, "capped", "run-b", week.Add(time.Hour))
	want := AllocateResult{Decision: "skipped", Reason: "cap_reached", Period: "2026-W32", Sequence: -1, LedgerID: f.led.ID()}
	if skipped != want {
		t.Fatalf("allocation over the cap = %+v, want %+v", skipped, want)
	}

	// The cap never stops a key from getting back its own episode.
	again := f.mustAllocate(t, "capped", "run-a", week)
	if again.Decision != "reused" || again.EpisodeID != "2026-W32-0" {
		t.Fatalf("bound key at the cap = %+v, want reused 2026-W32-0", again)
	}

	// The next week has room again and starts at 0.
	next := f.mustAllocate(t, "capped", "run-c", week.AddDate(0, 0, 7))
	if next.Decision != "allocated" || next.EpisodeID != "2026-W33-0" || next.Sequence != 0 {
		t.Fatalf("next week = %+v, want allocated 2026-W33-0", next)
	}

	if ids := f.episodeIDs(t, "capped"); !equalStrings(ids, []string{"2026-W32-0", "2026-W33-0"}) {
		t.Fatalf("ledger episodes = %v, want [2026-W32-0 2026-W33-0]", ids)
	}
}

func TestAllocateHookFailureAfterCommitThenReuse(t *testing.T) {
	const crash = "SimulatedLostResponse"
	var (
		mu    sync.Mutex
		calls []AllocateResult
	)
	hook := func(_ context.Context, res AllocateResult) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, res)
		if len(calls) == 1 {
			return temporal.NewApplicationError("worker died after the commit", crash)
		}
		return nil
	}
	f := newFixture(t, hook)

	_, err := f.allocate(t, "tokyo", "run-a", tokyoNominal)
	if err == nil {
		t.Fatal("allocation whose hook failed returned no error")
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != crash {
		t.Fatalf("allocation error = %v, want the hook's %s error", err, crash)
	}
	// The write landed before the failure.
	if ids := f.episodeIDs(t, "tokyo"); !equalStrings(ids, []string{tokyoEpisode}) {
		t.Fatalf("ledger episodes after the failed attempt = %v, want [%s]", ids, tokyoEpisode)
	}

	retry := f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)
	want := AllocateResult{Decision: "reused", Reason: "key_bound", EpisodeID: tokyoEpisode, Period: tokyoPeriod, Sequence: 0, LedgerID: f.led.ID()}
	if retry != want {
		t.Fatalf("retry = %+v, want %+v", retry, want)
	}
	if ids := f.episodeIDs(t, "tokyo"); !equalStrings(ids, []string{tokyoEpisode}) {
		t.Fatalf("ledger episodes after the retry = %v, want [%s]", ids, tokyoEpisode)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[0].Decision != "allocated" || calls[1].Decision != "reused" {
		t.Fatalf("hook saw %+v, want an allocated then a reused result", calls)
	}
}

func TestAllocateAmbiguousKey(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)

	// Simulate imported legacy data: without the unique index, a second
	// episode in the same period is bound to the same key.
	db, err := sql.Open("sqlite", "file:"+f.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatalf("open the ledger file: %v", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(f.ctx, `DROP INDEX episodes_pipeline_key_uniq`); err != nil {
		t.Fatalf("drop the key index: %v", err)
	}
	if _, err := db.ExecContext(f.ctx, `INSERT INTO episodes
		(pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status)
		VALUES ('tokyo', ?, ?, 1, 'run-a', '2026-08-06T21:00:00.000000Z', '2026-08-06T21:00:00.000000Z', 'allocated')`,
		tokyoPeriod+"-1", tokyoPeriod); err != nil {
		t.Fatalf("insert the duplicate episode: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close the ledger file: %v", err)
	}
	wantIDs := []string{tokyoEpisode, tokyoPeriod + "-1"}

	for _, tc := range []struct {
		name    string
		nominal time.Time
	}{
		{"same period", tokyoNominal},
		{"other period", tokyoNominal.AddDate(0, 0, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.allocate(t, "tokyo", "run-a", tc.nominal)
			wantAppError(t, err, allot.AllocationKeyAmbiguous)
			if ids := f.episodeIDs(t, "tokyo"); !equalStrings(ids, wantIDs) {
				t.Fatalf("ledger episodes after an ambiguous key = %v, want %v", ids, wantIDs)
			}
		})
	}
}

func TestValidateAllocationKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
		ok   bool
	}{
		{"empty", "", false},
		{"schedule key", "weekly-video-2026-08-07T00:00:00Z", true},
		{"200 bytes", strings.Repeat("k", 200), true},
		{"201 bytes", strings.Repeat("k", 201), false},
		{"200 bytes multibyte", strings.Repeat("語", 66) + "ab", true},
		{"201 bytes in 67 runes", strings.Repeat("語", 67), false},
		{"newline", "run\na", false},
		{"tab", "run\ta", false},
		{"del", "run\x7f", false},
		{"c1 control", "run\u0085a", false},
		{"invalid utf-8", "run-\xff\xfe", false},
		{"zero-width space", "run\u200ba", false},
		{"right-to-left override", "run\u202ea", false},
		{"line separator", "run\u2028a", false},
		{"byte order mark", "\ufeffrun", false},
		{"space and unicode", "manual run 週刊", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := allot.ValidateAllocationKey(tc.key)
			if tc.ok && err != nil {
				t.Fatalf("ValidateAllocationKey(%q) = %v, want nil", tc.key, err)
			}
			if !tc.ok && err == nil {
				t.Fatalf("ValidateAllocationKey(%q) = nil, want an error", tc.key)
			}

			// Through the activity too. Invalid UTF-8 cannot get there: the
			// JSON payload converter replaces the bad bytes with U+FFFD.
			if !utf8.ValidString(tc.key) {
				return
			}
			f := newFixture(t, nil)
			res, err := f.allocate(t, "tokyo", tc.key, tokyoNominal)
			if tc.ok {
				if err != nil || res.Decision != "allocated" {
					t.Fatalf("Allocate(%q) = %+v, %v; want allocated", tc.key, res, err)
				}
				return
			}
			wantAppError(t, err, allot.InvalidAllocationKey)
			if ids := f.episodeIDs(t, "tokyo"); len(ids) != 0 {
				t.Fatalf("ledger episodes after key %q = %v, want none", tc.key, ids)
			}
		})
	}
}

func TestMissingEpisodeFailsEveryEpisodeActivity(t *testing.T) {
	f := newFixture(t, nil)
	// An episode exists, just not the one asked for.
	f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)

	for _, id := range []string{tokyoPeriod + "-7", "2026-08-06-0", ""} {
		t.Run("id="+id, func(t *testing.T) {
			_, err := f.loadEpisode(t, id)
			wantAppError(t, err, allot.EpisodeNotFound)

			for _, step := range []string{"plan", "assemble", "publish"} {
				_, err = f.runLocalStep(t, id, step)
				wantAppError(t, err, allot.EpisodeNotFound)
			}

			_, err = f.completeEpisode(t, id, tokyoNominal.Add(time.Hour))
			wantAppError(t, err, allot.EpisodeNotFound)
		})
	}

	if files := f.artifactFiles(t); len(files) != 0 {
		t.Fatalf("files written for missing episodes: %v", files)
	}
	if ids := f.episodeIDs(t, "tokyo"); !equalStrings(ids, []string{tokyoEpisode}) {
		t.Fatalf("ledger episodes = %v, want only %s", ids, tokyoEpisode)
	}
	ep, err := f.led.Episode(f.ctx, "tokyo", tokyoEpisode)
	if err != nil {
		t.Fatal(err)
	}
	if ep.Status != ledger.EpisodeAllocated || !ep.CompletedAt.IsZero() {
		t.Fatalf("existing episode changed by calls on missing ones: %+v", ep)
	}
	if recs, err := f.led.Steps(f.ctx, "tokyo", tokyoEpisode); err != nil || len(recs) != 0 {
		t.Fatalf("step records of the existing episode = %+v, %v; want none", recs, err)
	}
}

func TestRunLocalStepPlan(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)
	wantPath := filepath.Join(f.acts.ArtifactsDir, "tokyo", tokyoEpisode, "plan.json")

	st := f.mustRunLocalStep(t, tokyoEpisode, "plan")
	if st.Name != "plan" || st.Kind != "local" || st.Action != "plan" || st.Status != allot.StepCompleted || st.Artifact != wantPath {
		t.Fatalf("plan step = %+v, want completed local plan at %s", st, wantPath)
	}
	if got := sha256Of(t, wantPath); got != st.SHA256 {
		t.Fatalf("plan.json sha256 = %s, step says %s", got, st.SHA256)
	}
	recs, err := f.led.Steps(f.ctx, "tokyo", tokyoEpisode)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Step != "plan" || recs[0].Status != allot.StepCompleted || recs[0].Artifact != wantPath || recs[0].SHA256 != st.SHA256 {
		t.Fatalf("ledger step records = %+v, want one completed plan with sha %s", recs, st.SHA256)
	}
	recorded := recs[0]

	var plan struct {
		Pipeline      string   `json:"pipeline"`
		Episode       string   `json:"episode"`
		Period        string   `json:"period"`
		Sequence      int      `json:"sequence"`
		AllocationKey string   `json:"allocation_key"`
		NominalTime   string   `json:"nominal_time"`
		Steps         []string `json:"steps"`
	}
	data, err := os.ReadFile(wantPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &plan); err != nil {
		t.Fatalf("plan.json is not JSON: %v\n%s", err, data)
	}
	if plan.Pipeline != "tokyo" || plan.Episode != tokyoEpisode || plan.Period != tokyoPeriod || plan.Sequence != 0 ||
		plan.AllocationKey != "run-a" || plan.NominalTime != "2026-08-06T20:00:00Z" ||
		!equalStrings(plan.Steps, []string{"plan", "video", "assemble", "publish"}) {
		t.Fatalf("plan.json = %+v", plan)
	}

	t.Run("again leaves the file alone", func(t *testing.T) {
		old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		if err := os.Chtimes(wantPath, old, old); err != nil {
			t.Fatal(err)
		}
		before, err := os.Stat(wantPath)
		if err != nil {
			t.Fatal(err)
		}
		again := f.mustRunLocalStep(t, tokyoEpisode, "plan")
		if again != st {
			t.Fatalf("second run = %+v, want %+v", again, st)
		}
		after, err := os.Stat(wantPath)
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(before, after) || !after.ModTime().Equal(old) {
			t.Fatalf("plan.json was rewritten by a second run (same file %v, mtime %v, want %v)",
				os.SameFile(before, after), after.ModTime(), old)
		}
		recs, err := f.led.Steps(f.ctx, "tokyo", tokyoEpisode)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || !recs[0].CompletedAt.Equal(recorded.CompletedAt) {
			t.Fatalf("step record rewritten by a second run: %+v, was %+v", recs, recorded)
		}
	})

	t.Run("deleted file is written again", func(t *testing.T) {
		if err := os.Remove(wantPath); err != nil {
			t.Fatal(err)
		}
		again := f.mustRunLocalStep(t, tokyoEpisode, "plan")
		if again.SHA256 != st.SHA256 || again.Artifact != wantPath {
			t.Fatalf("run after deletion = %+v, want sha %s at %s", again, st.SHA256, wantPath)
		}
		if got := sha256Of(t, wantPath); got != st.SHA256 {
			t.Fatalf("rewritten plan.json sha256 = %s, want %s", got, st.SHA256)
		}
	})

	t.Run("damaged file is written again", func(t *testing.T) {
		if err := os.WriteFile(wantPath, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		again := f.mustRunLocalStep(t, tokyoEpisode, "plan")
		if again.SHA256 != st.SHA256 {
			t.Fatalf("run after damage = %+v, want sha %s", again, st.SHA256)
		}
		if got := sha256Of(t, wantPath); got != st.SHA256 {
			t.Fatalf("repaired plan.json sha256 = %s, want %s", got, st.SHA256)
		}
	})
}

func TestRunLocalStepRejectsUnknownAndPaidSteps(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)

	_, err := f.runLocalStep(t, tokyoEpisode, "no-such-step")
	wantAppError(t, err, allot.StepNotFound)

	_, err = f.runLocalStep(t, tokyoEpisode, "video")
	wantAppError(t, err, allot.InvalidInput)

	if files := f.artifactFiles(t); len(files) != 0 {
		t.Fatalf("files written for refused steps: %v", files)
	}
	if recs, err := f.led.Steps(f.ctx, "tokyo", tokyoEpisode); err != nil || len(recs) != 0 {
		t.Fatalf("step records after refused steps = %+v, %v; want none", recs, err)
	}
}

func TestRunLocalStepAssembleListsPlan(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)
	plan := f.mustRunLocalStep(t, tokyoEpisode, "plan")

	st := f.mustRunLocalStep(t, tokyoEpisode, "assemble")
	wantPath := filepath.Join(f.acts.ArtifactsDir, "tokyo", tokyoEpisode, "manifest.json")
	if st.Status != allot.StepCompleted || st.Artifact != wantPath {
		t.Fatalf("assemble step = %+v, want completed at %s", st, wantPath)
	}
	if got := sha256Of(t, wantPath); got != st.SHA256 {
		t.Fatalf("manifest.json sha256 = %s, step says %s", got, st.SHA256)
	}

	var manifest struct {
		Pipeline  string `json:"pipeline"`
		Episode   string `json:"episode"`
		Artifacts []struct {
			Step   string `json:"step"`
			File   string `json:"file"`
			SHA256 string `json:"sha256"`
		} `json:"artifacts"`
	}
	data, err := os.ReadFile(wantPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &manifest); err != nil {
		t.Fatalf("manifest.json is not JSON: %v\n%s", err, data)
	}
	if manifest.Pipeline != "tokyo" || manifest.Episode != tokyoEpisode || len(manifest.Artifacts) != 1 {
		t.Fatalf("manifest.json = %s, want tokyo/%s listing plan.json only", data, tokyoEpisode)
	}
	if a := manifest.Artifacts[0]; a.Step != "plan" || a.File != "plan.json" || a.SHA256 != plan.SHA256 {
		t.Fatalf("manifest entry = %+v, want plan plan.json %s", a, plan.SHA256)
	}

	// Written again from the ledger's state, the manifest is the same bytes:
	// in particular it does not come to list itself.
	if err := os.Remove(wantPath); err != nil {
		t.Fatal(err)
	}
	again := f.mustRunLocalStep(t, tokyoEpisode, "assemble")
	if again.SHA256 != st.SHA256 {
		data, _ := os.ReadFile(wantPath)
		t.Fatalf("rewritten manifest sha256 = %s, want %s:\n%s", again.SHA256, st.SHA256, data)
	}
	if got := sha256Of(t, wantPath); got != st.SHA256 {
		t.Fatalf("rewritten manifest.json sha256 = %s, want %s", got, st.SHA256)
	}
}

func TestLoadEpisodeStepsInPipelineOrder(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)

	// Run assemble before plan, so that the ledger's completion order is the
	// reverse of the pipeline's order.
	assemble := f.mustRunLocalStep(t, tokyoEpisode, "assemble")
	time.Sleep(2 * time.Millisecond)
	plan := f.mustRunLocalStep(t, tokyoEpisode, "plan")

	got, err := f.loadEpisode(t, tokyoEpisode)
	if err != nil {
		t.Fatalf("load episode: %v", err)
	}
	if got.Pipeline != "tokyo" || got.EpisodeID != tokyoEpisode || got.Period != tokyoPeriod || got.Sequence != 0 ||
		got.Key != "run-a" || !got.NominalTime.Equal(tokyoNominal) || got.Status != string(ledger.EpisodeAllocated) ||
		!got.CompletedAt.IsZero() {
		t.Fatalf("loaded episode = %+v", got)
	}

	want := []StepState{
		{Name: "plan", Kind: "local", Action: "plan", Status: allot.StepCompleted, Artifact: plan.Artifact, SHA256: plan.SHA256},
		{Name: "video", Kind: "paid", Action: "video", Status: allot.StepPending},
		{Name: "assemble", Kind: "local", Action: "assemble", Status: allot.StepCompleted, Artifact: assemble.Artifact, SHA256: assemble.SHA256},
		{Name: "publish", Kind: "local", Action: "publish", Status: allot.StepPending},
	}
	if len(got.Steps) != len(want) {
		t.Fatalf("loaded steps = %+v, want %+v", got.Steps, want)
	}
	for i := range want {
		if got.Steps[i] != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, got.Steps[i], want[i])
		}
	}
}

func TestCompleteEpisodeKeepsFirstTime(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)
	first := time.Date(2026, 8, 7, 1, 2, 3, 0, time.UTC)
	second := first.Add(90 * time.Minute)

	got, err := f.completeEpisode(t, tokyoEpisode, first)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	if !got.Equal(first) {
		t.Fatalf("first completion returned %v, want %v", got, first)
	}
	got, err = f.completeEpisode(t, tokyoEpisode, second)
	if err != nil {
		t.Fatalf("complete again: %v", err)
	}
	if !got.Equal(first) {
		t.Fatalf("second completion returned %v, want the first time %v", got, first)
	}

	loaded, err := f.loadEpisode(t, tokyoEpisode)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Status != string(ledger.EpisodeCompleted) || !loaded.CompletedAt.Equal(first) {
		t.Fatalf("loaded episode status %q completed at %v, want completed at %v", loaded.Status, loaded.CompletedAt, first)
	}
}

func TestRecordRunOutcomeOverwrites(t *testing.T) {
	f := newFixture(t, nil)
	res := f.mustAllocate(t, "tokyo", "run-a", tokyoNominal)
	in := RecordRunOutcomeInput{
		Pipeline: "tokyo", Key: "run-a", RunID: "run-1", NominalTime: tokyoNominal, NominalTimeSource: "input",
		Outcome: "failed", Reason: "worker_lost", Sequence: -1, RecordedAt: tokyoNominal.Add(time.Minute),
	}
	if _, err := f.env.ExecuteActivity(f.acts.RecordRunOutcome, in); err != nil {
		t.Fatalf("record outcome: %v", err)
	}
	in.Outcome, in.Reason, in.EpisodeID, in.Period, in.Sequence = res.Decision, res.Reason, res.EpisodeID, res.Period, res.Sequence
	in.RecordedAt = tokyoNominal.Add(2 * time.Minute)
	if _, err := f.env.ExecuteActivity(f.acts.RecordRunOutcome, in); err != nil {
		t.Fatalf("record outcome again: %v", err)
	}
	outs, err := f.led.RunOutcomes(f.ctx, "tokyo", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || outs[0].Outcome != "allocated" || outs[0].Reason != "new_episode" || outs[0].EpisodeID != tokyoEpisode {
		t.Fatalf("run outcomes = %+v, want one allocated new_episode %s", outs, tokyoEpisode)
	}

	in.RunID = ""
	_, err = f.env.ExecuteActivity(f.acts.RecordRunOutcome, in)
	wantAppError(t, err, allot.InvalidInput)
}
