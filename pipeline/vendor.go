package pipeline

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Vendor adapters: how allot reaches a vendor. allot keeps the protocol
// around every call (intent, submit, reference, look-up before any resend,
// park), whatever the adapter.
const (
	// AdapterHTTP is allot's own vendor HTTP API (paidvendor.HTTPClient).
	AdapterHTTP = "http"
	// AdapterGo is a Go adapter registered in a custom worker under the
	// vendor's name (app.WorkerConfig.Vendors).
	AdapterGo = "go"
	// AdapterActivity calls activities of a worker in any language on the
	// vendor's task queue: submit, look up, status, fetch.
	AdapterActivity = "activity"
)

// DefaultVendor is the vendor of paid and effect steps that name none: the
// worker's ALLOT_VENDOR_URL with ALLOT_VENDOR_API_KEY(_FILE).
const DefaultVendor = "default"

// Vendor is a [[vendor]] of the pipeline file. Its API key never appears in
// the file: api_key_env names an environment variable, api_key_file a file,
// each read by the worker when a call needs it.
type Vendor struct {
	Name       string `toml:"name" json:"name"`
	Adapter    string `toml:"adapter" json:"adapter"`
	URL        string `toml:"url" json:"url,omitempty"`
	APIKeyEnv  string `toml:"api_key_env" json:"api_key_env,omitempty"`
	APIKeyFile string `toml:"api_key_file" json:"api_key_file,omitempty"`
	// TaskQueue and Activities are for the activity adapter: the queue
	// the vendor's worker polls and its activity types. Lookup is
	// optional: without it an unknown outcome parks the episode.
	TaskQueue  string           `toml:"task_queue" json:"task_queue,omitempty"`
	Activities VendorActivities `toml:"activities" json:"activities,omitzero"`
	// Timeout bounds one call (default 30s).
	Timeout string `toml:"timeout" json:"timeout,omitempty"`
	// VendorLimits are its controls (vendor_limits.go).
	VendorLimits
	// VendorBill is how its bill is reconciled (vendor_bill.go).
	VendorBill
	// VendorBatch is how its batches are driven (vendor_batch.go).
	VendorBatch
}

// secretKeys are settings a [[vendor]] might be given its key with, which
// the file never takes.
var secretKeys = []string{"api_key", "apikey", "key", "token", "secret"}

// keyInFile refuses a [[vendor]] that carries its API key in the file
// (one of the unknown keys undecoded), naming the vendor and the two
// settings that say where the key is read instead; nil if none does.
func keyInFile(data []byte, undecoded []toml.Key) error {
	for _, k := range undecoded {
		if len(k) != 2 || k[0] != "vendor" || !slices.Contains(secretKeys, k[1]) {
			continue
		}
		// The key's path does not say which [[vendor]] it is in.
		var raw struct {
			Vendor []map[string]any `toml:"vendor"`
		}
		name := "?"
		if _, err := toml.Decode(string(data), &raw); err == nil {
			for _, v := range raw.Vendor {
				if _, ok := v[k[1]]; ok {
					name, _ = v["name"].(string)
					break
				}
			}
		}
		return fmt.Errorf("vendor %q: %s: an API key never goes in the pipeline file, which is read by everyone who reads the pipelines (and ends up in backups and diffs): name where the worker reads it instead, api_key_env = \"VAR\" (an environment variable) or api_key_file = \"/run/secrets/NAME\" (a file), and remove %s", name, k[1], k[1])
	}
	return nil
}

// VendorActivities name the activity adapter's activity types.
type VendorActivities struct {
	Submit string `toml:"submit" json:"submit,omitempty"`
	Lookup string `toml:"lookup" json:"lookup,omitempty"`
	Status string `toml:"status" json:"status,omitempty"`
	Fetch  string `toml:"fetch" json:"fetch,omitempty"`
	// Quote is optional: the price of a task before it is sent
	// (ActivitySubmitRequest -> paidvendor.Cost), which a budget reserves
	// instead of the step's max_cost.
	Quote string `toml:"quote" json:"quote,omitempty"`
}

// DefaultVendorTimeout bounds one call to a vendor that names no timeout.
const DefaultVendorTimeout = 30 * time.Second

// CallTimeout is the vendor's timeout per call.
func (v Vendor) CallTimeout() time.Duration {
	if d, err := time.ParseDuration(v.Timeout); err == nil && d > 0 {
		return d
	}
	return DefaultVendorTimeout
}

