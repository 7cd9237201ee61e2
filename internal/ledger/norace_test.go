//go:build !race

package ledger

// raceDetector: see race_test.go.
const raceDetector = false
