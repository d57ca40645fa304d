// Package config holds Spillway's configuration model: Google Cloud's REST
// resource shapes (camelCase field names, so exported resources load as they
// are) plus Spillway's own top-level lists (regions, frontends).
//
// The package is pure: it decodes bytes strictly and validates; it leaves
// defaults unset (package plan applies them, from the constants in
// defaults.go). It does no I/O except in Load, which reads one file.
package config

// Config is one Spillway configuration file.
//
// Top-level keys that start with "x-" are ignored, so that a file can hold
// YAML anchors to reuse (x-defaults: &d {...}; then <<: *d).
type Config struct {
	HealthChecks          []HealthCheck          `json:"healthChecks,omitempty"`
	ServiceLbPolicies     []ServiceLbPolicy      `json:"serviceLbPolicies,omitempty"`
	NetworkEndpointGroups []NetworkEndpointGroup `json:"networkEndpointGroups,omitempty"`
	InstanceGroups        []InstanceGroup        `json:"instanceGroups,omitempty"`
	BackendServices       []BackendService       `json:"backendServices,omitempty"`
	// BackendBuckets are Cloud CDN's bucket backends; Spillway serves a
	// local directory for each (cdn.go).
	BackendBuckets []BackendBucket `json:"backendBuckets,omitempty"`
	URLMaps        []URLMap        `json:"urlMaps,omitempty"`
	// SecurityPolicies are Cloud Armor policies (security.go).
	SecurityPolicies []SecurityPolicy `json:"securityPolicies,omitempty"`

	// Regions is a Spillway extension: where regions are, for proximity.
	Regions []Region `json:"regions,omitempty"`
	// Frontends is a Spillway extension: what a forwarding rule plus a
	// target proxy are in Google Cloud.
	Frontends []Frontend `json:"frontends,omitempty"`
	// Spillway holds process-wide tuning that has no Google Cloud
	// equivalent (a Spillway extension).
	Spillway *Tuning `json:"spillway,omitempty"`
	// SslPolicies, ServerTLSPolicies and TrustConfigs are the TLS
	// settings HTTPS frontends name (see tls.go).
	SslPolicies       []SslPolicy       `json:"sslPolicies,omitempty"`
	ServerTLSPolicies []ServerTLSPolicy `json:"serverTlsPolicies,omitempty"`
	TrustConfigs      []TrustConfig     `json:"trustConfigs,omitempty"`
	// SslCertificates are the certificates HTTPS frontends name in their
	// sslCertificates: SELF_MANAGED (inline PEM) or MANAGED (obtained
	// over ACME; see sslcert.go).
	SslCertificates []SslCertificate `json:"sslCertificates,omitempty"`
	// DNSZones is a Spillway extension: zones served on protocol: DNS
	// frontends (see dns.go and docs/dns.md).
	DNSZones []DNSZone `json:"dnsZones,omitempty"`

	// File is the path the config was loaded from (not decoded).
	File string `json:"-"`
}

