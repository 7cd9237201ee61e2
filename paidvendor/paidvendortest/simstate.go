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

// simStateVersion is the layout of the simulator's state file. Version 1
// had no line IDs, no refunds and no bill faults; it still loads, its lines
// numbered in order.
const simStateVersion = 2

type simState struct {
	Version    int                   `json:"version"`
	Tasks      []*simTask            `json:"tasks"`   // creation order
	Charges    []vendorapi.Charge    `json:"charges"` // billing order
	LastSeq    int64                 `json:"last_seq,omitempty"`
	BillFaults []vendorapi.BillFault `json:"bill_faults,omitempty"`
	// The batch API's, in creation order; absent from older files.
	Batches     []*simBatch  `json:"batches,omitempty"`
	BatchFaults *BatchFaults `json:"batch_faults,omitempty"`
}

// saveLocked writes the whole state to s.stateFile: a temporary file in the
// same directory, fsynced, renamed over the old one, and the directory
// fsynced, so a crash leaves either the old or the new state, never a mix.
func (s *Simulator) saveLocked() error {
	if s.stateFile == "" {
		return nil
	}
	st := simState{Version: simStateVersion, Tasks: make([]*simTask, 0, len(s.order)), Charges: wireLines(s.lines), LastSeq: s.lastSeq, BillFaults: s.planted}
	for _, id := range s.order {
		st.Tasks = append(st.Tasks, s.tasks[id])
	}
	if len(s.batchOrder) > 0 {
		st.BatchFaults = &s.batchFaults
		for _, id := range s.batchOrder {
			st.Batches = append(st.Batches, s.batches[id])
		}
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
	if st.Version != 1 && st.Version != simStateVersion {
		return bad("version %d, this simulator reads versions 1 and %d", st.Version, simStateVersion)
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
	phantoms := map[string]bool{}
	for i, f := range st.BillFaults {
		if !knownBillFault(f.Kind) || f.TaskID == "" || f.LineID == "" {
			return bad("bill fault %d (%.40q) lacks a known kind, a task or a line", i, f.Kind)
		}
		if f.Kind == vendorapi.BillFaultPhantom {
			phantoms[f.LineID] = true
		}
	}
	s.planted = st.BillFaults
	batchTasks, err := s.loadBatches(st)
	if err != nil {
		return bad("%v", err)
	}
	for i, c := range st.Charges {
		seq := int64(i + 1) // version 1: numbered in billing order
		if st.Version > 1 {
			var ok bool
			if seq, ok = parseLineID(c.ID); !ok {
				return bad("charge %d has line id %.80q, not %s and a number", i, c.ID, vendorapi.ChargeIDPrefix)
			}
			if i > 0 && seq <= s.lines[i-1].seq {
				return bad("charge %d (%s) is not after the charge before it", i, c.ID)
			}
		}
		if s.tasks[c.TaskID] == nil && !phantoms[lineID(seq)] && !batchTasks[c.TaskID] {
			return bad("charge %d is for unknown task %.80q", i, c.TaskID)
		}
		s.lines = append(s.lines, simLine{seq: seq, Charge: paidvendor.Charge{
			ID: lineID(seq), TaskID: c.TaskID, IdempotencyKey: c.IdempotencyKey, Amount: c.Amount, Currency: c.Currency, At: c.At.UTC(), Refund: c.Refund,
		}})
	}
	s.lastSeq = max(st.LastSeq, int64(len(st.Charges)))
	if n := len(s.lines); n > 0 && s.lines[n-1].seq > s.lastSeq {
		return bad("last_seq %d is before the last charge %s", st.LastSeq, s.lines[n-1].ID)
	}
	s.log.Info("vendorsim: state loaded", "file", s.stateFile, "tasks", len(s.tasks), "charges", len(s.lines), "bill_faults", len(s.planted), "batches", len(s.batchOrder))
	return nil
}

// wireLines is the bill as the API and the state file write it.
func wireLines(lines []simLine) []vendorapi.Charge {
	out := make([]vendorapi.Charge, 0, len(lines))
	for _, l := range lines {
		c := l.Charge
		out = append(out, vendorapi.Charge{ID: c.ID, TaskID: c.TaskID, IdempotencyKey: c.IdempotencyKey, Amount: c.Amount, Currency: c.Currency, At: c.At, Refund: c.Refund})
	}
	return out
}

// loadBatches takes the batches of a state file, and returns their items'
// task IDs, which their charge lines name.
func (s *Simulator) loadBatches(st simState) (map[string]bool, error) {
	taskIDs := map[string]bool{}
	for i, b := range st.Batches {
		switch {
		case b == nil:
			return nil, fmt.Errorf("batch %d is null", i)
		case b.Seq != int64(i+1):
			return nil, fmt.Errorf("batch %d has seq %d, not %d", i, b.Seq, i+1)
		case s.batches[b.ID] != nil:
			return nil, fmt.Errorf("batch %.80q appears twice", b.ID)
		case len(b.Items) == 0 || b.Cut < 0 || b.Cut > len(b.Items):
			return nil, fmt.Errorf("batch %s has no items or a cut outside them", b.ID)
		case b.Status != vendorapi.BatchInProgress && (b.EndedAt == nil || b.OutputFileID == "" || b.ErrorFileID == ""):
			return nil, fmt.Errorf("batch %s ended without an end time or its files", b.ID)
		}
		for j, it := range b.Items {
			if it == nil || paidvendor.ValidateTaskID(it.TaskID) != nil || !validCustomID(it.CustomID) {
				return nil, fmt.Errorf("batch %s: item %d is null or lacks a task ID or custom ID", b.ID, j)
			}
			if it.Params == nil {
				it.Params = map[string]string{}
			}
			taskIDs[it.TaskID] = true
		}
		s.batches[b.ID] = b
		s.batchOrder = append(s.batchOrder, b.ID)
		if b.Status != vendorapi.BatchInProgress {
			s.files[b.OutputFileID] = simFile{batchID: b.ID, kind: fileKindOutput}
			s.files[b.ErrorFileID] = simFile{batchID: b.ID, kind: fileKindError}
		}
	}
	s.lastBatchSeq = int64(len(st.Batches))
	if st.BatchFaults != nil {
		s.batchFaults = *st.BatchFaults
	}
	return taskIDs, nil
}
