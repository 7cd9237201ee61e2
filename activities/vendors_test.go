package activities

// Tests of the worker's named vendors and Go steps: NamedVendors,
// CheckSteps, paidvendor.VendorKey, VendorKeyEnv, and a go adapter reached through the
// paid protocol.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"allot"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
	"allot/step"
)

// vendorsPipelines names a vendor of each adapter: clips (http, key in
// CLIPS_KEY), videogen and notifier (go, keys in VIDEOGEN_KEY and
// NOTIFIER_KEY), outbox (go, key in the file KEYFILE) and covers
// (activity). CLIPSURL and KEYFILE are replaced by vendorsSet.
const vendorsPipelines = `
[[vendor]]
name        = "clips"
url         = "CLIPSURL"
api_key_env = "CLIPS_KEY"

[[vendor]]
name        = "videogen"
adapter     = "go"
api_key_env = "VIDEOGEN_KEY"

[[vendor]]
name        = "notifier"
adapter     = "go"
api_key_env = "NOTIFIER_KEY"

[[vendor]]
name         = "outbox"
adapter      = "go"
api_key_file = "KEYFILE"

[[vendor]]
name       = "covers"
adapter    = "activity"
task_queue = "covers-python"
  [vendor.activities]
  submit = "SubmitCover"
  lookup = "LookupCover"
  status = "CoverStatus"
  fetch  = "FetchCover"

[[pipeline]]
name      = "media"
period    = "day"
time_zone = "Asia/Tokyo"

  [[pipeline.step]]
  name = "plan"
  kind = "local"

  [[pipeline.step]]
  name   = "video"
  kind   = "paid"
  vendor = "videogen"
  params = { length = "30s" }

  [[pipeline.step]]
  name   = "cover"
  kind   = "paid"
  vendor = "videogen"

  [[pipeline.step]]
  name   = "clip"
  kind   = "paid"
  vendor = "clips"

  [[pipeline.step]]
  name   = "art"
  kind   = "paid"
  vendor = "covers"

  [[pipeline.step]]
  name   = "announce"
  kind   = "effect"
  vendor = "notifier"

  [[pipeline.step]]
  name   = "render"
  kind   = "go"
  func   = "frames"

[[pipeline]]
name   = "extra"
period = "day"

  [[pipeline.step]]
  name = "count"
  kind = "go"
  func = "counter"
`

func vendorsSet(t *testing.T, clipsURL, keyFile string) *pipeline.Set {
	t.Helper()
	text := strings.NewReplacer("CLIPSURL", clipsURL, "KEYFILE", keyFile).Replace(vendorsPipelines)
	set, err := pipeline.Parse([]byte(text), "vendors_test")
	if err != nil {
		t.Fatalf("parse the vendors pipelines: %v", err)
	}
	return set
}

// keyedVendor is a go adapter that keeps the keys its factory was given and
// the requests it was sent. It accepts every submission (queued, 250 USD)
// and knows no task by key.
type keyedVendor struct {
	mu      sync.Mutex
	keys    []string
	submits []paidvendor.SubmitRequest
}

func (v *keyedVendor) factory(key string) (paidvendor.Submitter, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.keys = append(v.keys, key)
	return keyedSubmitter{v}, nil
}

func (v *keyedVendor) builtWith() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.keys)
}

func (v *keyedVendor) sent() []paidvendor.SubmitRequest {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.submits)
}

type keyedSubmitter struct{ v *keyedVendor }

func (s keyedSubmitter) Submit(_ context.Context, req paidvendor.SubmitRequest) (paidvendor.Task, error) {
	s.v.mu.Lock()
	defer s.v.mu.Unlock()
	s.v.submits = append(s.v.submits, req)
	return paidvendor.Task{
		ID: taskIDFor(req.IdempotencyKey), IdempotencyKey: req.IdempotencyKey, Kind: req.Kind,
		Status: paidvendor.StatusQueued, Cost: paidvendor.Cost{Amount: 250, Currency: "USD"},
	}, nil
}

// taskIDFor is a keyedVendor's remote reference for an idempotency key:
// unique per task, as the ledger requires.
func taskIDFor(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "vt_" + hex.EncodeToString(sum[:16])
}

func (s keyedSubmitter) LookupByIdempotencyKey(context.Context, string) (paidvendor.Task, error) {
	return paidvendor.Task{}, paidvendor.ErrNotFound
}

