package activities

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"allot"
	"allot/paidvendor"
	"allot/pipeline"
)

// Vendor reaches one named vendor of the pipeline file through an adapter
// this worker calls itself (http, or a Go adapter a custom worker
// registered). Activity adapters are the Episode's to call.
type Vendor struct {
	// Credentials is where its API key comes from; nil if it has none.
	Credentials paidvendor.CredentialsSource
	// New builds its adapter for the key.
	New paidvendor.Factory
}

// submitter builds the adapter of a paid or effect step's vendor: the
// default vendor (Credentials and NewVendor) or one of Vendors. The
// credentials are read here, only after the episode check, and only ever
// passed to the adapter.
func (a *Activities) submitter(ctx context.Context, in PaidTaskInput) (paidvendor.Submitter, error) {
	_, _, st, err := a.paidStep(ctx, in)
	if err != nil {
		return nil, err
	}
	return a.vendorFor(ctx, st.Vendor)
}

func (a *Activities) vendorFor(ctx context.Context, name string) (paidvendor.Submitter, error) {
	if name == "" || name == pipeline.DefaultVendor {
		if a.Credentials == nil || a.NewVendor == nil {
			return nil, nonRetryable(allot.VendorNotConfigured, "this worker has no default vendor configured: set %s (and %s or %s), or name a [[vendor]] in the step", paidvendor.EnvVendorURL, paidvendor.EnvVendorAPIKey, paidvendor.EnvVendorAPIKeyFile)
		}
		key, err := a.Credentials.VendorAPIKey(ctx)
		if err != nil {
			return nil, nonRetryable(allot.VendorNotConfigured, "%v", err)
		}
		c, err := a.NewVendor(key)
		if err != nil {
			return nil, nonRetryable(allot.VendorNotConfigured, "build the vendor client: %v", err)
		}
		return c, nil
	}
	v, ok := a.Vendors[name]
	if !ok || v.New == nil {
		return nil, nonRetryable(allot.VendorNotConfigured, "this worker has no adapter for vendor %q: a go adapter is registered with app.WorkerConfig.Vendors in the worker that serves the pipeline", name)
	}
	s, err := v.build(ctx, name)
	if err != nil {
		return nil, nonRetryable(allot.VendorNotConfigured, "%v", err)
	}
	return s, nil
}

// build reads the vendor's key, if it has a source, and builds its adapter
// with it; the error names the vendor.
func (v Vendor) build(ctx context.Context, name string) (paidvendor.Submitter, error) {
	key := ""
	if v.Credentials != nil {
		var err error
		if key, err = v.Credentials.VendorAPIKey(ctx); err != nil {
			return nil, fmt.Errorf("vendor %s: %w", name, err)
		}
	}
	s, err := v.New(key)
	if err != nil {
		return nil, fmt.Errorf("vendor %s: build its adapter: %w", name, err)
	}
	return s, nil
}

// client is vendorFor for a paid step, whose tasks are polled and whose
// results are fetched.
func (a *Activities) client(ctx context.Context, name string) (paidvendor.Client, error) {
	s, err := a.vendorFor(ctx, name)
	if err != nil {
		return nil, err
	}
	c, ok := s.(paidvendor.Client)
	if !ok {
		return nil, nonRetryable(allot.VendorNotConfigured, "vendor %q's adapter only submits and looks up: a paid step's task is polled and its result fetched (Task and Result); use it for effect steps", name)
	}
	return c, nil
}

// String keeps a vendor's credentials out of fmt output.
func (v Vendor) String() string { return fmt.Sprintf("Vendor{credentials: %T}", v.Credentials) }

// VendorKeyOf is the key source the pipeline file names for v.
func VendorKeyOf(v pipeline.Vendor) paidvendor.VendorKey {
	return paidvendor.VendorKey{Vendor: v.Name, Env: v.APIKeyEnv, File: v.APIKeyFile}
}

// NamedVendors builds the [[vendor]]s of set that the worker calls itself:
// each http vendor on its URL, and each go vendor with the adapter
// registered under its name in adapters. Activity vendors need nothing
// here: the Episode calls their worker's activities. A go vendor without
// an adapter, and an adapter no go vendor names, are refused: either is a
// worker that would only fail when an episode reaches the step.
func NamedVendors(set *pipeline.Set, adapters map[string]paidvendor.Factory) (map[string]Vendor, error) {
	vendors := make(map[string]Vendor)
	for _, name := range set.VendorNames() {
		v, _ := set.Vendor(name)
		switch v.Adapter {
		case pipeline.AdapterHTTP:
			newClient := paidvendor.HTTPClientFactory(v.URL)
			vendors[name] = Vendor{Credentials: VendorKeyOf(v), New: func(key string) (paidvendor.Submitter, error) { return newClient(key) }}
		case pipeline.AdapterGo:
			f, ok := adapters[name]
			if !ok || f == nil {
				return nil, fmt.Errorf("vendor %q has adapter = \"go\", but this worker registered no adapter under that name: add it to app.WorkerConfig.Vendors[%q] (registered: %s)",
					name, name, strings.Join(slices.Sorted(maps.Keys(adapters)), ", "))
			}
			vendors[name] = Vendor{Credentials: VendorKeyOf(v), New: f}
		}
	}
	for name := range adapters {
		if v, ok := set.Vendor(name); !ok || v.Adapter != pipeline.AdapterGo {
			return nil, fmt.Errorf("this worker registers a Go vendor adapter %q, but the pipelines file has no [[vendor]] name = %q with adapter = \"go\": add one, or remove the registration", name, name)
		}
	}
	return vendors, nil
}

