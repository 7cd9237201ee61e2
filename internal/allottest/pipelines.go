package allottest

import (
	_ "embed"
	"os"
	"path/filepath"
	"testing"

	"allot/pipeline"
)

// pipelinesTOML is testdata/pipelines.toml: the pipelines every integration
// test runs (weekly-video, weekly-paid, auto-paid, capped).
//
//go:embed testdata/pipelines.toml
var pipelinesTOML []byte

// Pipelines parses the test pipelines.
func Pipelines(t *testing.T) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse(pipelinesTOML, "allottest/testdata/pipelines.toml")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// WritePipelines writes the test pipelines to dir and returns the file's
// path, for a process that reads them from ALLOT_PIPELINES.
func WritePipelines(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "pipelines.toml")
	if err := os.WriteFile(path, pipelinesTOML, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