// NamedVendors builds the http vendors on their URL with their key source,
// takes the go adapters registered under their names, and leaves the
// activity vendors to the Episode.
func TestNamedVendorsBuildsHTTPAndGoAdapters(t *testing.T) {
	sim := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: "clips-secret", Seed: 1})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	keyFile := filepath.Join(t.TempDir(), "outbox.key")
	set := vendorsSet(t, srv.URL, keyFile)
	videogen, notifier, outbox := &keyedVendor{}, &keyedVendor{}, &keyedVendor{}

	vendors, err := NamedVendors(set, map[string]paidvendor.Factory{"videogen": videogen.factory, "notifier": notifier.factory, "outbox": outbox.factory})
	if err != nil {
		t.Fatal(err)
	}
	if names := slices.Sorted(maps.Keys(vendors)); !equalStrings(names, []string{"clips", "notifier", "outbox", "videogen"}) {
		t.Fatalf("vendors %v, want clips, notifier, outbox and videogen (not the activity vendor covers)", names)
	}
	for name, want := range map[string]paidvendor.VendorKey{
		"clips":    {Vendor: "clips", Env: "CLIPS_KEY"},
		"videogen": {Vendor: "videogen", Env: "VIDEOGEN_KEY"},
		"notifier": {Vendor: "notifier", Env: "NOTIFIER_KEY"},
		"outbox":   {Vendor: "outbox", File: keyFile},
	} {
		if got := vendors[name].Credentials; got != want {
			t.Errorf("vendor %s credentials = %#v, want %#v", name, got, want)
		}
	}

	// Each go vendor is its own registered factory.
	for name, v := range map[string]*keyedVendor{"videogen": videogen, "notifier": notifier, "outbox": outbox} {
		s, err := vendors[name].New("key-for-" + name)
		if err != nil {
			t.Fatal(err)
		}
		if ks, ok := s.(keyedSubmitter); !ok || ks.v != v || !equalStrings(v.builtWith(), []string{"key-for-" + name}) {
			t.Errorf("vendor %s built %T with keys %v: want its registered factory given the key", name, s, v.builtWith())
		}
	}

	// The http vendor speaks to its URL with the key it is given.
	key := allot.IdempotencyKey("media", tokyoEpisode, "clip", 0)
	s, err := vendors["clips"].New("clips-secret")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := s.(paidvendor.Client)
	if !ok {
		t.Fatalf("the http vendor's adapter is %T, not a paidvendor.Client: a paid step could not poll it", s)
	}
	if _, err := c.LookupByIdempotencyKey(context.Background(), key); !errors.Is(err, paidvendor.ErrNotFound) {
		t.Fatalf("look-up on the http vendor with its key: %v, want ErrNotFound from the vendor at %s", err, srv.URL)
	}
	s, err = vendors["clips"].New("another-key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupByIdempotencyKey(context.Background(), key); !errors.Is(err, paidvendor.ErrUnauthorized) {
		t.Fatalf("look-up with a wrong key: %v, want ErrUnauthorized (the key given to New is the one sent)", err)
	}
}

// A go vendor without a registered factory, and a factory no go vendor
// names, are refused when the worker starts.
func TestNamedVendorsRefusesUnmatchedGoAdapters(t *testing.T) {
	set := vendorsSet(t, "https://clips.example", filepath.Join(t.TempDir(), "k"))
	v := &keyedVendor{}
	all := func() map[string]paidvendor.Factory {
		return map[string]paidvendor.Factory{"videogen": v.factory, "notifier": v.factory, "outbox": v.factory}
	}

	missing := all()
	delete(missing, "videogen")
	nilFactory := all()
	nilFactory["videogen"] = nil
	for name, adapters := range map[string]map[string]paidvendor.Factory{"missing": missing, "nil": nilFactory} {
		_, err := NamedVendors(set, adapters)
		if err == nil || !strings.Contains(err.Error(), `"videogen"`) || !strings.Contains(err.Error(), "app.WorkerConfig.Vendors") {
			t.Errorf("%s factory for go vendor videogen: %v, want an error naming it and app.WorkerConfig.Vendors", name, err)
		}
	}

	// Registered under a name that is no vendor, an http vendor, or an
	// activity vendor.
	for _, name := range []string{"ghost", "clips", "covers"} {
		adapters := all()
		adapters[name] = v.factory
		_, err := NamedVendors(set, adapters)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("a factory registered as %s: %v, want an error naming it", name, err)
		}
	}

	if _, err := NamedVendors(set, all()); err != nil {
		t.Fatalf("the matching adapters were refused: %v", err)
	}
}

