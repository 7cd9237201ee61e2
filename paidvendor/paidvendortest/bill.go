package paidvendortest

import (
	"crypto/rand"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

// simLine is one line of the simulated bill. Its sequence number is the
// cursor after it and, in its ID, what names it: both outlive restarts.
type simLine struct {
	seq int64
	paidvendor.Charge
}

// billSeedSalt sets the bill faults' random source apart from the other
// faults' one, which has the same seed.
const billSeedSalt = 0x5eed_b111

func lineID(seq int64) string { return fmt.Sprintf("%s%06d", vendorapi.ChargeIDPrefix, seq) }

// parseLineID is the sequence number in a line ID, if it is one this
// simulator writes.
func parseLineID(id string) (int64, bool) {
	digits, ok := strings.CutPrefix(id, vendorapi.ChargeIDPrefix)
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseInt(digits, 10, 64)
	return seq, err == nil && seq > 0 && lineID(seq) == id
}

func knownBillFault(kind string) bool {
	switch kind {
	case vendorapi.BillFaultPhantom, vendorapi.BillFaultMissing, vendorapi.BillFaultWrongAmount, vendorapi.BillFaultDouble, vendorapi.BillFaultRefund:
		return true
	}
	return false
}

// billMarkLocked returns what puts the bill back as it is now, for a change
// that cannot be saved and only appends (accepting a task must not copy
// the whole bill).
func (s *Simulator) billMarkLocked() (undo func()) {
	nLines, lastSeq, nPlanted := len(s.lines), s.lastSeq, len(s.planted)
	return func() {
		s.lines = s.lines[:nLines]
		s.lastSeq = lastSeq
		s.planted = s.planted[:nPlanted]
	}
}

// nextLineLocked gives out the next sequence number, and its line ID.
func (s *Simulator) nextLineLocked() (int64, string) {
	s.lastSeq++
	return s.lastSeq, lineID(s.lastSeq)
}

func (s *Simulator) appendLineLocked(c paidvendor.Charge) string {
	seq, id := s.nextLineLocked()
	c.ID = id
	s.lines = append(s.lines, simLine{seq: seq, Charge: c})
	return id
}

func (s *Simulator) plantLocked(kind string, t *simTask, lineID string) {
	s.planted = append(s.planted, vendorapi.BillFault{Kind: kind, TaskID: t.ID, IdempotencyKey: t.IdempotencyKey, LineID: lineID})
}

// chargeLocked bills a task just accepted, planting the bill faults the
// settings draw for it. One draw per accepted task, whatever the settings,
// so the bill faults depend only on the seed and the order of acceptance.
func (s *Simulator) chargeLocked(t *simTask, at time.Time) {
	u, f := s.billRng.Float64(), s.faults
	charge := paidvendor.Charge{TaskID: t.ID, IdempotencyKey: t.IdempotencyKey, Amount: t.Cost.Amount, Currency: t.Cost.Currency, At: at}
	switch {
	case u < f.BillDropCharge:
		// The line is numbered all the same, so the fault names it.
		_, id := s.nextLineLocked()
		s.plantLocked(vendorapi.BillFaultMissing, t, id)
	case u < f.BillDropCharge+f.BillWrongAmount:
		charge.Amount = wrongAmount(charge.Amount)
		s.plantLocked(vendorapi.BillFaultWrongAmount, t, s.appendLineLocked(charge))
	case u < f.BillDropCharge+f.BillWrongAmount+f.BillDoubleCharge:
		s.appendLineLocked(charge)
		s.plantLocked(vendorapi.BillFaultDouble, t, s.appendLineLocked(charge))
	case u < f.BillDropCharge+f.BillWrongAmount+f.BillDoubleCharge+f.BillRefund && charge.Amount > 0:
		s.appendLineLocked(charge)
		refund := charge
		refund.Refund = true
		s.plantLocked(vendorapi.BillFaultRefund, t, s.appendLineLocked(refund))
	default:
		s.appendLineLocked(charge)
	}
	if n := f.BillPhantomEvery; n > 0 && len(s.tasks)%n == 0 {
		s.phantomLocked(charge.Amount, charge.Currency, at)
	}
}

// wrongAmount is an amount no tolerance mistakes for the right one.
func wrongAmount(right int64) int64 {
	switch {
	case right == 0:
		return 100
	case right > math.MaxInt64/2:
		return right / 2
	}
	return 2 * right
}

func (s *Simulator) phantomLocked(amount int64, currency string, at time.Time) string {
	taskID, err := newSimTaskID()
	for err == nil && s.tasks[taskID] != nil {
		taskID, err = newSimTaskID()
	}
	if err != nil {
		panic(err) // crypto/rand does not fail on the platforms Go supports
	}
	phantom := &simTask{ID: taskID, IdempotencyKey: newPhantomKey()}
	id := s.appendLineLocked(paidvendor.Charge{TaskID: phantom.ID, IdempotencyKey: phantom.IdempotencyKey, Amount: amount, Currency: currency, At: at})
	s.plantLocked(vendorapi.BillFaultPhantom, phantom, id)
	return id
}

// newPhantomKey is a random UUID (version 4), the form of allot's keys, so
// that a phantom line looks like any other.
func newPhantomKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// PlantPhantomCharge bills a charge line for a task and idempotency key
// that never existed, and returns its line ID. It panics if amount is
// negative, currency is empty or the state file cannot be written: it is
// for tests, which must not go on with a fault that was not planted.
func (s *Simulator) PlantPhantomCharge(amount int64, currency string) string {
	if amount < 0 || currency == "" {
		panic(fmt.Sprintf("paidvendortest: simulator: PlantPhantomCharge(%d, %q): the amount must not be negative and the currency not empty", amount, currency))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	undo := s.billMarkLocked()
	id := s.phantomLocked(amount, currency, s.now().UTC())
	if err := s.saveLocked(); err != nil {
		undo()
		panic(err)
	}
	return id
}

// DropCharge takes the task's charge line off the bill: the task stays
// succeeded with its cost, and the bill never charges it (the missing
// charge). Plant it before the bill is read: a reader that read the line
// already keeps it.
func (s *Simulator) DropCharge(taskID string) error {
	return s.plant("DropCharge", taskID, func(t *simTask, i int) (string, error) {
		id := s.lines[i].ID
		s.lines = append(s.lines[:i], s.lines[i+1:]...)
		s.plantLocked(vendorapi.BillFaultMissing, t, id)
		return id, nil
	})
}

// SetChargeAmount makes the task's charge line bill amount instead of the
// task's cost (the wrong amount). Plant it before the bill is read.
func (s *Simulator) SetChargeAmount(taskID string, amount int64) error {
	return s.plant("SetChargeAmount", taskID, func(t *simTask, i int) (string, error) {
		if amount < 0 || amount == t.Cost.Amount {
			return "", fmt.Errorf("paidvendortest: simulator: SetChargeAmount(%s, %d): give a non-negative amount other than the task's cost %d", taskID, amount, t.Cost.Amount)
		}
		s.lines[i].Amount = amount
		s.plantLocked(vendorapi.BillFaultWrongAmount, t, s.lines[i].ID)
		return s.lines[i].ID, nil
	})
}

// DoubleCharge bills the task a second time, for the same idempotency key
// and the task's cost, and returns the second line's ID.
func (s *Simulator) DoubleCharge(taskID string) (string, error) {
	var id string
	err := s.plant("DoubleCharge", taskID, func(t *simTask, _ int) (string, error) {
		id = s.appendLineLocked(paidvendor.Charge{TaskID: t.ID, IdempotencyKey: t.IdempotencyKey, Amount: t.Cost.Amount, Currency: t.Cost.Currency, At: s.now().UTC()})
		s.plantLocked(vendorapi.BillFaultDouble, t, id)
		return id, nil
	})
	return id, err
}

// Refund bills a refund of amount (positive, in the task's currency) for
// the task, and returns the refund line's ID.
func (s *Simulator) Refund(taskID string, amount int64) (string, error) {
	var id string
	err := s.plant("Refund", taskID, func(t *simTask, _ int) (string, error) {
		if amount <= 0 {
			return "", fmt.Errorf("paidvendortest: simulator: Refund(%s, %d): a refund is a positive amount", taskID, amount)
		}
		id = s.appendLineLocked(paidvendor.Charge{TaskID: t.ID, IdempotencyKey: t.IdempotencyKey, Amount: amount, Currency: t.Cost.Currency, At: s.now().UTC(), Refund: true})
		s.plantLocked(vendorapi.BillFaultRefund, t, id)
		return id, nil
	})
	return id, err
}

// plant runs change on the task and its charge line (the first line that
// bills it), and saves; on any error the bill stays as it was.
func (s *Simulator) plant(op, taskID string, change func(t *simTask, line int) (string, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tasks[taskID]
	if t == nil {
		return fmt.Errorf("paidvendortest: simulator: %s: no task %.80q: plant bill faults on a task the simulator accepted", op, taskID)
	}
	line := -1
	for i, l := range s.lines {
		if l.TaskID == taskID && !l.Refund {
			line = i
			break
		}
	}
	if line < 0 {
		return fmt.Errorf("paidvendortest: simulator: %s: task %s has no charge line (dropped already): plant one fault per task", op, taskID)
	}
	// A planted fault may change a line in place: keep a copy to put back.
	saved, undoAppends := append([]simLine(nil), s.lines...), s.billMarkLocked()
	undo := func() { undoAppends(); s.lines = saved }
	if _, err := change(t, line); err != nil {
		undo()
		return err
	}
	if err := s.saveLocked(); err != nil {
		undo()
		return err
	}
	return nil
}

// BillFaults returns every bill fault planted, in the order planted.
func (s *Simulator) BillFaults() []vendorapi.BillFault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]vendorapi.BillFault{}, s.planted...)
}