// Tuning is the `spillway:` block: knobs that Google Cloud fixes and
// Spillway exposes, each documented in docs/extensions.md.
type Tuning struct {
	// UndrainHoldSec overrides the 60 s a drained group must stay at or
	// above 35% healthy before it is undrained. Default 60.
	UndrainHoldSec *int `json:"undrainHoldSec,omitempty"`
	// DemandWindowSec is the window over which offered request rates are
	// measured for RATE capacity. Default 1.
	DemandWindowSec *int `json:"demandWindowSec,omitempty"`
	// UndrainRampSec turns Google's step undrain into a gradual failback:
	// an undrained group returns at 10%, 25%, 50% and 100% of its capacity
	// over this many seconds (steps evenly spaced). 0 (the default) keeps
	// Google's behaviour: full capacity at once.
	UndrainRampSec *int `json:"undrainRampSec,omitempty"`
	// SecondLayerProxies is how many of a region's second-layer proxies
	// one client (one source address) reaches under WATERFALL_BY_REGION;
	// each proxy favours one zone. Default 8, fitted to seed 000.
	SecondLayerProxies *int `json:"secondLayerProxies,omitempty"`
	// FidelityProfile picks, where Google's documentation and a seed's
	// measurements disagree, which one Spillway follows: DOCUMENTED (the
	// default) or SEED_000 (seed 000's measurements: a backend service
	// without a serviceLbPolicy fails over at threshold 50 whatever its
	// scheme). docs/semantics.md §2.2.
	FidelityProfile string `json:"fidelityProfile,omitempty"`
	// HTTP1Server picks the HTTP/1.1 server of every frontend (HTTP and
	// HTTPS): SPILLWAY (a purpose-built loop, h1.Server) or NET_HTTP
	// (Go's net/http server). Empty means the default, SPILLWAY. Read
	// when a frontend's listener starts.
	HTTP1Server string `json:"http1Server,omitempty"`
	// HTTP2Server picks the HTTP/2 server of every frontend (h2 by ALPN,
	// h2c with prior knowledge), behind either HTTP/1.1 server: SPILLWAY
	// (a purpose-built loop, internal/h2) or NET_HTTP
	// (golang.org/x/net/http2's server). Empty means the default,
	// SPILLWAY. Read when a frontend's listener starts.
	HTTP2Server string `json:"http2Server,omitempty"`
	// ParkIdleConnections lets the SPILLWAY HTTP/1.1 loop park a
	// cleartext connection that has waited a second for a request (its
	// next one, or its first): the connection's goroutine ends and its
	// socket waits in an epoll set shared by the frontend until it is
	// readable (Linux; docs/performance.md, "Idle connections"). Default
	// true; false keeps a goroutine per connection. Read when a
	// frontend's listener starts.
	ParkIdleConnections *bool `json:"parkIdleConnections,omitempty"`
	// NormalizePath normalises request paths before URL-map matching and
	// forwarding: dot segments removed (RFC 3986 §5.2.4), percent-encoded
	// unreserved characters decoded, other escapes' hex upper-cased.
	// Default true (Envoy's normalize_path).
	NormalizePath *bool `json:"normalizePath,omitempty"`
	// MergeSlashes merges runs of '/' in request paths (Envoy's
	// merge_slashes). Default true; read only while NormalizePath is on.
	MergeSlashes *bool `json:"mergeSlashes,omitempty"`
	// PathWithEscapedSlashesAction says what to do with %2F and %5C (and
	// a raw backslash) in request paths: KEEP_UNCHANGED (default),
	// REJECT_REQUEST (400) or UNESCAPE_AND_FORWARD (Envoy's
	// path_with_escaped_slashes_action). Read only while NormalizePath is
	// on.
	PathWithEscapedSlashesAction string `json:"pathWithEscapedSlashesAction,omitempty"`
	// AccessLog writes one line per request (docs/operations.md). Off
	// when absent. Which requests are logged is decided per backend
	// service by its logConfig; requests that reach no backend service
	// are logged at AccessLog.SampleRate.
	AccessLog *AccessLog `json:"accessLog,omitempty"`
	// RequestMetrics turns the per-request Prometheus metrics
	// (spillway_requests_total and the others in docs/operations.md) on
	// or off. Default true.
	RequestMetrics *bool `json:"requestMetrics,omitempty"`
	// GeoDatabase is the path of a MaxMind-format database (GeoLite2 or
	// GeoIP2 Country or City) that places the proxy's clients: security
	// policies' origin.region_code and REGION_CODE rate-limit keys. Read
	// at start and on every reload. Unset: clients have no region code.
	GeoDatabase string `json:"geoDatabase,omitempty"`
	// DNSIdentity answers version.bind, version.server, id.server and
	// hostname.bind in class CH (see dns_transfer.go, docs/dns.md). Off
	// (REFUSED) by default.
	DNSIdentity *DNSIdentity `json:"dnsIdentity,omitempty"`
	// DNSResponseRateLimit limits the DNS frontends' UDP responses per
	// client prefix (see dns_rrl.go, docs/dns.md). Off when absent.
	DNSResponseRateLimit *DNSResponseRateLimit `json:"dnsResponseRateLimit,omitempty"`
	// DNSMaxDenialSignaturesPerSecond caps the fresh DNSSEC signatures
	// made per second for denials (NXDOMAIN, NODATA) of signed zones,
	// over UDP and, separately, over TCP; above it a UDP denial is
	// answered truncated and a TCP one SERVFAIL. 0 (the default): no cap.
	DNSMaxDenialSignaturesPerSecond int `json:"dnsMaxDenialSignaturesPerSecond,omitempty"`
	// DNSQueryLog logs a sample of DNS queries (dns_telemetry.go,
	// docs/dns.md). Off when absent.
	DNSQueryLog *DNSQueryLog `json:"dnsQueryLog,omitempty"`
	// DNSTap writes DNS queries and responses as dnstap
	// (dns_telemetry.go, docs/dns.md). Off when absent.
	DNSTap *DNSTap `json:"dnstap,omitempty"`
	// ACME says how MANAGED sslCertificates are obtained and renewed
	// (sslcert.go). Defaults apply when absent.
	ACME *ACME `json:"acme,omitempty"`
	// Tracing exports a span per request over OTLP/HTTP (OpenTelemetry).
	// Off when absent.
	Tracing *Tracing `json:"tracing,omitempty"`
	// Serverless maps SERVERLESS network endpoint groups (cloudRun,
	// appEngine, cloudFunction) to where those services run outside
	// Google Cloud: one HTTPS base URL per region (docs/extensions.md).
	Serverless []ServerlessTarget `json:"serverless,omitempty"`
	// CDN sizes Cloud CDN's store (cdn.go). Defaults apply when absent.
	CDN *CDN `json:"cdn,omitempty"`
	// SignedURLKeys are the signed URL and cookie keys of CDN-enabled
	// backends (cdn.go, docs/cdn.md).
	SignedURLKeys []SignedURLKey `json:"signedUrlKeys,omitempty"`
	// Buckets maps backend buckets' bucketName (Google's Cloud Storage
	// bucket name) to an S3-compatible bucket (cdn.go, docs/cdn.md).
	Buckets []BucketMapping `json:"buckets,omitempty"`
	// Resolver is the DNS server that INTERNET_FQDN_PORT endpoints and
	// serverless base URLs with host names are resolved through.
	Resolver *Resolver `json:"resolver,omitempty"`
	// BGP makes spillway serve announce the frontends' anycastPrefixes
	// to upstream routers while it can serve them (bgp.go,
	// docs/extensions.md). Off when absent.
	BGP *BGP `json:"bgp,omitempty"`
}

// Tracing is spillway.tracing.
type Tracing struct {
	// OTLPEndpoint is the collector's OTLP/HTTP traces URL, e.g.
	// http://127.0.0.1:4318/v1/traces (http:// sends in clear text).
	OTLPEndpoint string `json:"otlpEndpoint,omitempty"`
	// ServiceName is the spans' service.name. Default "spillway".
	ServiceName string `json:"serviceName,omitempty"`
}

