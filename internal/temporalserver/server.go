// Package temporalserver runs a complete Temporal server (frontend, history,
// matching and worker services) inside the current process, backed by the
// server's SQLite persistence, optionally with the Temporal Web UI.
//
// It is meant for one command on a fresh machine (the devserver main) and for
// integration tests: Start brings everything up on the configured ports,
// creates the namespace, registers custom search attributes and returns only
// once the frontend answers.
package temporalserver

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Defaults applied by Start to zero Config fields.
const (
	DefaultHost      = "127.0.0.1"
	DefaultPort      = 7233
	DefaultUIPort    = 8233
	DefaultNamespace = "default"

	// DBFileName is the SQLite file inside Config.DataDir.
	DBFileName = "temporal.db"

	// NamespaceRetention is the retention of closed workflows in a namespace
	// that Start creates. An existing namespace keeps its own setting.
	NamespaceRetention = 7 * 24 * time.Hour

	// FreePort asks for a free port chosen at start (Config.Port, Config.UIPort).
	FreePort = -1
)

const (
	// The cluster name and shard count are persisted on first start and can
	// never change for a given data file.
	clusterName      = "active"
	numHistoryShards = 1

	// defaultStartTimeout bounds Start when its context has no deadline.
	defaultStartTimeout = 2 * time.Minute

	// internalHost is where the history, matching and worker services and
	// the membership ring listen; only the frontend and the UI follow Host.
	internalHost = "127.0.0.1"
)

// Config configures Start and Run. The zero value is a usable in-memory
// server on the default ports.
type Config struct {
	// DataDir holds the SQLite file (DataDir/temporal.db), created with its
	// schema on first use and reused across restarts. "" keeps everything in
	// memory (tests).
	DataDir string
	// Host is the IP address the frontend and the UI listen on ("localhost"
	// is accepted and means 127.0.0.1). Default "127.0.0.1". With an
	// unspecified address ("0.0.0.0", "::") the server listens on all
	// interfaces and the addresses it reports use the loopback address.
	Host string
	// Port is the frontend gRPC port: 0 means DefaultPort (7233), FreePort
	// (-1) picks a free port.
	Port int
	// UIPort is the Web UI HTTP port: 0 means DefaultUIPort (8233), FreePort
	// (-1) picks a free port. Ignored when DisableUI is set.
	UIPort int
	// DisableUI runs the server without the Web UI.
	DisableUI bool
	// Namespace is created if missing (with NamespaceRetention). Default
	// "default".
	Namespace string
	// SearchAttributes are custom search attributes registered in Namespace
	// at every start; ones already registered with the same type are fine,
	// one registered with a different type is an error.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Logger receives the server's own log records at warn level and above
	// (the server is chatty below that). nil discards them.
	Logger *slog.Logger

	// TLS makes the frontend serve TLS, as a secured cluster or Temporal
	// Cloud does (tests of allot's connection settings). nil: plain gRPC.
	TLS *TLS
	// APIKey makes the frontend accept only calls that carry it, as
	// "authorization: Bearer <APIKey>" (what the SDK sends for an API key);
	// every other call is refused with PermissionDenied. "": no check.
	APIKey string
}

// TLS is the frontend's TLS: PEM-encoded certificate and key, and the CA
// its clients' certificates must be signed by.
type TLS struct {
	CertPEM, KeyPEM []byte
	// ClientCAPEM, when set, makes the frontend require a client
	// certificate signed by it (mutual TLS).
	ClientCAPEM []byte
}

// secured is whether clients of the frontend need credentials; the server's
// own services and Start then reach it through a plain internal frontend.
func (c Config) secured() bool { return c.TLS != nil || c.APIKey != "" }

// Server is a running embedded Temporal server.
type Server struct {
	frontendAddr string
	uiAddr       string
	namespace    string

	temporal  temporal.Server
	serverLog *slogLogger
	conn      *grpc.ClientConn
	ui        *uiServer
	store     *store

	stopOnce sync.Once
	stopErr  error
}

// FrontendAddress is the frontend gRPC address ("host:port") for SDK
// clients and the temporal CLI.
func (s *Server) FrontendAddress() string { return s.frontendAddr }

// UIAddress is the Web UI URL ("http://host:port"), or "" when the UI is
// disabled.
func (s *Server) UIAddress() string { return s.uiAddr }

// Namespace is the namespace Start created or found.
func (s *Server) Namespace() string { return s.namespace }

