package app_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductionBinariesLinkNoTemporalServer keeps the worker and the
// starter small: neither may link the Temporal server (about 300 packages
// and most of a 200 MB binary), the embedded dev stack, the operator
// commands, reports and import (worker) or the simulated vendor. They are clients of a Temporal
// cluster; the server is embedded only by devserver/ and tests. Nor may
// they link internal/'s test helpers (the engine under internal/ is theirs).
func TestProductionBinariesLinkNoTemporalServer(t *testing.T) {
	testOnly := []string{"allot/internal/allottest/", "allot/internal/chaos/", "allot/internal/cleanenv", "allot/internal/devstack",
		"allot/internal/docstest", "allot/internal/importgroups", "allot/internal/mutants", "allot/internal/testprofile", "allot/internal/pipelinetest",
		"allot/internal/patience", "allot/internal/protocoltest", "allot/internal/testcerts"}
	for _, tc := range []struct {
		pkg       string
		forbidden []string // package paths, or prefixes ending in "/"
	}{
		{"allot/worker", []string{"go.temporal.io/server/", "allot/internal/temporalserver", "allot/internal/operator", "allot/internal/report", "allot/internal/importer", "allot/paidvendor/paidvendortest"}},
		{"allot/starter", []string{"go.temporal.io/server/", "allot/internal/temporalserver", "allot/paidvendor/paidvendortest"}},
		{"allot/app", []string{"go.temporal.io/server/", "allot/internal/temporalserver", "allot/internal/operator", "allot/internal/report", "allot/internal/importer", "allot/paidvendor/paidvendortest"}},
	} {
		pkg := tc.pkg
		tc.forbidden = append(tc.forbidden, testOnly...)
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 50 {
			t.Fatalf("go list -deps %s listed %d packages: the check would prove nothing", pkg, len(deps))
		}
		var bad []string
		for _, dep := range deps {
			for _, p := range tc.forbidden {
				if dep == strings.TrimSuffix(p, "/") || strings.HasSuffix(p, "/") && strings.HasPrefix(dep, p) {
					bad = append(bad, dep)
				}
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s links %d packages it must not (first: %v); see `go list -deps %s` for the path that pulls them in",
				pkg, len(bad), bad[:min(len(bad), 5)], pkg)
		}
	}
}