// ServerlessTarget is one spillway.serverless[] entry: where a region's
// serverless services are reached.
type ServerlessTarget struct {
	// Region is the serverless NEGs' region, e.g. asia-northeast1.
	Region string `json:"region"`
	// BaseURL is an https:// URL with no path, query or fragment; its
	// host may hold {service}, {tag}, {version} and {function}, replaced
	// by the NEG's cloudRun, appEngine or cloudFunction fields, e.g.
	// https://{service}.tokyo.run.internal:8443. The host (after
	// replacement) is the Host header and TLS server name of proxied
	// requests; an IP address is dialled as is, a name is resolved.
	BaseURL string `json:"baseUrl"`
}

// Resolver is spillway.resolver.
type Resolver struct {
	// Address is the DNS server, host:port (default: the first
	// nameserver of /etc/resolv.conf).
	Address string `json:"address,omitempty"`
	// MinTTLSec and MaxTTLSec clamp the answers' TTLs: a name is
	// resolved again when its TTL, so clamped, runs out. Defaults 5 and
	// 300.
	MinTTLSec *int `json:"minTtlSec,omitempty"`
	MaxTTLSec *int `json:"maxTtlSec,omitempty"`
}

// AccessLog is spillway.accessLog, Spillway's request log.
type AccessLog struct {
	// Enable turns the log on.
	Enable bool `json:"enable,omitempty"`
	// Path is the file the log is appended to, or "stdout" (the default).
	// A reload that changes it reopens the log.
	Path string `json:"path,omitempty"`
	// Format is JSON (the default: Google's log entry shape) or TEXT
	// (one key=value line).
	Format string `json:"format,omitempty"`
	// SampleRate is the fraction (0-1) of requests logged that no backend
	// service's logConfig decides (requests answered before a backend
	// service was chosen, and services without a logConfig). Default 1.
	SampleRate *float64 `json:"sampleRate,omitempty"`
	// BufferSize is how many records may wait for the writer; past it
	// records are dropped and counted
	// (spillway_access_log_dropped_total). Default 4096.
	BufferSize *int `json:"bufferSize,omitempty"`
	// ProjectID, when set, writes each line's trace as Cloud Logging's
	// projects/PROJECT_ID/traces/TRACE_ID, which links it to the trace.
	ProjectID string `json:"projectId,omitempty"`
}

// LogConfig is backendService.logConfig (Google's): whether and how often
// the service's requests are logged.
type LogConfig struct {
	Enable     bool     `json:"enable,omitempty"`
	SampleRate *float64 `json:"sampleRate,omitempty"`
	// OptionalMode and OptionalFields are accepted for compatibility with
	// Google exports; Spillway's log lines always carry every field.
	OptionalMode   string   `json:"optionalMode,omitempty"`
	OptionalFields []string `json:"optionalFields,omitempty"`
}

// OutputOnly holds the fields Google Cloud sets on the resources it
// returns (describe, export, list): every resource type embeds it, so an
// exported resource loads as it is. Spillway ignores them all; on network
// endpoint and instance groups, region is not output only (it places the
// group) and the group's own Region field wins.
type OutputOnly struct {
	Kind              string   `json:"kind,omitempty"`
	ID                string   `json:"id,omitempty"`
	SelfLink          string   `json:"selfLink,omitempty"`
	SelfLinkWithID    string   `json:"selfLinkWithId,omitempty"`
	CreationTimestamp string   `json:"creationTimestamp,omitempty"`
	Fingerprint       string   `json:"fingerprint,omitempty"`
	Region            string   `json:"region,omitempty"`
	UsedBy            []UsedBy `json:"usedBy,omitempty"`
}

// UsedBy is one usedBy[] entry of an exported resource (output only).
type UsedBy struct {
	Reference string `json:"reference,omitempty"`
}

// Ignored is a field that is accepted with any content and not read: a
// Google Cloud block Spillway tolerates in exports (see where it is used).
type Ignored struct{}

// Iap is backendService.iap. Only enabled: false is accepted.
type Iap struct {
	Enabled                  bool   `json:"enabled"`
	Oauth2ClientID           string `json:"oauth2ClientId,omitempty"`
	Oauth2ClientSecret       string `json:"oauth2ClientSecret,omitempty"`
	Oauth2ClientSecretSha256 string `json:"oauth2ClientSecretSha256,omitempty"`
}

// Duration is Google's protobuf Duration as it appears in REST JSON.
type Duration struct {
	Seconds int64 `json:"seconds,omitempty"`
	Nanos   int32 `json:"nanos,omitempty"`
}