// settings is a Config with defaults applied and ports chosen.
type settings struct {
	cfg          Config
	bindIP       string // what the frontend and UI bind to
	dialHost     string // what clients dial
	port         int
	uiPort       int
	internal     [3]int // history, matching, worker gRPC ports
	membership   [4]int // frontend, history, matching, worker membership ports
	frontendAddr string
	// internalFrontend is the gRPC and membership ports of the internal
	// frontend (zero unless Config.secured) and internalAddr where it is.
	internalFrontend [2]int
	internalAddr     string
	uiURL            string
}

// Start brings up the server (and the UI unless disabled), waits until the
// frontend answers and the namespace and search attributes are ready, and
// returns. ctx bounds the start-up only; use Stop (or Run) to end the server.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}

	st, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	db, err := openStore(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		frontendAddr: st.frontendAddr,
		namespace:    st.cfg.Namespace,
		store:        db,
	}
	defer func() {
		if err != nil {
			if s.serverLog != nil {
				// Show what the server said, unless the caller gave up.
				s.serverLog.started(!errors.Is(err, context.Canceled))
			}
			if stopErr := s.Stop(); stopErr != nil {
				logger.Warn("temporalserver: stopping after a failed start", "error", stopErr)
			}
		}
	}()

	if err := db.createNamespace(st.cfg.Namespace, st.cfg.SearchAttributes); err != nil {
		return nil, err
	}

	s.serverLog = newSlogLogger(logger)
	srv, err := newTemporalServer(st, db, s.serverLog)
	if err != nil {
		return nil, err
	}
	if err := recoverFatal(srv.Start); err != nil {
		// A half-started server still has to be stopped.
		s.temporal = srv
		return nil, fmt.Errorf("temporalserver: starting the server: %w", err)
	}
	s.temporal = srv

	// A secured frontend wants credentials Start has not: it uses the
	// internal frontend, which answers the same calls.
	s.conn, err = grpc.NewClient(cmp.Or(st.internalAddr, st.frontendAddr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("temporalserver: connecting to the frontend: %w", err)
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	if err := s.registerSearchAttributes(ctx, st.cfg.SearchAttributes); err != nil {
		return nil, err
	}

	if !st.cfg.DisableUI {
		s.ui, err = startUI(ctx, st)
		if err != nil {
			return nil, err
		}
		s.uiAddr = st.uiURL
	}
	s.serverLog.started(false)
	return s, nil
}

// Stop stops the UI and the server and releases the data directory so that
// a later Start on the same DataDir works, in this process or another. It is
// idempotent: later calls return the first call's result.
//
// (The server's SQLite plugin never closes its connections: it keeps one
// per database in a process-wide pool. After Stop that connection is idle and
// holds no lock; a later Start on the same file in this process reuses it.)
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.ui != nil {
			errs = append(errs, s.ui.stop())
		}
		if s.conn != nil {
			_ = s.conn.Close()
		}
		if s.temporal != nil {
			s.serverLog.silence()
			if err := recoverFatal(s.temporal.Stop); err != nil {
				errs = append(errs, fmt.Errorf("temporalserver: stopping the server: %w", err))
			}
		}
		if s.store != nil {
			s.store.release()
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// Run starts the server, blocks until ctx is done, then stops it. It returns
// nil after a clean stop, also when ctx ends while the server is starting.
func Run(ctx context.Context, cfg Config) error {
	s, err := Start(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil // interrupted while starting; Start has cleaned up
		}
		return err
	}
	<-ctx.Done()
	return s.Stop()
}

// resolve applies defaults, validates, and reserves every port the server
// needs, so that a port already in use fails here with a clear error rather
// than deep inside the server.
func resolve(cfg Config) (*settings, error) {
	st := &settings{cfg: cfg}
	if st.cfg.Host == "" {
		st.cfg.Host = DefaultHost
	}
	if st.cfg.Namespace == "" {
		st.cfg.Namespace = DefaultNamespace
	}
	if err := validateSearchAttributes(st.cfg.SearchAttributes); err != nil {
		return nil, err
	}

	host := st.cfg.Host
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("temporalserver: Host %q must be an IP address or \"localhost\"", st.cfg.Host)
	}
	st.bindIP = ip.String()
	st.dialHost = st.bindIP
	if ip.IsUnspecified() {
		st.dialHost = "127.0.0.1"
		if ip.To4() == nil {
			st.dialHost = "::1"
		}
	}

	port, err := portSetting("Port", st.cfg.Port, DefaultPort)
	if err != nil {
		return nil, err
	}
	uiPort := 0
	if !st.cfg.DisableUI {
		if uiPort, err = portSetting("UIPort", st.cfg.UIPort, DefaultUIPort); err != nil {
			return nil, err
		}
		if uiPort == port && port != FreePort {
			return nil, fmt.Errorf("temporalserver: Port and UIPort are both %d", port)
		}
	}

	// Hold every listener until all ports are chosen so they are distinct,
	// then release them for the server to bind.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	reserve := func(what, host string, port int) (int, error) {
		addr := net.JoinHostPort(host, strconv.Itoa(max(port, 0)))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if port > 0 {
				return 0, fmt.Errorf("temporalserver: %s port %d on %s is not available (is another server running?): %w", what, port, host, err)
			}
			return 0, fmt.Errorf("temporalserver: no free port for the %s on %s: %w", what, host, err)
		}
		held = append(held, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}

	if st.port, err = reserve("frontend", st.bindIP, port); err != nil {
		return nil, err
	}
	if !st.cfg.DisableUI {
		if st.uiPort, err = reserve("Web UI", st.bindIP, uiPort); err != nil {
			return nil, err
		}
	}
	for i := range st.internal {
		if st.internal[i], err = reserve("internal service", internalHost, 0); err != nil {
			return nil, err
		}
	}
	for i := range st.membership {
		if st.membership[i], err = reserve("membership", internalHost, 0); err != nil {
			return nil, err
		}
	}
	if st.cfg.secured() {
		for i := range st.internalFrontend {
			if st.internalFrontend[i], err = reserve("internal frontend", internalHost, 0); err != nil {
				return nil, err
			}
		}
		st.internalAddr = net.JoinHostPort(internalHost, strconv.Itoa(st.internalFrontend[0]))
	}

	st.frontendAddr = net.JoinHostPort(st.dialHost, strconv.Itoa(st.port))
	if !st.cfg.DisableUI {
		st.uiURL = "http://" + net.JoinHostPort(st.dialHost, strconv.Itoa(st.uiPort))
	}
	return st, nil
}

