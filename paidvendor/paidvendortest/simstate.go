package paidvendortest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

// simStateVersion is the layout of the simulator's state file.
const simStateVersion = 1

type simState struct {
	Version int                `json:"version"`
	Tasks   []*simTask         `json:"tasks"`   // creation order
	Charges []vendorapi.Charge `json:"charges"` // billing order
}

// saveLocked writes the whole state to s.stateFile: a temporary file in the
// same directory, fsynced, renamed over the old one, and the directory
// fsynced, so a crash leaves either the old or the new state, never a mix.
func (s *Simulator) saveLocked() error {
	if s.stateFile == "" {
		return nil
	}
	st := simState{Version: simStateVersion, Tasks: make([]*simTask, 0, len(s.order)), Charges: wireCharges(s.charges)}
	for _, id := range s.order {
		st.Tasks = append(st.Tasks, s.tasks[id])
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("paidvendortest: simulator: encoding state: %w", err)
	}
	return writeFileAtomic(s.stateFile, append(data, '\n'))
}

func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("paidvendortest: simulator: saving state: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("paidvendortest: simulator: saving state: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("paidvendortest: simulator: saving state: fsync: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("paidvendortest: simulator: saving state: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("paidvendortest: simulator: saving state: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("paidvendortest: simulator: saving state: opening directory for fsync: %w", err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("paidvendortest: simulator: saving state: fsync of directory: %w", err)
	}
	return nil
}

// load reads s.stateFile; a missing file is an empty state.
func (s *Simulator) load() error {
	data, err := os.ReadFile(s.stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("paidvendortest: simulator: loading state: %w", err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("paidvendortest: simulator: state file %s: "+format, append([]any{s.stateFile}, args...)...)
	}
	var st simState
	if err := json.Unmarshal(data, &st); err != nil {
		return bad("does not parse: %v (move it away to start empty)", err)
	}
	if st.Version != simStateVersion {
		return bad("version %d, this simulator reads version %d", st.Version, simStateVersion)
	}
	for i, t := range st.Tasks {
		switch {
		case t == nil:
			return bad("task %d is null", i)
		case paidvendor.ValidateTaskID(t.ID) != nil:
			return bad("task %d has an invalid id", i)
		case s.tasks[t.ID] != nil:
			return bad("task %s appears twice", t.ID)
		case t.IdempotencyKey == "" || t.Kind == "":
			return bad("task %s lacks an idempotency key or kind", t.ID)
		}
		if t.Params == nil {
			t.Params = map[string]string{}
		}
		s.tasks[t.ID] = t
		s.order = append(s.order, t.ID)
		if _, taken := s.byKey[t.IdempotencyKey]; !taken {
			s.byKey[t.IdempotencyKey] = t.ID
		}
	}
	for i, c := range st.Charges {
		if s.tasks[c.TaskID] == nil {
			return bad("charge %d is for unknown task %.80q", i, c.TaskID)
		}
		s.charges = append(s.charges, paidvendor.Charge{TaskID: c.TaskID, IdempotencyKey: c.IdempotencyKey, Amount: c.Amount, Currency: c.Currency, At: c.At.UTC()})
	}
	s.log.Info("vendorsim: state loaded", "file", s.stateFile, "tasks", len(s.tasks), "charges", len(s.charges))
	return nil
}

// wireCharges is the charge list as the API and the state file write it.
func wireCharges(charges []paidvendor.Charge) []vendorapi.Charge {
	out := make([]vendorapi.Charge, 0, len(charges))
	for _, c := range charges {
		out = append(out, vendorapi.Charge{TaskID: c.TaskID, IdempotencyKey: c.IdempotencyKey, Amount: c.Amount, Currency: c.Currency, At: c.At})
	}
	return out
}