// HealthCheck is a compute#healthCheck.
type HealthCheck struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	OutputOnly
	Type               string `json:"type,omitempty"`
	CheckIntervalSec   *int   `json:"checkIntervalSec,omitempty"`
	TimeoutSec         *int   `json:"timeoutSec,omitempty"`
	HealthyThreshold   *int   `json:"healthyThreshold,omitempty"`
	UnhealthyThreshold *int   `json:"unhealthyThreshold,omitempty"`

	HTTPHealthCheck  *HTTPHealthCheck `json:"httpHealthCheck,omitempty"`
	HTTPSHealthCheck *HTTPHealthCheck `json:"httpsHealthCheck,omitempty"`
	HTTP2HealthCheck *HTTPHealthCheck `json:"http2HealthCheck,omitempty"`
	TCPHealthCheck   *TCPHealthCheck  `json:"tcpHealthCheck,omitempty"`
	// GRPCHealthCheck (type GRPC, plaintext) and GRPCTLSHealthCheck (type
	// GRPC_WITH_TLS) call grpc.health.v1.Health/Check.
	GRPCHealthCheck    *GRPCHealthCheck `json:"grpcHealthCheck,omitempty"`
	GRPCTLSHealthCheck *GRPCHealthCheck `json:"grpcTlsHealthCheck,omitempty"`

	// CheckIntervalMs and TimeoutMs are Spillway extensions that override
	// the second-granular fields, for fast labs and tests.
	CheckIntervalMs *int `json:"checkIntervalMs,omitempty"`
	TimeoutMs       *int `json:"timeoutMs,omitempty"`

	// LogConfig is accepted so exports load; Spillway writes no health
	// check logs (Config.Warnings says so when enable is true).
	LogConfig *LogConfig `json:"logConfig,omitempty"`
}

// HTTPHealthCheck is the httpHealthCheck / httpsHealthCheck / http2HealthCheck block.
type HTTPHealthCheck struct {
	Port              *int   `json:"port,omitempty"`
	PortName          string `json:"portName,omitempty"`
	PortSpecification string `json:"portSpecification,omitempty"`
	Host              string `json:"host,omitempty"`
	RequestPath       string `json:"requestPath,omitempty"`
	Response          string `json:"response,omitempty"`
	ProxyHeader       string `json:"proxyHeader,omitempty"`
}

// TCPHealthCheck is the tcpHealthCheck block.
type TCPHealthCheck struct {
	Port              *int   `json:"port,omitempty"`
	PortName          string `json:"portName,omitempty"`
	PortSpecification string `json:"portSpecification,omitempty"`
	Request           string `json:"request,omitempty"`
	Response          string `json:"response,omitempty"`
	ProxyHeader       string `json:"proxyHeader,omitempty"`
}

// GRPCHealthCheck is the grpcHealthCheck / grpcTlsHealthCheck block.
type GRPCHealthCheck struct {
	Port              *int   `json:"port,omitempty"`
	PortName          string `json:"portName,omitempty"`
	PortSpecification string `json:"portSpecification,omitempty"`
	// GRPCServiceName is the service asked about ("" = the server as a
	// whole); ASCII, at most 1024 characters.
	GRPCServiceName string `json:"grpcServiceName,omitempty"`
}

// ServiceLbPolicy is a networkservices ServiceLbPolicy.
type ServiceLbPolicy struct {
	Name                   string             `json:"name"`
	Description            string             `json:"description,omitempty"`
	Labels                 map[string]string  `json:"labels,omitempty"`
	LoadBalancingAlgorithm string             `json:"loadBalancingAlgorithm,omitempty"`
	AutoCapacityDrain      *AutoCapacityDrain `json:"autoCapacityDrain,omitempty"`
	FailoverConfig         *FailoverConfig    `json:"failoverConfig,omitempty"`
	IsolationConfig        *IsolationConfig   `json:"isolationConfig,omitempty"`
	CreateTime             string             `json:"createTime,omitempty"`
	UpdateTime             string             `json:"updateTime,omitempty"`
	OutputOnly
}

// AutoCapacityDrain is serviceLbPolicy.autoCapacityDrain.
type AutoCapacityDrain struct {
	Enable bool `json:"enable"`
}

// FailoverConfig is serviceLbPolicy.failoverConfig.
type FailoverConfig struct {
	FailoverHealthThreshold *int `json:"failoverHealthThreshold,omitempty"`
}

// IsolationConfig is serviceLbPolicy.isolationConfig (accepted, not enforced).
type IsolationConfig struct {
	IsolationGranularity string `json:"isolationGranularity,omitempty"`
	IsolationMode        string `json:"isolationMode,omitempty"`
}

// NetworkEndpointGroup is a zonal NEG with its endpoints inline (in Google
// Cloud they are attached by a separate call).
type NetworkEndpointGroup struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	OutputOnly
	Zone                string            `json:"zone"`
	Region              string            `json:"region,omitempty"`
	NetworkEndpointType string            `json:"networkEndpointType,omitempty"`
	DefaultPort         int               `json:"defaultPort,omitempty"`
	Endpoints           []NetworkEndpoint `json:"endpoints,omitempty"`
	// Network, Subnetwork and Size are accepted so described groups load;
	// Spillway reaches endpoints by address and ignores them.
	Network    string `json:"network,omitempty"`
	Subnetwork string `json:"subnetwork,omitempty"`
	Size       int    `json:"size,omitempty"`
	// CloudRun, AppEngine and CloudFunction say which serverless service
	// a SERVERLESS group stands for (exactly one); spillway.serverless
	// says where it runs.
	CloudRun      *ServerlessService `json:"cloudRun,omitempty"`
	AppEngine     *ServerlessService `json:"appEngine,omitempty"`
	CloudFunction *ServerlessService `json:"cloudFunction,omitempty"`
}

// ServerlessService is a serverless NEG's cloudRun, appEngine or
// cloudFunction block (each uses its own subset of the fields).
type ServerlessService struct {
	Service  string `json:"service,omitempty"`  // cloudRun, appEngine
	Tag      string `json:"tag,omitempty"`      // cloudRun
	Version  string `json:"version,omitempty"`  // appEngine
	Function string `json:"function,omitempty"` // cloudFunction
	// URLMask derives the service from each request's URL in Google
	// Cloud; Spillway accepts it and maps only the fixed fields above.
	URLMask string `json:"urlMask,omitempty"`
}