// CheckSteps refuses a go step whose function is not registered (in any
// pipeline), a function that shadows a built-in step, and a nil function;
// it accepts the matching set.
func TestCheckSteps(t *testing.T) {
	set := vendorsSet(t, "https://clips.example", filepath.Join(t.TempDir(), "k"))
	fn := func(context.Context, step.Input) (step.Output, error) { return step.Output{}, nil }

	err := CheckSteps(set, map[string]step.Func{"counter": fn})
	if err == nil || !strings.Contains(err.Error(), `"frames"`) || !strings.Contains(err.Error(), `"render"`) || !strings.Contains(err.Error(), "app.WorkerConfig.Steps") {
		t.Errorf("func frames of step render unregistered: %v, want an error naming both and app.WorkerConfig.Steps", err)
	}
	err = CheckSteps(set, map[string]step.Func{"frames": fn})
	if err == nil || !strings.Contains(err.Error(), `"counter"`) || !strings.Contains(err.Error(), `"extra"`) {
		t.Errorf("func counter of pipeline extra unregistered: %v, want an error naming it", err)
	}
	for _, builtin := range []string{pipeline.ActionPlan, pipeline.ActionAssemble, pipeline.ActionPublish} {
		err := CheckSteps(set, map[string]step.Func{"frames": fn, "counter": fn, builtin: fn})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", builtin)) {
			t.Errorf("a function registered as the built-in %s: %v, want an error naming it", builtin, err)
		}
	}
	err = CheckSteps(set, map[string]step.Func{"frames": nil, "counter": fn})
	if err == nil || !strings.Contains(err.Error(), `"frames"`) {
		t.Errorf("a nil function: %v, want an error naming it", err)
	}
	if err := CheckSteps(set, map[string]step.Func{"frames": fn, "counter": fn}); err != nil {
		t.Errorf("the matching functions were refused: %v", err)
	}
}