func (v *Vendor) normalize() error {
	if !namePattern.MatchString(v.Name) {
		return fmt.Errorf("vendor name %q is invalid: use 1-63 lowercase letters, digits and '-', starting with a letter or digit (pattern %s)", v.Name, namePattern)
	}
	if err := v.VendorLimits.check(); err != nil {
		return fmt.Errorf("vendor %q: %w", v.Name, err)
	}
	if err := v.VendorBill.check(); err != nil {
		return fmt.Errorf("vendor %q: %w", v.Name, err)
	}
	if err := v.VendorBatch.check(); err != nil {
		return fmt.Errorf("vendor %q: %w", v.Name, err)
	}
	if v.Name == DefaultVendor {
		return v.normalizeDefault()
	}
	if v.Adapter == "" {
		v.Adapter = AdapterHTTP
	}
	if v.APIKeyEnv != "" && v.APIKeyFile != "" {
		return fmt.Errorf("vendor %q: give api_key_env or api_key_file, not both", v.Name)
	}
	switch v.Adapter {
	case AdapterHTTP:
		u, err := url.Parse(v.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return fmt.Errorf("vendor %q: url %q: give the vendor API's base URL without credentials, e.g. \"https://api.vendor.example\"", v.Name, v.URL)
		}
		if v.APIKeyEnv == "" && v.APIKeyFile == "" {
			return fmt.Errorf("vendor %q: name where its API key comes from: api_key_env = \"VAR\" or api_key_file = \"/path\" (never the key itself)", v.Name)
		}
		if v.TaskQueue != "" || v.Activities != (VendorActivities{}) {
			return fmt.Errorf("vendor %q: task_queue and activities are for adapter = \"activity\"", v.Name)
		}
	case AdapterGo:
		if v.URL != "" || v.TaskQueue != "" || v.Activities != (VendorActivities{}) {
			return fmt.Errorf("vendor %q: a go adapter is configured in the worker that registers it: remove url, task_queue and activities", v.Name)
		}
	case AdapterActivity:
		if v.TaskQueue == "" || v.Activities.Submit == "" {
			return fmt.Errorf("vendor %q: an activity adapter needs task_queue and activities.submit (and activities.status and fetch for paid steps)", v.Name)
		}
		if v.URL != "" || v.APIKeyEnv != "" || v.APIKeyFile != "" {
			return fmt.Errorf("vendor %q: an activity adapter's worker holds its own credentials: remove url and api keys", v.Name)
		}
		if v.VendorBatch != (VendorBatch{}) {
			return fmt.Errorf("vendor %q: an activity adapter takes no batches: remove batch_poll_every, batch_list_lag and batch_max_queued_items", v.Name)
		}
	default:
		return fmt.Errorf("vendor %q: adapter %q is unknown: use %q, %q or %q", v.Name, v.Adapter, AdapterHTTP, AdapterGo, AdapterActivity)
	}
	if v.Timeout != "" {
		if _, err := positive("timeout", v.Timeout); err != nil {
			return fmt.Errorf("vendor %q: %w", v.Name, err)
		}
	}
	return nil
}

// checkVendors refuses a paid or effect step that names an unknown vendor,
// or a paid step on an activity adapter without status and fetch.
func (s *Set) checkVendors() error {
	for _, name := range s.names {
		p := s.byName[name]
		for _, st := range p.Steps {
			if st.Batch {
				vendor := cmp.Or(st.Vendor, DefaultVendor)
				if q := s.Batching(vendor).BatchMaxQueuedItems; q > 0 && st.BatchMaxItemsOrDefault() > q {
					return fmt.Errorf("pipeline %q: paid step %q closes batches at %d items, but vendor %q holds at most %d in its batches at once (batch_max_queued_items): such a batch would never be created; set batch_max_items to at most %d",
						p.Name, st.Name, st.BatchMaxItemsOrDefault(), vendor, q, q)
				}
			}
			if !st.Kind.Remote() || st.Vendor == "" || st.Vendor == DefaultVendor {
				continue
			}
			v, ok := s.vendors[st.Vendor]
			if !ok {
				return fmt.Errorf("pipeline %q: step %q names vendor %q, which is not defined: add a [[vendor]] named %q (known: %s)",
					p.Name, st.Name, st.Vendor, st.Vendor, strings.Join(s.VendorNames(), ", "))
			}
			if st.Batch && v.Adapter == AdapterActivity {
				return fmt.Errorf("pipeline %q: paid step %q is in batch mode but vendor %q has an activity adapter, which takes no batches: use an http or go adapter, or remove batch = true", p.Name, st.Name, v.Name)
			}
			if st.Kind == Paid && v.Adapter == AdapterActivity && (v.Activities.Status == "" || v.Activities.Fetch == "") {
				return fmt.Errorf("pipeline %q: paid step %q uses vendor %q, whose activity adapter has no activities.status or activities.fetch: a paid result is polled and fetched", p.Name, st.Name, v.Name)
			}
		}
	}
	return nil
}

// Vendor returns the named vendor; ok is false for an unknown name and for
// the default vendor, which is the worker's to configure.
func (s *Set) Vendor(name string) (Vendor, bool) {
	v, ok := s.vendors[name]
	return v, ok
}

// VendorNames lists the defined vendors, sorted.
func (s *Set) VendorNames() []string {
	var names []string
	for n := range s.vendors {
		names = append(names, n)
	}
	sortStrings(names)
	return names
}