// NetworkEndpoint is one NEG endpoint: ipAddress, or fqdn in an
// INTERNET_FQDN_PORT group.
type NetworkEndpoint struct {
	IPAddress string `json:"ipAddress,omitempty"`
	Fqdn      string `json:"fqdn,omitempty"`
	Port      int    `json:"port,omitempty"`
	Instance  string `json:"instance,omitempty"`
}

// InstanceGroup is a zonal (unmanaged or managed) instance group with its
// instances inline.
type InstanceGroup struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	OutputOnly
	Zone       string      `json:"zone"`
	Region     string      `json:"region,omitempty"`
	NamedPorts []NamedPort `json:"namedPorts,omitempty"`
	Instances  []Instance  `json:"instances,omitempty"`
	// Network, Subnetwork and Size are accepted so described groups load;
	// Spillway reaches instances by address and ignores them.
	Network    string `json:"network,omitempty"`
	Subnetwork string `json:"subnetwork,omitempty"`
	Size       int    `json:"size,omitempty"`
}

// NamedPort maps a port name to a number.
type NamedPort struct {
	Name string `json:"name"`
	Port int    `json:"port"`
}

// Instance is one VM of an instance group.
type Instance struct {
	Name      string `json:"name"`
	IPAddress string `json:"ipAddress"`
}

// BackendService is a global compute#backendService.
type BackendService struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	OutputOnly
	LoadBalancingScheme  string            `json:"loadBalancingScheme,omitempty"`
	Protocol             string            `json:"protocol,omitempty"`
	PortName             string            `json:"portName,omitempty"`
	Port                 int               `json:"port,omitempty"`
	TimeoutSec           *int              `json:"timeoutSec,omitempty"`
	HealthChecks         []string          `json:"healthChecks,omitempty"`
	Backends             []Backend         `json:"backends,omitempty"`
	ServiceLbPolicy      string            `json:"serviceLbPolicy,omitempty"`
	LocalityLbPolicy     string            `json:"localityLbPolicy,omitempty"`
	SessionAffinity      string            `json:"sessionAffinity,omitempty"`
	AffinityCookieTTLSec *int              `json:"affinityCookieTtlSec,omitempty"`
	ConsistentHash       *ConsistentHash   `json:"consistentHash,omitempty"`
	OutlierDetection     *OutlierDetection `json:"outlierDetection,omitempty"`
	ConnectionDraining   *struct {
		DrainingTimeoutSec int `json:"drainingTimeoutSec,omitempty"`
	} `json:"connectionDraining,omitempty"`
	CustomRequestHeaders  []string `json:"customRequestHeaders,omitempty"`
	CustomResponseHeaders []string `json:"customResponseHeaders,omitempty"`
	EnableCDN             bool     `json:"enableCDN,omitempty"`
	// SecurityPolicy and EdgeSecurityPolicy name (or link to) the
	// securityPolicies[] of type CLOUD_ARMOR and CLOUD_ARMOR_EDGE that
	// filter the service's requests: the edge policy first, then the
	// backend policy, before a backend is picked.
	SecurityPolicy     string `json:"securityPolicy,omitempty"`
	EdgeSecurityPolicy string `json:"edgeSecurityPolicy,omitempty"`
	// CdnPolicy is Cloud CDN's caching of the service's responses,
	// read while enableCDN is true (cdn.go, docs/cdn.md).
	CdnPolicy *CdnPolicy `json:"cdnPolicy,omitempty"`
	// Iap is accepted only with enabled: false: Spillway has no
	// Identity-Aware Proxy.
	Iap *Iap `json:"iap,omitempty"`
	// LogConfig is Google's request logging: enable and sampleRate
	// choose which of the service's requests the access log keeps
	// (spillway.accessLog; docs/operations.md).
	LogConfig *LogConfig `json:"logConfig,omitempty"`
}

// Backend is one backends[] entry of a backend service.
type Backend struct {
	Group                     string   `json:"group"`
	Description               string   `json:"description,omitempty"`
	BalancingMode             string   `json:"balancingMode,omitempty"`
	CapacityScaler            *float64 `json:"capacityScaler,omitempty"`
	MaxRate                   *int     `json:"maxRate,omitempty"`
	MaxRatePerInstance        *float64 `json:"maxRatePerInstance,omitempty"`
	MaxRatePerEndpoint        *float64 `json:"maxRatePerEndpoint,omitempty"`
	MaxUtilization            *float64 `json:"maxUtilization,omitempty"`
	MaxConnections            *int     `json:"maxConnections,omitempty"`
	MaxConnectionsPerInstance *int     `json:"maxConnectionsPerInstance,omitempty"`
	MaxConnectionsPerEndpoint *int     `json:"maxConnectionsPerEndpoint,omitempty"`
	Preference                string   `json:"preference,omitempty"`
	Failover                  bool     `json:"failover,omitempty"`
}

// ConsistentHash is backendService.consistentHash.
type ConsistentHash struct {
	HTTPCookie *struct {
		Name string    `json:"name,omitempty"`
		Path string    `json:"path,omitempty"`
		TTL  *Duration `json:"ttl,omitempty"`
	} `json:"httpCookie,omitempty"`
	HTTPHeaderName  string `json:"httpHeaderName,omitempty"`
	MinimumRingSize *int64 `json:"minimumRingSize,omitempty"`
}

