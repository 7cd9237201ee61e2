package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
)

// namespaceServer answers DescribeNamespace for the namespaces it has.
type namespaceServer struct {
	workflowservice.WorkflowServiceClient
	has map[string]bool
}

func (s namespaceServer) DescribeNamespace(_ context.Context, in *workflowservice.DescribeNamespaceRequest, _ ...grpc.CallOption) (*workflowservice.DescribeNamespaceResponse, error) {
	if !s.has[in.Namespace] {
		return nil, serviceerror.NewNamespaceNotFound(in.Namespace)
	}
	return &workflowservice.DescribeNamespaceResponse{}, nil
}

type namespaceClient struct {
	client.Client
	svc namespaceServer
}

func (c namespaceClient) WorkflowService() workflowservice.WorkflowServiceClient { return c.svc }

// A namespace the server does not have is named with what set it and the
// fix; one it has passes. (The embedded server's answer:
// TestUnknownNamespaceNamesItsSourceAndTheFix.)
func TestCheckNamespaceNamesItsSourceAndTheFix(t *testing.T) {
	c := namespaceClient{svc: namespaceServer{has: map[string]bool{"default": true}}}
	opts := client.Options{HostPort: "temporal.example:7233"}
	if err := CheckNamespace(context.Background(), c, opts, "the default"); err != nil {
		t.Fatalf("the default namespace, which exists: %v", err)
	}
	opts.Namespace = "prod"
	err := CheckNamespace(context.Background(), c, opts, "TEMPORAL_NAMESPACE")
	for _, want := range []string{`namespace "prod" (set by TEMPORAL_NAMESPACE) does not exist on the Temporal server at temporal.example:7233`,
		"set TEMPORAL_NAMESPACE to an existing namespace", "`temporal operator namespace list --address temporal.example:7233`",
		"`temporal operator namespace create --namespace prod --address temporal.example:7233`"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("unknown namespace: %v\nwant %q", err, want)
		}
	}
	if err := CheckNamespace(context.Background(), c, opts, "--namespace"); err == nil || !strings.Contains(err.Error(), "pass --namespace with an existing namespace") {
		t.Fatalf("unknown namespace from the flag: %v", err)
	}
}

// What set the namespace: the flag, else TEMPORAL_NAMESPACE, else the
// profile (named with its file), else the default.
func TestNamespaceSource(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "temporal.toml")
	if err := os.WriteFile(file, []byte("[profile.ops]\nnamespace = \"prod\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEMPORAL_CONFIG_FILE", file)
	t.Setenv("TEMPORAL_PROFILE", "ops")
	t.Setenv("TEMPORAL_NAMESPACE", "staging")
	if got := NamespaceSource("other"); got != "--namespace" {
		t.Errorf("with --namespace: %q", got)
	}
	if got := NamespaceSource(""); got != "TEMPORAL_NAMESPACE" {
		t.Errorf("with TEMPORAL_NAMESPACE: %q", got)
	}
	t.Setenv("TEMPORAL_NAMESPACE", "")
	if got, want := NamespaceSource(""), `namespace of profile "ops" in `+file; got != want {
		t.Errorf("from the profile: %q, want %q", got, want)
	}
	t.Setenv("TEMPORAL_PROFILE", "none")
	if got := NamespaceSource(""); !strings.HasPrefix(got, "the default") {
		t.Errorf("no profile sets one: %q", got)
	}
}
