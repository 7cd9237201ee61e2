package temporalserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/api/adminservice/v1"
	"go.temporal.io/server/common/searchattribute/sadefs"
	"go.temporal.io/server/temporal"

	"allot/workflows"
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
// exists in the namespace with the wanted type (a namespace created by this
// package got them at creation; one created earlier may lack some), and
// after adding any waits for every service to reload the namespace, so that
// they are usable as soon as Start returns.
func (s *Server) registerSearchAttributes(ctx context.Context, want map[string]enumspb.IndexedValueType) error {
	if len(want) == 0 {
		return nil
	}
	res, err := workflows.RegisterSearchAttributes(ctx, operatorservice.NewOperatorServiceClient(s.conn), s.namespace, want)
	if err != nil {
		return fmt.Errorf("temporalserver: %w", err)
	}
	if len(res.Added) > 0 {
		if err := sleepCtx(ctx, namespaceRefresh+500*time.Millisecond); err != nil {
			return fmt.Errorf("temporalserver: waiting for search attributes to spread: %w", err)
		}
	}
	return nil
}