// OutlierDetection is backendService.outlierDetection.
type OutlierDetection struct {
	ConsecutiveErrors                  *int      `json:"consecutiveErrors,omitempty"`
	ConsecutiveGatewayFailure          *int      `json:"consecutiveGatewayFailure,omitempty"`
	EnforcingConsecutiveErrors         *int      `json:"enforcingConsecutiveErrors,omitempty"`
	EnforcingConsecutiveGatewayFailure *int      `json:"enforcingConsecutiveGatewayFailure,omitempty"`
	EnforcingSuccessRate               *int      `json:"enforcingSuccessRate,omitempty"`
	Interval                           *Duration `json:"interval,omitempty"`
	BaseEjectionTime                   *Duration `json:"baseEjectionTime,omitempty"`
	MaxEjectionPercent                 *int      `json:"maxEjectionPercent,omitempty"`
	SuccessRateMinimumHosts            *int      `json:"successRateMinimumHosts,omitempty"`
	SuccessRateRequestVolume           *int      `json:"successRateRequestVolume,omitempty"`
	SuccessRateStdevFactor             *int      `json:"successRateStdevFactor,omitempty"`
}

// URLMap is a compute#urlMap.
type URLMap struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	OutputOnly
	DefaultService     string              `json:"defaultService,omitempty"`
	DefaultRouteAction *HTTPRouteAction    `json:"defaultRouteAction,omitempty"`
	DefaultURLRedirect *HTTPRedirectAction `json:"defaultUrlRedirect,omitempty"`
	HeaderAction       *HTTPHeaderAction   `json:"headerAction,omitempty"`
	HostRules          []HostRule          `json:"hostRules,omitempty"`
	PathMatchers       []PathMatcher       `json:"pathMatchers,omitempty"`
	Tests              []URLMapTest        `json:"tests,omitempty"`
}

// HostRule maps hosts to a path matcher.
type HostRule struct {
	Hosts       []string `json:"hosts"`
	PathMatcher string   `json:"pathMatcher"`
	Description string   `json:"description,omitempty"`
}

// PathMatcher is urlMap.pathMatchers[].
type PathMatcher struct {
	Name               string              `json:"name"`
	Description        string              `json:"description,omitempty"`
	DefaultService     string              `json:"defaultService,omitempty"`
	DefaultRouteAction *HTTPRouteAction    `json:"defaultRouteAction,omitempty"`
	DefaultURLRedirect *HTTPRedirectAction `json:"defaultUrlRedirect,omitempty"`
	HeaderAction       *HTTPHeaderAction   `json:"headerAction,omitempty"`
	PathRules          []PathRule          `json:"pathRules,omitempty"`
	RouteRules         []HTTPRouteRule     `json:"routeRules,omitempty"`
}

// PathRule is a simple path → action rule.
type PathRule struct {
	Paths       []string            `json:"paths"`
	Service     string              `json:"service,omitempty"`
	RouteAction *HTTPRouteAction    `json:"routeAction,omitempty"`
	URLRedirect *HTTPRedirectAction `json:"urlRedirect,omitempty"`
}

// HTTPRouteRule is pathMatchers[].routeRules[].
type HTTPRouteRule struct {
	Priority     int                  `json:"priority"`
	Description  string               `json:"description,omitempty"`
	MatchRules   []HTTPRouteRuleMatch `json:"matchRules,omitempty"`
	Service      string               `json:"service,omitempty"`
	RouteAction  *HTTPRouteAction     `json:"routeAction,omitempty"`
	URLRedirect  *HTTPRedirectAction  `json:"urlRedirect,omitempty"`
	HeaderAction *HTTPHeaderAction    `json:"headerAction,omitempty"`
}

// HTTPRouteRuleMatch is one matchRules[] entry.
type HTTPRouteRuleMatch struct {
	PrefixMatch           string                    `json:"prefixMatch,omitempty"`
	FullPathMatch         string                    `json:"fullPathMatch,omitempty"`
	RegexMatch            string                    `json:"regexMatch,omitempty"`
	PathTemplateMatch     string                    `json:"pathTemplateMatch,omitempty"`
	IgnoreCase            bool                      `json:"ignoreCase,omitempty"`
	HeaderMatches         []HTTPHeaderMatch         `json:"headerMatches,omitempty"`
	QueryParameterMatches []HTTPQueryParameterMatch `json:"queryParameterMatches,omitempty"`
}

// HTTPHeaderMatch is a header predicate.
type HTTPHeaderMatch struct {
	HeaderName   string      `json:"headerName"`
	ExactMatch   *string     `json:"exactMatch,omitempty"`
	PrefixMatch  *string     `json:"prefixMatch,omitempty"`
	SuffixMatch  *string     `json:"suffixMatch,omitempty"`
	RegexMatch   *string     `json:"regexMatch,omitempty"`
	PresentMatch *bool       `json:"presentMatch,omitempty"`
	RangeMatch   *Int64Range `json:"rangeMatch,omitempty"`
	InvertMatch  bool        `json:"invertMatch,omitempty"`
}

// Int64Range is [rangeStart, rangeEnd).
type Int64Range struct {
	RangeStart int64 `json:"rangeStart"`
	RangeEnd   int64 `json:"rangeEnd"`
}