// paidvendor.VendorKey reads its variable or its file each time (trimmed), says which
// one to set when it gives nothing, and is "" without a source.
func TestVendorKey(t *testing.T) {
	ctx := context.Background()

	t.Setenv("VK_TEST_KEY", "  sk-from-env \n")
	fromEnv := paidvendor.VendorKey{Vendor: "clips", Env: "VK_TEST_KEY"}
	if key, err := fromEnv.VendorAPIKey(ctx); err != nil || key != "sk-from-env" {
		t.Errorf("key from the environment = %q, %v; want sk-from-env", key, err)
	}
	t.Setenv("VK_TEST_KEY", "sk-rotated")
	if key, err := fromEnv.VendorAPIKey(ctx); err != nil || key != "sk-rotated" {
		t.Errorf("key after the variable changed = %q, %v; want sk-rotated", key, err)
	}
	t.Setenv("VK_TEST_KEY", "  \n")
	if key, err := fromEnv.VendorAPIKey(ctx); err == nil || key != "" || !strings.Contains(err.Error(), "VK_TEST_KEY") || !strings.Contains(err.Error(), "clips") {
		t.Errorf("blank variable: %q, %v; want an error naming clips and VK_TEST_KEY", key, err)
	}
	t.Setenv("VK_UNSET_KEY", "")
	os.Unsetenv("VK_UNSET_KEY")
	if key, err := (paidvendor.VendorKey{Vendor: "clips", Env: "VK_UNSET_KEY"}).VendorAPIKey(ctx); err == nil || key != "" || !strings.Contains(err.Error(), "VK_UNSET_KEY") {
		t.Errorf("unset variable: %q, %v; want an error naming VK_UNSET_KEY", key, err)
	}

	file := filepath.Join(t.TempDir(), "outbox.key")
	fromFile := paidvendor.VendorKey{Vendor: "outbox", File: file}
	if err := os.WriteFile(file, []byte("sk-file-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if key, err := fromFile.VendorAPIKey(ctx); err != nil || key != "sk-file-1" {
		t.Errorf("key from the file = %q, %v; want sk-file-1", key, err)
	}
	if err := os.WriteFile(file, []byte("  sk-file-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if key, err := fromFile.VendorAPIKey(ctx); err != nil || key != "sk-file-2" {
		t.Errorf("key after the file was rotated = %q, %v; want sk-file-2", key, err)
	}
	if err := os.WriteFile(file, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if key, err := fromFile.VendorAPIKey(ctx); err == nil || key != "" || !strings.Contains(err.Error(), file) {
		t.Errorf("empty file: %q, %v; want an error naming %s", key, err, file)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if key, err := fromFile.VendorAPIKey(ctx); err == nil || key != "" || !strings.Contains(err.Error(), file) {
		t.Errorf("missing file: %q, %v; want an error naming %s", key, err, file)
	}

	if key, err := (paidvendor.VendorKey{Vendor: "bare"}).VendorAPIKey(ctx); err != nil || key != "" {
		t.Errorf("no key source: %q, %v; want \"\" and no error", key, err)
	}
}

// VendorKeyEnv lists the variables the vendors take their keys from, and
// nothing else.
func TestVendorKeyEnv(t *testing.T) {
	set := vendorsSet(t, "https://clips.example", filepath.Join(t.TempDir(), "k"))
	if got := slices.Sorted(slices.Values(VendorKeyEnv(set))); !equalStrings(got, []string{"CLIPS_KEY", "NOTIFIER_KEY", "VIDEOGEN_KEY"}) {
		t.Fatalf("VendorKeyEnv = %v, want CLIPS_KEY, NOTIFIER_KEY, VIDEOGEN_KEY", got)
	}
}

// A paid and an effect step on go vendors reach the registered factories
// with the keys their api_key_env names, read when the call needs them;
// the worker's default vendor is never asked.
func TestGoVendorThroughThePaidProtocol(t *testing.T) {
	f := newFixture(t, nil)
	set := vendorsSet(t, "https://clips.example", filepath.Join(t.TempDir(), "k"))
	f.acts.Pipelines = set
	videogen, notifier, outbox := &keyedVendor{}, &keyedVendor{}, &keyedVendor{}
	vendors, err := NamedVendors(set, map[string]paidvendor.Factory{"videogen": videogen.factory, "notifier": notifier.factory, "outbox": outbox.factory})
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Vendors = vendors
	creds := &countingCredentials{}
	f.acts.Credentials = creds
	f.acts.NewVendor = func(string) (paidvendor.Client, error) {
		t.Error("the default vendor was built for a step that names a go vendor")
		return nil, errors.New("no default vendor in this test")
	}
	t.Setenv("VIDEOGEN_KEY", " sk-videogen\n")
	t.Setenv("NOTIFIER_KEY", "sk-notifier")
	f.mustAllocate(t, "media", "run-1", tokyoNominal)

	res, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "media", EpisodeID: tokyoEpisode, Step: "video"})
	if err != nil {
		t.Fatalf("submit video: %v", err)
	}
	if !equalStrings(videogen.builtWith(), []string{"sk-videogen"}) {
		t.Fatalf("videogen's factory was given keys %q, want [sk-videogen] from VIDEOGEN_KEY", videogen.builtWith())
	}
	sent := videogen.sent()
	if len(sent) != 1 || sent[0].Kind != "video" || sent[0].IdempotencyKey != res.IdempotencyKey || sent[0].Params["length"] != "30s" {
		t.Fatalf("videogen was sent %+v, want one video request with key %s and the step's params", sent, res.IdempotencyKey)
	}
	if res.State != allot.PaidSubmitted || res.Kind != allot.KindPaid || res.RemoteRef != taskIDFor(res.IdempotencyKey) || res.CostAmount != 250 || res.CostCurrency != "USD" {
		t.Fatalf("video = %+v, want submitted with videogen's task and cost", res)
	}

	res, err = execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "media", EpisodeID: tokyoEpisode, Step: "announce"})
	if err != nil {
		t.Fatalf("submit announce: %v", err)
	}
	if !equalStrings(notifier.builtWith(), []string{"sk-notifier"}) || len(notifier.sent()) != 1 || notifier.sent()[0].Kind != "announce" {
		t.Fatalf("notifier was built with %q and sent %+v, want [sk-notifier] and one announce", notifier.builtWith(), notifier.sent())
	}
	if res.State != allot.PaidSubmitted || res.Kind != allot.KindEffect || res.CostAmount != 0 {
		t.Fatalf("announce = %+v, want a submitted effect that costs nothing", res)
	}

	// Without its key the vendor is not built, and the step parks naming
	// the variable.
	t.Setenv("VIDEOGEN_KEY", "")
	_, err = execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "media", EpisodeID: tokyoEpisode, Step: "cover"})
	appErr := wantAppError(t, err, allot.VendorNotConfigured)
	if !strings.Contains(appErr.Error(), "VIDEOGEN_KEY") {
		t.Errorf("VendorNotConfigured %q does not name VIDEOGEN_KEY", appErr.Error())
	}
	if len(videogen.builtWith()) != 1 || len(videogen.sent()) != 1 {
		t.Fatalf("without its key videogen was built %d times and sent %d requests, want still 1 and 1", len(videogen.builtWith()), len(videogen.sent()))
	}

	if creds.reads.Load() != 0 || len(outbox.builtWith()) != 0 {
		t.Fatalf("the default credentials were read %d times, outbox built %d times: want neither", creds.reads.Load(), len(outbox.builtWith()))
	}
}
