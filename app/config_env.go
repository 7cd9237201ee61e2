package app

import (
	"log/slog"
	"slices"
	"strings"

	"allot"
	"allot/internal/execstep"
	"allot/paidvendor"
	"allot/pipeline"
)

// KnownEnv are the ALLOT_* variables allot's binaries read: ConfigFromEnv's,
// the default vendor's controls and its key (read by the paid activities),
// and the exec id a step's command is given. TestKnownEnvIsWhatConfigReads
// keeps the list in step with ConfigFromEnv.
var KnownEnv = knownEnv()

func knownEnv() []string {
	names := []string{EnvLedger, EnvPipelines, EnvDataDir, EnvTaskQueue, EnvVendorURL,
		paidvendor.EnvVendorAPIKey, paidvendor.EnvVendorAPIKeyFile, execstep.ExecIDEnv, EnvConsoleTokenFile}
	for _, v := range pipeline.DefaultVendorEnv {
		names = append(names, v.Env)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// testEnvPrefix: the test suites' own settings (ALLOT_TEST_POSTGRES_DSN
// and the like), which no binary reads.
const testEnvPrefix = "ALLOT_TEST_"

// UnknownEnv is every ALLOT_* variable of environ ("NAME=value" lines)
// that no allot binary reads, each with the closest known name: a typo
// such as ALLOT_VENDOR_RATEE would otherwise be ignored without a word.
func UnknownEnv(environ []string) [][2]string {
	var out [][2]string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "ALLOT_") || strings.HasPrefix(name, testEnvPrefix) || slices.Contains(KnownEnv, name) {
			continue
		}
		out = append(out, [2]string{name, allot.Closest(name, KnownEnv)})
	}
	return out
}

// WarnUnknownEnv logs one warning per unknown ALLOT_* variable of environ,
// naming the closest known one.
func WarnUnknownEnv(logger *slog.Logger, environ []string) {
	for _, u := range UnknownEnv(environ) {
		logger.Warn("unknown ALLOT_ variable, ignored: did you mean "+u[1]+"? (rename or unset it)", "variable", u[0], "closest", u[1])
	}
}