// HTTPQueryParameterMatch is a query-parameter predicate.
type HTTPQueryParameterMatch struct {
	Name         string  `json:"name"`
	ExactMatch   *string `json:"exactMatch,omitempty"`
	PresentMatch *bool   `json:"presentMatch,omitempty"`
	RegexMatch   *string `json:"regexMatch,omitempty"`
}

// HTTPRouteAction is a route action.
type HTTPRouteAction struct {
	WeightedBackendServices []WeightedBackendService `json:"weightedBackendServices,omitempty"`
	URLRewrite              *URLRewrite              `json:"urlRewrite,omitempty"`
	Timeout                 *Duration                `json:"timeout,omitempty"`
	RetryPolicy             *RetryPolicy             `json:"retryPolicy,omitempty"`
	RequestMirrorPolicy     *RequestMirrorPolicy     `json:"requestMirrorPolicy,omitempty"`
	FaultInjectionPolicy    *FaultInjectionPolicy    `json:"faultInjectionPolicy,omitempty"`
}

// WeightedBackendService is one weighted target.
type WeightedBackendService struct {
	BackendService string            `json:"backendService"`
	Weight         int               `json:"weight"`
	HeaderAction   *HTTPHeaderAction `json:"headerAction,omitempty"`
}

// URLRewrite rewrites host and path before forwarding.
type URLRewrite struct {
	HostRewrite         string `json:"hostRewrite,omitempty"`
	PathPrefixRewrite   string `json:"pathPrefixRewrite,omitempty"`
	PathTemplateRewrite string `json:"pathTemplateRewrite,omitempty"`
}

// RetryPolicy is routeAction.retryPolicy.
type RetryPolicy struct {
	RetryConditions []string  `json:"retryConditions,omitempty"`
	NumRetries      *int      `json:"numRetries,omitempty"`
	PerTryTimeout   *Duration `json:"perTryTimeout,omitempty"`
}

// RequestMirrorPolicy is routeAction.requestMirrorPolicy.
type RequestMirrorPolicy struct {
	BackendService string   `json:"backendService"`
	MirrorPercent  *float64 `json:"mirrorPercent,omitempty"`
}

// FaultInjectionPolicy is routeAction.faultInjectionPolicy.
type FaultInjectionPolicy struct {
	Delay *struct {
		FixedDelay *Duration `json:"fixedDelay,omitempty"`
		Percentage *float64  `json:"percentage,omitempty"`
	} `json:"delay,omitempty"`
	Abort *struct {
		HTTPStatus int      `json:"httpStatus,omitempty"`
		Percentage *float64 `json:"percentage,omitempty"`
	} `json:"abort,omitempty"`
}

// HTTPRedirectAction is a redirect.
type HTTPRedirectAction struct {
	HostRedirect         string `json:"hostRedirect,omitempty"`
	PathRedirect         string `json:"pathRedirect,omitempty"`
	PrefixRedirect       string `json:"prefixRedirect,omitempty"`
	HTTPSRedirect        bool   `json:"httpsRedirect,omitempty"`
	StripQuery           bool   `json:"stripQuery,omitempty"`
	RedirectResponseCode string `json:"redirectResponseCode,omitempty"`
}

// HTTPHeaderAction adds and removes request and response headers.
type HTTPHeaderAction struct {
	RequestHeadersToAdd     []HTTPHeaderOption `json:"requestHeadersToAdd,omitempty"`
	RequestHeadersToRemove  []string           `json:"requestHeadersToRemove,omitempty"`
	ResponseHeadersToAdd    []HTTPHeaderOption `json:"responseHeadersToAdd,omitempty"`
	ResponseHeadersToRemove []string           `json:"responseHeadersToRemove,omitempty"`
}

// HTTPHeaderOption is one header to add.
type HTTPHeaderOption struct {
	HeaderName  string `json:"headerName"`
	HeaderValue string `json:"headerValue,omitempty"`
	Replace     *bool  `json:"replace,omitempty"`
}

// URLMapTest is urlMaps[].tests[].
type URLMapTest struct {
	Description                  string       `json:"description,omitempty"`
	Host                         string       `json:"host,omitempty"`
	Path                         string       `json:"path"`
	Headers                      []TestHeader `json:"headers,omitempty"`
	Service                      string       `json:"service,omitempty"`
	ExpectedOutputURL            string       `json:"expectedOutputUrl,omitempty"`
	ExpectedRedirectResponseCode int          `json:"expectedRedirectResponseCode,omitempty"`
}

// TestHeader is a header of a URL map test.
type TestHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Region is a Spillway extension: a region's location, for proximity.
type Region struct {
	Name      string   `json:"name"`
	Latitude  *float64 `json:"latitude,omitempty"`
	Longitude *float64 `json:"longitude,omitempty"`
	// RTTMs gives explicit round-trip times in milliseconds to other
	// regions; it wins over coordinates.
	RTTMs map[string]float64 `json:"rttMs,omitempty"`
	// RegionalLayer, when set, is where an EDGE frontend forwards the
	// requests it sends to this region: the region's second proxy layer
	// (docs/global.md, "Two proxy layers").
	RegionalLayer *RegionalLayer `json:"regionalLayer,omitempty"`
}

