package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"allot/app"
	"allot/internal/allottest"
	"allot/paidvendor"
	"allot/workflows"
)

// A namespace that does not exist is named with what set it (the variable,
// or the profile and its file) and the fix, by the starter and by the
// worker. The create command printed, sent as the same request, creates it,
// and the refused command then runs.
func TestUnknownNamespaceNamesItsSourceAndTheFix(t *testing.T) {
	c := allottest.NewCluster(t)
	addr := c.Server.GetFrontendHostPort()
	dir := t.TempDir()
	env := []string{"TEMPORAL_ADDRESS=" + addr, "ALLOT_LEDGER=" + c.LedgerURL,
		"ALLOT_PIPELINES=" + allottest.WritePipelines(t, dir), "USER=maria", "HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()}
	bin := allottest.BuildBinary(t, "allot/starter")
	starter := allottest.Starter{Bin: bin, Dir: dir, Env: append(slices.Clone(env), "TEMPORAL_NAMESPACE=allot-missing")}

	_, err := starter.Run("schedule", "list")
	create := regexp.MustCompile("`(temporal operator namespace create [^`]+)`").FindStringSubmatch(errText(err))
	for _, want := range []string{`namespace "allot-missing" (set by TEMPORAL_NAMESPACE) does not exist`, "set TEMPORAL_NAMESPACE to an existing namespace",
		"`temporal operator namespace list --address " + addr + "`"} {
		if err == nil || !strings.Contains(err.Error(), want) || create == nil {
			t.Fatalf("starter with an unknown TEMPORAL_NAMESPACE: %v; want %q and a create command", err, want)
		}
	}

	// The same namespace from an envconfig profile names the profile and its file.
	profile := filepath.Join(dir, "temporal.toml")
	if err := os.WriteFile(profile, []byte("[profile.ops]\nnamespace = \"allot-missing\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	viaProfile := allottest.Starter{Bin: bin, Dir: dir, Env: append(slices.Clone(env), "TEMPORAL_CONFIG_FILE="+profile, "TEMPORAL_PROFILE=ops")}
	if _, err := viaProfile.Run("schedule", "list"); err == nil || !strings.Contains(err.Error(), `(set by namespace of profile "ops" in `+profile+")") ||
		!strings.Contains(err.Error(), "change that profile's namespace") {
		t.Fatalf("starter with a profile's unknown namespace: %v", err)
	}

	// The worker says the same, before serving anything.
	t.Setenv("TEMPORAL_NAMESPACE", "allot-missing")
	ctx, cancel := allottest.Context(t, time.Minute)
	defer cancel()
	err = app.RunWorker(ctx, app.WorkerConfig{
		Config:      app.Config{Ledger: "sqlite:" + filepath.Join(dir, "worker.db"), DataDir: dir, VendorURL: "http://127.0.0.1:1", TaskQueue: "ns-test"},
		Temporal:    client.Options{HostPort: addr, Namespace: "allot-missing"},
		Credentials: paidvendor.NewStaticCredentials("test-key"),
	})
	if err == nil || !strings.Contains(err.Error(), `namespace "allot-missing" (set by TEMPORAL_NAMESPACE) does not exist`) || !strings.Contains(err.Error(), create[1]) {
		t.Fatalf("worker with an unknown TEMPORAL_NAMESPACE: %v", err)
	}

	// temporal operator namespace create --namespace N --address A: the
	// same request through the SDK; then the refused command runs.
	args, err := workflows.SplitCommand(create[1])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"temporal", "operator", "namespace", "create", "--namespace", "allot-missing", "--address", addr}; !slices.Equal(args, want) {
		t.Fatalf("printed create command %q, want %q", args, want)
	}
	if _, err := c.Client.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: args[5], WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	for deadline := allottest.Deadline(t, time.Minute); ; {
		_, err := starter.Run("schedule", "list")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("starter after the namespace was created: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // the server's namespace cache catches up
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