// CheckVendorKeys reads, at the worker's start, the API key of every
// vendor a paid or effect step of set uses and the worker calls itself:
// the named vendors of vendors (NamedVendors) that take a key, and the
// default vendor, which def is (nil when the worker has no ALLOT_VENDOR_URL).
// A key that cannot be read (a variable unset or empty, a file missing or
// unreadable) refuses the start with VendorNotConfigured, naming the vendor,
// where its key comes from and a step that uses it: otherwise the first
// paid episode would park only after writing its intent. The keys read are
// dropped: the paid activities read them again when they call. Activity
// adapters hold their own keys in their own workers.
func CheckVendorKeys(ctx context.Context, set *pipeline.Set, vendors map[string]Vendor, def *Vendor) error {
	for _, pname := range set.Names() {
		p, err := set.Get(pname)
		if err != nil {
			return err
		}
		for _, st := range p.Steps {
			if !st.Kind.Remote() {
				continue
			}
			user := fmt.Sprintf("%s step %q of pipeline %s", st.Kind, st.Name, p.Name)
			if st.Vendor == "" || st.Vendor == pipeline.DefaultVendor {
				if def == nil || def.Credentials == nil {
					return nonRetryable(allot.VendorNotConfigured, "the worker cannot start: the %s uses the default vendor, and this worker has none: set %s (or --vendor-url) to its API and its key in %s or %s, or name a [[vendor]] in the step",
						user, paidvendor.EnvVendorURL, paidvendor.EnvVendorAPIKey, paidvendor.EnvVendorAPIKeyFile)
				}
				if _, err := def.Credentials.VendorAPIKey(ctx); err != nil {
					return nonRetryable(allot.VendorNotConfigured, "the worker cannot start: the default vendor (%s), which the %s uses, has no readable key: %v", paidvendor.EnvVendorURL, user, err)
				}
				continue
			}
			v, ok := vendors[st.Vendor]
			if !ok || v.Credentials == nil {
				continue
			}
			if _, err := v.Credentials.VendorAPIKey(ctx); err != nil {
				return nonRetryable(allot.VendorNotConfigured, "the worker cannot start: %v (the %s uses vendor %s)", err, user, st.Vendor)
			}
		}
	}
	return nil
}

// VendorKeyEnv lists the environment variables the [[vendor]]s of set take
// their API keys from: exec steps are run without them (SecretEnv).
func VendorKeyEnv(set *pipeline.Set) []string {
	var names []string
	for _, name := range set.VendorNames() {
		if v, _ := set.Vendor(name); v.APIKeyEnv != "" {
			names = append(names, v.APIKeyEnv)
		}
	}
	return names
}

// ConfiguredCapabilities are what the pipeline file alone says the vendor
// v can do: an http vendor speaks allot's vendor API
// (paidvendor.HTTPCapabilities); an activity vendor is looked up by key
// only if it names a lookup activity, and promises nothing of its own
// vendor's key or bill (allot reads no bill through activities). A go
// vendor's are its adapter's, known only to the worker that registers it:
// ok is false (WorkerCapabilities).
func ConfiguredCapabilities(v pipeline.Vendor) (c allot.VendorCapabilities, ok bool) {
	switch v.Adapter {
	case pipeline.AdapterHTTP, "":
		return paidvendor.HTTPCapabilities, true
	case pipeline.AdapterActivity:
		c = allot.VendorCapabilities{Lookup: allot.LookupNone, Cost: allot.CostOnTask, Bill: allot.BillNone}
		if v.Activities.Lookup != "" {
			c.Lookup = allot.LookupByKey
		}
		return c, true
	}
	return allot.VendorCapabilities{}, false
}

// WorkerCapabilities are the capabilities of every named vendor of set as
// this worker acts on them, which it records in the ledger for `starter
// vendor show`: from the file for http and activity vendors, and from
// each go vendor's adapter (paidvendor.Capabilities), built with its key
// (CheckVendorKeys has read them all); the default vendor's when the
// worker has one (def). An adapter that declares what its methods cannot
// keep refuses the worker's start, naming the vendor.
func WorkerCapabilities(ctx context.Context, set *pipeline.Set, vendors map[string]Vendor, def *Vendor) (map[string]allot.VendorCapabilities, error) {
	out := map[string]allot.VendorCapabilities{}
	if def != nil {
		out[pipeline.DefaultVendor] = paidvendor.HTTPCapabilities
	}
	for _, name := range set.VendorNames() {
		v, _ := set.Vendor(name)
		if c, ok := ConfiguredCapabilities(v); ok {
			out[name] = c
			continue
		}
		w, ok := vendors[name]
		if !ok || w.New == nil {
			continue
		}
		s, err := w.build(ctx, name)
		if err != nil {
			return nil, nonRetryable(allot.VendorNotConfigured, "the worker cannot start: %v", err)
		}
		c, err := paidvendor.Capabilities(s)
		if err != nil {
			return nil, nonRetryable(allot.VendorNotConfigured, "the worker cannot start: vendor %s: %v", name, err)
		}
		out[name] = c
	}
	return out, nil
}

// declaresNoLookup reports whether s says its vendor cannot be asked about
// a lost submit: the look-up is then not sent at all.
func declaresNoLookup(s paidvendor.Submitter) bool {
	d, ok := s.(paidvendor.Describer)
	return ok && d.Capabilities().CannotBeAsked()
}