// RegionalLayer is a Spillway extension: the regional-layer instances of
// a region, which an EDGE frontend reaches over long-lived HTTP/2
// connections.
type RegionalLayer struct {
	// Endpoints are the regional layer's addresses (host:port), tried in
	// turn; one that fails to connect is set aside for a while.
	Endpoints []string `json:"endpoints"`
	// Protocol is H2C (HTTP/2 with prior knowledge, cleartext; the
	// default) or HTTP2 (HTTP/2 over TLS).
	Protocol string `json:"protocol,omitempty"`
	// ClientCertificate is the edge's client certificate (HTTP2 only),
	// for a regional frontend that asks for one (mTLS).
	ClientCertificate *Certificate `json:"clientCertificate,omitempty"`
	// CAFile is a PEM file of the CAs that sign the regional layer's
	// server certificates (HTTP2 only); without it the certificate is
	// not verified, as for backends.
	CAFile string `json:"caFile,omitempty"`
	// ServerName is the name the regional layer's certificate is
	// verified against (HTTP2 with caFile; default: the endpoint's host).
	ServerName string `json:"serverName,omitempty"`
	// MaxConnections bounds the HTTP/2 connections kept to each regional
	// endpoint (default 4); requests share them as streams.
	MaxConnections int `json:"maxConnections,omitempty"`
	// HealthCheck tunes the edge's active check of each regional
	// endpoint (defaults: LayerHealthCheck's).
	HealthCheck *LayerHealthCheck `json:"healthCheck,omitempty"`
}

// LayerHealthCheck is how an edge checks each endpoint of a regional
// layer: an HTTP/2 PING on a pooled connection (a new connection when
// none is open) every CheckIntervalMs, answered within TimeoutMs;
// UnhealthyThreshold failures in a row set the endpoint aside,
// HealthyThreshold successes in a row bring it back. Zero fields take
// the defaults (DefaultLayerCheck*).
type LayerHealthCheck struct {
	CheckIntervalMs    int `json:"checkIntervalMs,omitempty"`
	TimeoutMs          int `json:"timeoutMs,omitempty"`
	HealthyThreshold   int `json:"healthyThreshold,omitempty"`
	UnhealthyThreshold int `json:"unhealthyThreshold,omitempty"`
}

// Defaults of a regional layer's health check (LayerHealthCheck).
const (
	DefaultLayerCheckIntervalMs    = 2000
	DefaultLayerCheckTimeoutMs     = 1000
	DefaultLayerHealthyThreshold   = 2
	DefaultLayerUnhealthyThreshold = 2
)

// Frontend layers (Frontend.Layer).
const (
	LayerEdge     = "EDGE"
	LayerRegional = "REGIONAL"
)

// Frontend is a Spillway extension: a listener (forwarding rule + target
// proxy in Google Cloud terms).
type Frontend struct {
	Name         string        `json:"name"`
	Address      string        `json:"address"`
	Protocol     string        `json:"protocol,omitempty"`
	URLMap       string        `json:"urlMap,omitempty"`
	Region       string        `json:"region,omitempty"`
	Certificates []Certificate `json:"certificates,omitempty"`
	// SslPolicy names an sslPolicies[] entry (HTTPS only), as a target
	// HTTPS proxy's sslPolicy does. Without one, Go's defaults apply
	// (TLS 1.2 and up).
	SslPolicy string `json:"sslPolicy,omitempty"`
	// ServerTLSPolicy names a serverTlsPolicies[] entry (HTTPS only), as a
	// target HTTPS proxy's serverTlsPolicy does: client certificates.
	ServerTLSPolicy string `json:"serverTlsPolicy,omitempty"`
	// SslCertificates names sslCertificates[] entries (HTTPS only), as a
	// target HTTPS proxy's sslCertificates does; they are offered after
	// certificates[], in order.
	SslCertificates []string `json:"sslCertificates,omitempty"`
	// QuicOverride is a target HTTPS proxy's quicOverride (HTTPS only):
	// ENABLE also serves HTTP/3 over QUIC on the same address and port
	// (UDP) and advertises it with Alt-Svc on the TCP responses; DISABLE
	// and NONE (the default) do not.
	QuicOverride string `json:"quicOverride,omitempty"`
	// Layer is the frontend's proxy layer (docs/global.md, "Two proxy
	// layers"): "" (one layer, the default), EDGE (pick the backend
	// service and region, forward to the region's regionalLayer when it
	// has one) or REGIONAL (serve an edge's requests: pick zone and
	// endpoint in Region).
	Layer string `json:"layer,omitempty"`
	// TrustedEdges (REGIONAL only) are the source prefixes whose
	// requests' internal edge headers are believed; from anyone else
	// they are removed. A client certificate verified by the frontend's
	// serverTlsPolicy is trusted as well.
	TrustedEdges []string `json:"trustedEdges,omitempty"`
	// AnycastPrefixes are the IPv4 and IPv6 prefixes spillway.bgp
	// announces for this frontend while it can serve them (bgp.go).
	AnycastPrefixes []string `json:"anycastPrefixes,omitempty"`
}

// QUIC reports whether the frontend serves HTTP/3 over QUIC
// (quicOverride ENABLE on an HTTPS frontend).
func (f *Frontend) QUIC() bool {
	return f != nil && f.Protocol == "HTTPS" && f.QuicOverride == "ENABLE"
}

// Certificate is a PEM certificate and key pair on disk. Both files are
// read again on every reload and whenever their content changes; with
// several certificates, each TLS handshake picks the first whose names
// match the client's SNI (else the first).
type Certificate struct {
	CertificateFile string `json:"certificateFile"`
	PrivateKeyFile  string `json:"privateKeyFile"`
}