// handleCharges serves one page of the bill: the lines after the cursor
// (a line's sequence number), at most limit of them.
func (s *Simulator) handleCharges(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := pageLimit(w, q.Get(vendorapi.LimitParam), vendorapi.DefaultChargesLimit, vendorapi.MaxChargesLimit)
	if !ok {
		return
	}
	page, ok := s.pageAfter(q.Get(vendorapi.AfterParam), limit)
	if !ok {
		writeBadCursor(w, q.Get(vendorapi.AfterParam))
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// pageLimit is a list's page size from its limit parameter: def for none,
// at most most; false (and a 400 written) for one that is not a positive
// whole number.
func pageLimit(w http.ResponseWriter, raw string, def, most int) (int, bool) {
	if raw == "" {
		return def, true
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n <= 0 {
		writeError(w, http.StatusBadRequest, vendorapi.CodeBadLimit, fmt.Sprintf("limit %.40q is not a positive whole number: give 1 to %d, or none for %d", raw, most, def))
		return 0, false
	}
	return min(n, most), true
}

// cursorSeq is the sequence number a list's cursor names ("" is 0, the
// start); false for one not given out (above last, or not a number).
func cursorSeq(after string, last int64) (int64, bool) {
	if after == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(after, 10, 64)
	return n, err == nil && n >= 0 && strconv.FormatInt(n, 10) == after && n <= last
}

func writeBadCursor(w http.ResponseWriter, after string) {
	writeError(w, http.StatusBadRequest, vendorapi.CodeBadCursor, fmt.Sprintf("cursor %.40q is not one this vendor gave out: send the next_cursor of a page, or no cursor to read from the start", after))
}

// pageAfter is the page of at most limit lines after the cursor; false if
// the cursor is not a sequence number given out.
func (s *Simulator) pageAfter(after string, limit int) (vendorapi.ChargesPage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceAndSaveLocked()
	from, ok := cursorSeq(after, s.lastSeq)
	if !ok {
		return vendorapi.ChargesPage{}, false
	}
	i := sort.Search(len(s.lines), func(i int) bool { return s.lines[i].seq > from })
	end := min(i+limit, len(s.lines))
	page := vendorapi.ChargesPage{Charges: wireLines(s.lines[i:end]), NextCursor: after, HasMore: end < len(s.lines), Account: s.account}
	if end > i {
		page.NextCursor = strconv.FormatInt(s.lines[end-1].seq, 10)
	}
	return page, true
}

func (s *Simulator) handleBillFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, vendorapi.BillFaults{Faults: s.BillFaults()})
}
