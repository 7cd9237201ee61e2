package pipeline

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"allot"
)

// DefaultConfig is the embedded pipeline file used when none is given. It is
// also the documented example of the format.
//
//go:embed pipelines.toml
var DefaultConfig []byte

// Set is the validated collection of pipelines a worker or starter knows.
type Set struct {
	byName  map[string]*Pipeline
	names   []string
	vendors map[string]Vendor
	budgets []Budget
	// source names where the set was read from, for errors that send
	// the reader to the file (PipelineNotFound).
	source string
	// defaultLimits are the default vendor's controls (vendor_limits.go).
	defaultLimits VendorLimits
	// defaultBill is how the default vendor's bill is reconciled.
	defaultBill VendorBill
	// defaultBatch is how the default vendor's batches are driven.
	defaultBatch VendorBatch
}

type file struct {
	Vendors   []Vendor   `toml:"vendor"`
	Pipelines []Pipeline `toml:"pipeline"`
	Budgets   []Budget   `toml:"budget"`
}

// EmbeddedSource is the source name of the embedded default file.
const EmbeddedSource = "embedded default"

// Load reads a pipeline file; an empty path means the embedded default.
func Load(path string) (*Set, error) {
	if path == "" {
		return Parse(DefaultConfig, EmbeddedSource)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &allot.Error{Type: allot.InvalidInput, Err: err,
			Message: fmt.Sprintf("read pipeline file: %v (set ALLOT_PIPELINES or --pipelines to a readable TOML file, or leave it empty for the embedded default)", err)}
	}
	s, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	// Relative command paths start from the file's directory.
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("pipeline file %s: %w", path, err)
	}
	for _, p := range s.byName {
		p.dir = dir
	}
	return s, nil
}

// Parse decodes and validates pipeline definitions in TOML. Unknown keys are
// errors, so a typo never silently falls back to a default. A refused file
// is an allot.Error of type InvalidInput, whose message names the file, the
// setting and the fix.
func Parse(data []byte, source string) (*Set, error) {
	s, err := parse(data, source)
	if err != nil {
		return nil, &allot.Error{Type: allot.InvalidInput, Message: err.Error(), Err: err}
	}
	return s, nil
}

func parse(data []byte, source string) (*Set, error) {
	var f file
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&f)
	if err != nil {
		if explained := moneyTypeError(data, source, err); explained != err {
			return nil, explained
		}
		if explained := explainTypeError(data, source, err); explained != err {
			return nil, explained
		}
		return nil, fmt.Errorf("pipeline file %s: %w", source, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		if err := keyInFile(data, undecoded); err != nil {
			return nil, fmt.Errorf("pipeline file %s: %w", source, err)
		}
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = explainUnknownKey(data, k)
		}
		return nil, fmt.Errorf("pipeline file %s: unknown key %s (pipeline/pipelines.toml documents every setting)", source, strings.Join(keys, "; unknown key "))
	}
	if err := explicitZeros(data); err != nil {
		return nil, fmt.Errorf("pipeline file %s: %w", source, err)
	}
	// Settings are spelt exactly: the decoder also takes "Name" for name,
	// and of two spellings of one setting keeps the one it meets last,
	// which varies from run to run. Params are the step's own names.
	for _, k := range md.Keys() {
		for i, part := range k {
			if i > 0 && k[i-1] == "params" {
				break
			}
			if part != strings.ToLower(part) {
				return nil, fmt.Errorf("pipeline file %s: key %s: write the setting %q in lowercase, as in pipeline/pipelines.toml", source, k, strings.ToLower(part))
			}
		}
	}
	if len(f.Pipelines) == 0 {
		return nil, fmt.Errorf("pipeline file %s defines no pipelines: add a [[pipeline]] table", source)
	}
	s := &Set{byName: map[string]*Pipeline{}, vendors: map[string]Vendor{}, source: source}
	seenDefault := false
	for i := range f.Vendors {
		v := f.Vendors[i]
		if err := v.normalize(); err != nil {
			return nil, fmt.Errorf("pipeline file %s: %w", source, err)
		}
		if _, dup := s.vendors[v.Name]; dup || (v.Name == DefaultVendor && seenDefault) {
			return nil, fmt.Errorf("pipeline file %s: vendor %q is defined twice", source, v.Name)
		}
		if v.Name == DefaultVendor {
			// Settings of the worker's default vendor, not a vendor of
			// its own (Limits).
			s.defaultLimits, s.defaultBill, s.defaultBatch, seenDefault = v.VendorLimits, v.VendorBill, v.VendorBatch, true
			continue
		}
		s.vendors[v.Name] = v
	}
	for i := range f.Pipelines {
		p := f.Pipelines[i]
		if err := p.normalize(); err != nil {
			return nil, fmt.Errorf("pipeline file %s: %w", source, err)
		}
		if _, dup := s.byName[p.Name]; dup {
			return nil, fmt.Errorf("pipeline file %s: pipeline %q is defined twice", source, p.Name)
		}
		s.byName[p.Name] = &p
		s.names = append(s.names, p.Name)
	}
	sort.Strings(s.names)
	if err := s.checkVendors(); err != nil {
		return nil, fmt.Errorf("pipeline file %s: %w", source, err)
	}
	for i := range f.Budgets {
		b := f.Budgets[i]
		if err := b.normalize(); err != nil {
			return nil, fmt.Errorf("pipeline file %s: %w", source, err)
		}
		s.budgets = append(s.budgets, b)
	}
	if err := s.checkBudgets(); err != nil {
		return nil, fmt.Errorf("pipeline file %s: %w", source, err)
	}
	if err := s.checkExecEnv(); err != nil {
		return nil, fmt.Errorf("pipeline file %s: %w", source, err)
	}
	return s, nil
}

