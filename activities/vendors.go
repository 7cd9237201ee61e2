package activities

import (
	"context"
	"fmt"

	"allot"
	"allot/paidvendor"
	"allot/pipeline"
)

// Vendor reaches one named vendor of the pipeline file through an adapter
// this worker calls itself (http, or a Go adapter a custom worker
// registered). Activity adapters are the Episode's to call.
type Vendor struct {
	// Credentials is where its API key comes from; nil if it has none.
	Credentials CredentialsSource
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
			return nil, nonRetryable(allot.VendorNotConfigured, "this worker has no default vendor configured: set %s (and %s or %s), or name a [[vendor]] in the step", EnvVendorURL, EnvVendorAPIKey, EnvVendorAPIKeyFile)
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
	key := ""
	if v.Credentials != nil {
		var err error
		if key, err = v.Credentials.VendorAPIKey(ctx); err != nil {
			return nil, nonRetryable(allot.VendorNotConfigured, "vendor %s: %v", name, err)
		}
	}
	s, err := v.New(key)
	if err != nil {
		return nil, nonRetryable(allot.VendorNotConfigured, "vendor %s: build its adapter: %v", name, err)
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