func portSetting(name string, v, def int) (int, error) {
	switch {
	case v == 0:
		return def, nil
	case v == FreePort:
		return FreePort, nil
	case v < FreePort || v > 65535:
		return 0, fmt.Errorf("temporalserver: %s %d is out of range (0 for the default, %d for a free port)", name, v, FreePort)
	}
	return v, nil
}

// newTemporalServer builds the server configuration: all four services in
// this process, SQLite for persistence and visibility, no archival, no
// metrics, and no TLS or authorization unless Config asks for them.
func newTemporalServer(st *settings, db *store, logger *slogLogger) (temporal.Server, error) {
	service := func(grpcPort, membershipPort int) config.Service {
		return config.Service{RPC: config.RPC{
			GRPCPort:        grpcPort,
			MembershipPort:  membershipPort,
			BindOnLocalHost: true,
		}}
	}
	frontend := service(st.port, st.membership[0])
	frontend.RPC.BindOnLocalHost = false
	frontend.RPC.BindOnIP = st.bindIP

	cfg := &config.Config{
		Global: config.Global{
			Membership: config.Membership{
				MaxJoinDuration:  30 * time.Second,
				BroadcastAddress: internalHost,
			},
		},
		Persistence: config.Persistence{
			DefaultStore:     sqliteplugin.PluginName,
			VisibilityStore:  sqliteplugin.PluginName,
			NumHistoryShards: numHistoryShards,
			DataStores: map[string]config.DataStore{
				sqliteplugin.PluginName: {SQL: db.sqlConfig()},
			},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {
					Enabled:                true,
					InitialFailoverVersion: 1,
					RPCAddress:             st.frontendAddr,
				},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": frontend,
			"history":  service(st.internal[0], st.membership[1]),
			"matching": service(st.internal[1], st.membership[2]),
			"worker":   service(st.internal[2], st.membership[3]),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{
			Archival: config.ArchivalNamespaceDefaults{
				History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
				Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
			},
		},
		// The worker service (schedules, batch operations, ...) is an SDK
		// client of the frontend.
		PublicClient: config.PublicClient{HostPort: st.frontendAddr},
	}
	services := temporal.DefaultServices
	claimMapper, authorizer := authorization.NewNoopClaimMapper(), authorization.NewNoopAuthorizer()
	if st.cfg.secured() {
		// The server's own clients (the worker service: schedules, ...)
		// find the internal frontend through membership, without TLS and
		// as the server itself; only the public frontend is secured.
		services = append(slices.Clone(services), string(primitives.InternalFrontendService))
		cfg.Services[string(primitives.InternalFrontendService)] = service(st.internalFrontend[0], st.internalFrontend[1])
		cfg.PublicClient = config.PublicClient{}
		cfg.ClusterMetadata.ClusterInformation[clusterName] = cluster.ClusterInformation{
			Enabled: true, InitialFailoverVersion: 1, RPCAddress: st.internalAddr,
		}
		if t := st.cfg.TLS; t != nil {
			cfg.Global.TLS.Frontend.Server = config.ServerTLS{
				CertData: base64.StdEncoding.EncodeToString(t.CertPEM),
				KeyData:  base64.StdEncoding.EncodeToString(t.KeyPEM),
			}
			if t.ClientCAPEM != nil {
				cfg.Global.TLS.Frontend.Server.ClientCAData = []string{base64.StdEncoding.EncodeToString(t.ClientCAPEM)}
				cfg.Global.TLS.Frontend.Server.RequireClientAuth = true
			}
		}
		if st.cfg.APIKey != "" {
			claimMapper, authorizer = apiKeyClaimMapper{bearer: "Bearer " + st.cfg.APIKey}, adminOnly{}
		}
	}

	var srv temporal.Server
	err := recoverFatal(func() error {
		var err error
		srv, err = temporal.NewServer(
			temporal.WithConfig(cfg),
			temporal.ForServices(services),
			temporal.WithLogger(logger),
			temporal.WithDynamicConfigClient(dynamicConfig()),
			temporal.WithAuthorizer(authorizer),
			temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper {
				return claimMapper
			}),
		)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("temporalserver: creating the server: %w", err)
	}
	return srv, nil
}

// apiKeyClaimMapper makes a caller an admin when it sends the one accepted
// API key, and nobody otherwise (also without any header).
type apiKeyClaimMapper struct{ bearer string }

func (m apiKeyClaimMapper) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	if subtle.ConstantTimeCompare([]byte(info.AuthToken), []byte(m.bearer)) == 1 {
		return &authorization.Claims{System: authorization.RoleAdmin}, nil
	}
	return &authorization.Claims{}, nil
}

