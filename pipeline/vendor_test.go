package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A vendor's key written into the file is refused with where it goes
// instead (issue 15): the refusal names the vendor, api_key_env and
// api_key_file, and never repeats the key.
func TestVendorKeyInTheFileSaysWhereItGoes(t *testing.T) {
	for _, setting := range []string{"api_key", "token"} {
		file := "[[vendor]]\nname = \"studio\"\nurl = \"https://studio.example\"\n" + setting + " = \"sk-live-123\"\n" +
			"[[pipeline]]\nname = \"p\"\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"local\"\n  action = \"plan\"\n"
		_, err := Parse([]byte(file), "test.toml")
		if err == nil {
			t.Fatalf("%s in a [[vendor]] was accepted", setting)
		}
		msg := err.Error()
		for _, want := range []string{`vendor "studio"`, setting + ":", "never goes in the pipeline file", "api_key_env", "api_key_file"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: the refusal %q does not say %q", setting, msg, want)
			}
		}
		if strings.Contains(msg, "sk-live-123") {
			t.Errorf("the refusal repeats the key: %q", msg)
		}
	}
}

// The worker's PipelineNotFound names the pipeline file it loaded (issue
// 15), so a worker started on the wrong file says which.
func TestUnknownPipelineNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mine.toml")
	if err := os.WriteFile(path, []byte("[[pipeline]]\nname = \"p\"\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"local\"\n  action = \"plan\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{{path, path}, {"", "embedded default pipeline file"}} {
		set, err := Load(c.path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = set.WithAutoApprove().Get("nightly")
		var unknown *UnknownError
		if !errors.As(err, &unknown) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "ALLOT_PIPELINES") {
			t.Errorf("Get of an unknown pipeline from %q = %v, want an UnknownError naming %q", c.path, err, c.want)
		}
	}
}
