//go:build race

package ledger

// raceDetector: this test binary runs under the race detector (.ci/run's
// short suite), where the model tests take fewer steps (modelParams).
const raceDetector = true
