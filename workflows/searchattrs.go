package workflows

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RegisterResult says which search attributes were added and which were
// already there.
type RegisterResult struct {
	Namespace string   `json:"namespace"`
	Added     []string `json:"added"`
	Existing  []string `json:"existing"`
}

// EnsureSearchAttributes registers allot's search attributes
// (SearchAttributeTypes) in a namespace; see RegisterSearchAttributes.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) (RegisterResult, error) {
	return RegisterSearchAttributes(ctx, c.OperatorService(), namespace, SearchAttributeTypes())
}

// registerPoll is how often RegisterSearchAttributes looks again while the
// server settles or the new attributes are not listed yet.
const registerPoll = 200 * time.Millisecond

// RegisterSearchAttributes makes sure the namespace has every attribute of
// want with its type. It adds the missing ones through the operator service
// and waits until the namespace lists them; errors a starting server gives
// (unavailable, namespace not found yet) are retried until ctx ends. An
// attribute registered with another type is an error naming the fix: it
// cannot be changed in place. It is idempotent: this is the one place allot
// registers search attributes (starter setup, the dev server and the tests
// all come here).
func RegisterSearchAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string, want map[string]enumspb.IndexedValueType) (RegisterResult, error) {
	out := RegisterResult{Namespace: namespace, Added: []string{}, Existing: []string{}}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	added := false
	for {
		have, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
		if err == nil {
			missing := map[string]enumspb.IndexedValueType{}
			var missingNames []string
			for _, name := range names {
				got, ok := have.GetCustomAttributes()[name]
				switch {
				case !ok:
					missing[name] = want[name]
					missingNames = append(missingNames, name)
				case got != want[name]:
					return out, fmt.Errorf("search attribute %s is registered as %s in namespace %q, but allot needs %s: remove it with `temporal operator search-attribute remove --namespace %s --name %s` and register it again",
						name, got, namespace, want[name], namespace, name)
				}
			}
			if len(missing) == 0 {
				for _, name := range names {
					if !contains(out.Added, name) {
						out.Existing = append(out.Existing, name)
					}
				}
				return out, nil
			}
			if !added {
				_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing})
				if err == nil || status.Code(err) == codes.AlreadyExists {
					added, err = true, nil
					out.Added = missingNames
				}
			}
		}
		if err != nil && !settling(err) {
			return out, fmt.Errorf("register search attributes %s in namespace %q: %w", strings.Join(names, ", "), namespace, err)
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("register search attributes in namespace %q: %w (last: %v)", namespace, ctx.Err(), err)
		case <-time.After(registerPoll):
		}
	}
}

// settling tells the errors of a server that is still starting up, or of a
// namespace or attribute change that has not spread yet.
func settling(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.NotFound, codes.Internal:
		return true
	}
	return false
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
