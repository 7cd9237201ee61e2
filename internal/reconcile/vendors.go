package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"allot"
	"allot/activities"
	"allot/paidvendor"
	"allot/pipeline"
)

// Account is the name the ledger keeps a vendor's bill under: the
// vendor's name in the pipeline file, which outlives its API key and the
// spelling of its URL (docs/design.md, "Reconciling the vendor's bill").
// The vendor's own account ID, where its bill reports one, is kept with
// the bill, so a key of another account is refused, not mixed in.
func Account(vendor string) string { return "vendor:" + vendor }

// SameBill identifies the bill a vendor's URL (or a Go adapter's name) and
// API key read, without holding the key: vendors with the same URL and key
// read one bill, reconciled once under the first one's name. It is never
// stored, so a new key changes nothing kept.
func SameBill(url, key string) string {
	sum := sha256.Sum256([]byte("allot vendor bill\x00" + strings.TrimRight(url, "/") + "\x00" + key))
	return hex.EncodeToString(sum[:])
}

// VendorsInput is where the vendors' bills are read from.
type VendorsInput struct {
	Pipelines *pipeline.Set
	// DefaultURL and DefaultKey are the worker's default vendor
	// (ALLOT_VENDOR_URL and its key); "" when it has none.
	DefaultURL string
	DefaultKey paidvendor.CredentialsSource
	// Adapters are the worker's Go vendor adapters (app.WorkerConfig's
	// Vendors): one whose adapter implements paidvendor.BillReader is
	// reconciled.
	Adapters map[string]paidvendor.Factory
}

// Vendors lists the vendor accounts a paid step uses, each with its bill
// reader or why it has none. Vendors with the same URL and key are one
// account, listed once under the first name (Names holds them all).
// Vendors no paid step uses are left out: effect steps cost nothing.
func Vendors(ctx context.Context, in VendorsInput) []Vendor {
	paid := PaidVendors(in.Pipelines)
	var out []Vendor
	byBill := map[string]int{}
	add := func(v Vendor, bill string) {
		if i, ok := byBill[bill]; ok && bill != "" {
			out[i].Names = append(out[i].Names, v.Name)
			return
		}
		v.Names = []string{v.Name}
		v.Settings = in.Pipelines.Bill(v.Name)
		v.Account = Account(v.Name)
		if bill != "" {
			byBill[bill] = len(out)
		}
		out = append(out, v)
	}
	if paid[pipeline.DefaultVendor] {
		v := Vendor{Name: pipeline.DefaultVendor}
		var bill string
		switch {
		case in.DefaultURL == "":
			v.NotReconciled = "no URL: the worker has no ALLOT_VENDOR_URL"
		default:
			v.Bill, bill, v.NotReconciled = httpBill(ctx, in.DefaultURL, in.DefaultKey)
		}
		add(v, bill)
	}
	for _, name := range in.Pipelines.VendorNames() {
		if !paid[name] {
			continue
		}
		pv, _ := in.Pipelines.Vendor(name)
		v := Vendor{Name: name}
		var bill string
		switch pv.Adapter {
		case pipeline.AdapterHTTP:
			v.Bill, bill, v.NotReconciled = httpBill(ctx, pv.URL, activities.VendorKeyOf(pv))
		case pipeline.AdapterGo:
			v.Bill, bill, v.NotReconciled = goBill(ctx, name, pv, in.Adapters[name])
		default:
			v.NotReconciled = fmt.Sprintf("adapter %s has no bill reader: its vendor's worker does not list charges", pv.Adapter)
		}
		add(v, bill)
	}
	return out
}

func httpBill(ctx context.Context, url string, key paidvendor.CredentialsSource) (paidvendor.BillReader, string, string) {
	if key == nil {
		return nil, "", "no API key source"
	}
	k, err := key.VendorAPIKey(ctx)
	if err != nil {
		return nil, "", fmt.Sprintf("its API key: %v", err)
	}
	c, err := paidvendor.NewHTTPClient(url, k, nil)
	if err != nil {
		return nil, "", err.Error()
	}
	return c, SameBill(url, k), ""
}

func goBill(ctx context.Context, name string, pv pipeline.Vendor, f paidvendor.Factory) (paidvendor.BillReader, string, string) {
	if f == nil {
		return nil, "", "no Go adapter registered under its name"
	}
	key := ""
	if pv.APIKeyEnv != "" || pv.APIKeyFile != "" {
		k, err := activities.VendorKeyOf(pv).VendorAPIKey(ctx)
		if err != nil {
			return nil, "", fmt.Sprintf("its API key: %v", err)
		}
		key = k
	}
	s, err := f(key)
	if err != nil {
		return nil, "", fmt.Sprintf("its adapter: %v", err)
	}
	b, ok := s.(paidvendor.BillReader)
	if !ok {
		return nil, "", "its Go adapter does not implement paidvendor.BillReader"
	}
	return b, SameBill("go:"+name, key), ""
}

// PaidVendors are the vendors some paid step uses ("" counts as the
// default vendor).
func PaidVendors(set *pipeline.Set) map[string]bool {
	used := map[string]bool{}
	for _, name := range set.Names() {
		p, err := set.Get(name)
		if err != nil {
			continue
		}
		for _, st := range p.Steps {
			if st.Kind == allot.KindPaid {
				v := st.Vendor
				if v == "" {
					v = pipeline.DefaultVendor
				}
				used[v] = true
			}
		}
	}
	return used
}
