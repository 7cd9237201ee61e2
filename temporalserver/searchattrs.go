package temporalserver

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/api/adminservice/v1"
	"go.temporal.io/server/common/searchattribute/sadefs"
	"go.temporal.io/server/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	pollInterval = 200 * time.Millisecond
	callTimeout  = 5 * time.Second

	// namespaceRefresh is how often every service reloads namespaces
	// (system.namespaceCacheRefreshInterval, set in dynamicConfig). Search
	// attribute aliases live on the namespace, so after adding some, Start
	// waits this long (plus a margin) for history and matching to see them.
	namespaceRefresh = time.Second
)

// validateSearchAttributes rejects what the server would reject later with a
// less helpful message.
func validateSearchAttributes(attrs map[string]enumspb.IndexedValueType) error {
	for name, typ := range attrs {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("temporalserver: empty search attribute name")
		}
		if sadefs.IsReserved(name) {
			return fmt.Errorf("temporalserver: search attribute %q is a reserved (system) name", name)
		}
		if _, ok := enumspb.IndexedValueType_name[int32(typ)]; !ok || typ == enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED {
			return fmt.Errorf("temporalserver: search attribute %q has no valid type (%v)", name, typ)
		}
	}
	return nil
}

// waitReady waits until the frontend answers, every service has joined the
// membership ring (the frontend answers long before matching, say, can take
// work) and the namespace is known.
func (s *Server) waitReady(ctx context.Context) error {
	var last error
	for {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		err := s.readyOnce(callCtx)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		if sleepCtx(ctx, pollInterval) != nil {
			return fmt.Errorf("temporalserver: server at %s not ready: %w (last: %v)", s.frontendAddr, ctx.Err(), last)
		}
	}
}

func (s *Server) readyOnce(ctx context.Context) error {
	wf := workflowservice.NewWorkflowServiceClient(s.conn)
	if _, err := wf.GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{}); err != nil {
		return err
	}
	cluster, err := adminservice.NewAdminServiceClient(s.conn).DescribeCluster(ctx, &adminservice.DescribeClusterRequest{})
	if err != nil {
		return err
	}
	members := map[string]int32{}
	for _, ring := range cluster.GetMembershipInfo().GetRings() {
		members[ring.GetRole()] = ring.GetMemberCount()
	}
	for _, role := range temporal.DefaultServices {
		if members[role] < 1 {
			return fmt.Errorf("service %s has not joined the membership ring yet", role)
		}
	}
	_, err = wf.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.namespace})
	return err
}

// registerSearchAttributes makes sure every wanted custom search attribute
// exists in the namespace with the wanted type: it adds the missing ones
// through the operator service (already existing is fine) and polls until
// they are listed.
func (s *Server) registerSearchAttributes(ctx context.Context, want map[string]enumspb.IndexedValueType) error {
	if len(want) == 0 {
		return nil
	}
	op := operatorservice.NewOperatorServiceClient(s.conn)
	added := false
	var last error
	for {
		missing, err := s.missingSearchAttributes(ctx, op, want)
		if err == nil && len(missing) == 0 {
			break
		}
		if err == nil && !added {
			callCtx, cancel := context.WithTimeout(ctx, callTimeout)
			_, err = op.AddSearchAttributes(callCtx, &operatorservice.AddSearchAttributesRequest{
				SearchAttributes: missing,
				Namespace:        s.namespace,
			})
			cancel()
			if err == nil || status.Code(err) == codes.AlreadyExists {
				added, err = true, nil
			}
		}
		if err != nil {
			if !transient(err) {
				return fmt.Errorf("temporalserver: registering search attributes in %q: %w", s.namespace, err)
			}
			last = err
		} else {
			last = fmt.Errorf("not listed yet: %s", strings.Join(sortedKeys(missing), ", "))
		}
		if sleepCtx(ctx, pollInterval) != nil {
			return fmt.Errorf("temporalserver: search attributes in %q not ready: %w (last: %v)", s.namespace, ctx.Err(), last)
		}
	}
	if added {
		if err := sleepCtx(ctx, namespaceRefresh+500*time.Millisecond); err != nil {
			return fmt.Errorf("temporalserver: waiting for search attributes to spread: %w", err)
		}
	}
	return nil
}

// missingSearchAttributes lists the wanted attributes the namespace lacks;
// one registered under another type is an error that waiting cannot fix.
func (s *Server) missingSearchAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, want map[string]enumspb.IndexedValueType) (map[string]enumspb.IndexedValueType, error) {
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := op.ListSearchAttributes(callCtx, &operatorservice.ListSearchAttributesRequest{Namespace: s.namespace})
	if err != nil {
		return nil, err
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range want {
		have, ok := resp.GetCustomAttributes()[name]
		if !ok {
			missing[name] = typ
			continue
		}
		if have != typ {
			return nil, status.Errorf(codes.FailedPrecondition,
				"search attribute %q is registered as %v in namespace %q, want %v", name, have, s.namespace, typ)
		}
	}
	return missing, nil
}

// transient tells errors worth retrying while the server settles.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted,
		codes.Aborted, codes.NotFound, codes.Internal:
		return true
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