func (apiKeyClaimMapper) AuthInfoRequired() bool { return false }

// adminOnly allows admins: the API key's holder and the server itself
// (through the internal frontend).
type adminOnly struct{}

func (adminOnly) Authorize(_ context.Context, claims *authorization.Claims, _ *authorization.CallTarget) (authorization.Result, error) {
	if claims != nil && claims.System&authorization.RoleAdmin != 0 {
		return authorization.Result{Decision: authorization.DecisionAllow}, nil
	}
	return authorization.Result{Decision: authorization.DecisionDeny}, nil
}

// dynamicConfig is the dev server's fixed dynamic configuration.
func dynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		// A search attribute added through the operator service is usable
		// at once instead of after the cache's refresh.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// Search attribute aliases live on the namespace, which every service
		// reloads on this interval (default 2s); shorter makes attributes
		// (and namespace changes) added while running usable sooner.
		dynamicconfig.NamespaceCacheRefreshInterval.Key(): namespaceRefresh,
		// Updates (operator commands) and Update-With-Start. Both are on by
		// default in this server version; set so a default change cannot
		// silently break them. (This version has no separate switch for
		// Update-With-Start / ExecuteMultiOperation any more.)
		dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key():              true,
		dynamicconfig.FrontendEnableUpdateWorkflowExecutionAsyncAccepted.Key(): true,
		dynamicconfig.FrontendEnableSchedules.Key():                            true,
		// Schedules, triggers and backfills start workflows through a
		// per-namespace rate limit (default 30/s); let bursts through.
		dynamicconfig.SchedulerNamespaceStartWorkflowRPS.Key(): 1000.0,
		// Visibility (list/count: the Web UI, CLI listings, tests that poll)
		// is limited to 10 requests/s per namespace by default, which an
		// open UI tab and a polling test exceed together.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key():        200,
		dynamicconfig.FrontendMaxNamespaceVisibilityBurstRatioPerInstance.Key(): 2.0,
		// Task priority (a fast backfill's runs rank below scheduled ones)
		// needs matching's priority-aware matcher (matching.useNewMatcher)
		// and its 5 levels (matching.priorityLevels): both are this server
		// version's defaults, so nothing is set for them here.
	}
}

// recoverFatal runs f, turning a panic raised by the log adapter's Fatal (or
// any other panic on this goroutine) into an error.
func recoverFatal(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			var fe *fatalError
			if e, ok := r.(error); ok && errors.As(e, &fe) {
				err = fe
				return
			}
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
