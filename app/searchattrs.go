package app

import (
	"context"
	"fmt"
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"allot/workflows"
)

// EnsureSearchAttributesResult says which attributes were added and which
// were already there.
type EnsureSearchAttributesResult struct {
	Namespace string   `json:"namespace"`
	Added     []string `json:"added"`
	Existing  []string `json:"existing"`
}

// EnsureSearchAttributes registers allot's search attributes in a namespace,
// idempotently. An attribute registered with another type is an error: it
// cannot be changed in place.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) (EnsureSearchAttributesResult, error) {
	out := EnsureSearchAttributesResult{Namespace: namespace}
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return out, fmt.Errorf("list search attributes of namespace %q: %w", namespace, err)
	}
	want := workflows.SearchAttributeTypes()
	missing := map[string]enumspb.IndexedValueType{}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		typ := want[name]
		existing, ok := have.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = typ
			out.Added = append(out.Added, name)
		case existing != typ:
			return out, fmt.Errorf("search attribute %s is registered as %s in namespace %q, but allot needs %s: remove it with `temporal operator search-attribute remove --name %s` and run setup again",
				name, existing, namespace, typ, name)
		default:
			out.Existing = append(out.Existing, name)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	}); err != nil {
		return out, fmt.Errorf("add search attributes %v to namespace %q: %w", out.Added, namespace, err)
	}
	return out, nil
}
