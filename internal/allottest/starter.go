package allottest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// Starter runs a built starter binary (BuildBinary) the way an operator at
// a shell runs it: in Dir, with the environment Env.
type Starter struct {
	Bin, Dir string
	Env      []string
}

// Run runs the starter with args (3 minutes at most on an idle machine,
// stretched by Patience) and returns its
// standard output; the error carries its standard error. Safe from any
// goroutine.
func (s Starter) Run(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute*Patience())
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Bin, args...)
	cmd.Env, cmd.Dir = s.Env, s.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("starter %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// Out is Run that fails the test when the starter fails.
func (s Starter) Out(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := s.Run(args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// JSON runs the starter with args and --json and decodes what it printed
// into v.
func (s Starter) JSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := s.Out(t, append(slices.Clone(args), "--json")...)
	if err := json.Unmarshal(LastJSON(out), v); err != nil {
		t.Fatalf("starter %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// LastJSON is the last JSON value of a command's output: the result, after
// the progress lines a command that follows something prints first (`schedule
// backfill`). Output that is not a stream of JSON values is returned whole.
func LastJSON(out []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(out))
	var last json.RawMessage
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			if err == io.EOF && last != nil {
				return last
			}
			return out
		}
		last = v
	}
}