func sortStrings(xs []string) { sort.Strings(xs) }

// checkExecEnv refuses an exec step whose env names a vendor's key
// variable: keys reach only the paid activities (invariant 11).
func (s *Set) checkExecEnv() error {
	for _, name := range s.names {
		for _, st := range s.byName[name].Steps {
			for _, env := range st.Env {
				for _, vname := range s.VendorNames() {
					if v := s.vendors[vname]; v.APIKeyEnv == env {
						return fmt.Errorf("pipeline %q: step %q: env names %s, the API key of vendor %q: vendor keys never reach exec steps (invariant 11); remove it, and give the step its own credential under another name if it needs one",
							name, st.Name, env, vname)
					}
				}
			}
		}
	}
	return nil
}

// Get returns the named pipeline, or an error naming the known ones.
func (s *Set) Get(name string) (*Pipeline, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	p, ok := s.byName[name]
	if !ok {
		return nil, &UnknownError{Name: name, Known: s.names, Source: s.source}
	}
	return p, nil
}

// WithAutoApprove is a copy of the set in which every pipeline passes its
// approval steps by itself: for demos, never for real work.
func (s *Set) WithAutoApprove() *Set {
	out := &Set{byName: map[string]*Pipeline{}, names: s.Names(), vendors: s.vendors, budgets: s.budgets, source: s.source, defaultLimits: s.defaultLimits, defaultBill: s.defaultBill, defaultBatch: s.defaultBatch}
	for name, p := range s.byName {
		cp := *p
		cp.AutoApprove = true
		out.byName[name] = &cp
	}
	return out
}

// StallAfter is the named pipeline's stall_after, or DefaultStallAfter for
// a pipeline the set does not define (one that exists only in the ledger).
func (s *Set) StallAfter(name string) time.Duration {
	if p, ok := s.byName[name]; ok {
		return p.StallAfterDuration()
	}
	return DefaultStallAfter
}

// Names lists the pipeline names, sorted.
func (s *Set) Names() []string { return append([]string(nil), s.names...) }

// UnknownError says a pipeline name is valid but not defined in the
// pipeline file Source (a path, or EmbeddedSource).
type UnknownError struct {
	Name   string
	Known  []string
	Source string
}

// ErrUnknownPipeline is what every UnknownError is (errors.Is), typed
// PipelineNotFound.
var ErrUnknownPipeline = &allot.Error{Type: allot.PipelineNotFound, Message: "pipeline not defined"}

func (e *UnknownError) Unwrap() error { return ErrUnknownPipeline }

func (e *UnknownError) Error() string {
	where := "the pipeline file"
	switch e.Source {
	case "":
	case EmbeddedSource:
		// A worker or starter on the embedded file was most likely
		// meant to read the user's own.
		where = "the embedded default pipeline file (no ALLOT_PIPELINES or --pipelines was given)"
	default:
		where = "the pipeline file " + e.Source
	}
	return fmt.Sprintf("pipeline %q is not defined in %s: known pipelines are %s (add it to that file, or point ALLOT_PIPELINES or --pipelines at the file that defines it)", e.Name, where, strings.Join(e.Known, ", "))
}
