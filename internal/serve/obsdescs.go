package serve

import "github.com/prometheus/client_golang/prometheus"

// obsDescs are the descriptors of the request, operational and DNS
// metrics, built once per metrics collector (no package-level state).
type obsDescs struct {
	descRequests    *prometheus.Desc
	descReqBytes    *prometheus.Desc
	descRespBytes   *prometheus.Desc
	descRetries     *prometheus.Desc
	descConnErrors  *prometheus.Desc
	descTimeouts    *prometheus.Desc
	descLatency     *prometheus.Desc
	descBackendLat  *prometheus.Desc
	descLogLines    *prometheus.Desc
	descLogDropped  *prometheus.Desc
	descLogErrors   *prometheus.Desc
	descEjections   *prometheus.Desc
	descProbes      *prometheus.Desc
	descProbeTime   *prometheus.Desc
	descShareRegion *prometheus.Desc
	descDNSQueries  *prometheus.Desc
	descDNSHealthy  *prometheus.Desc
	descDNSLimited  *prometheus.Desc
	descDNSEvicted  *prometheus.Desc
	descDNSSigCap   *prometheus.Desc
	descArmor       *prometheus.Desc
	// DNSSEC managed keys (dnskeys.go).
	descKeys, descKeyNext, descKeyFail *prometheus.Desc
}

// reqLabels are the labels of the request metrics.
func reqLabels() []string { return []string{"frontend", "backend_service", "group", "zone"} }

func newObsDescs() *obsDescs {
	reqLabels := reqLabels()
	return &obsDescs{
		descRequests:    prometheus.NewDesc("spillway_requests_total", "Requests answered, by frontend, backend service, backend group, zone and status class (0: no status sent).", append(append([]string(nil), reqLabels...), "code_class"), nil),
		descReqBytes:    prometheus.NewDesc("spillway_request_bytes_total", "Request bytes received: request line, headers and body.", reqLabels, nil),
		descRespBytes:   prometheus.NewDesc("spillway_response_bytes_total", "Response body bytes sent to clients.", reqLabels, nil),
		descRetries:     prometheus.NewDesc("spillway_retries_total", "Attempts after the first (retryPolicy and the default retry).", reqLabels, nil),
		descConnErrors:  prometheus.NewDesc("spillway_upstream_connect_errors_total", "Attempts whose connection to the endpoint could not be made.", reqLabels, nil),
		descTimeouts:    prometheus.NewDesc("spillway_upstream_timeouts_total", "Attempts cut by the per-try or request timeout before response headers.", reqLabels, nil),
		descLatency:     prometheus.NewDesc("spillway_request_duration_seconds", "Time from the request's arrival to the end of its response (Google's total latency).", reqLabels, nil),
		descBackendLat:  prometheus.NewDesc("spillway_backend_request_duration_seconds", "Time from sending the last attempt to its response headers (or failure).", reqLabels, nil),
		descLogLines:    prometheus.NewDesc("spillway_access_log_lines_total", "Access log lines written.", nil, nil),
		descLogDropped:  prometheus.NewDesc("spillway_access_log_dropped_total", "Access log lines dropped because the writer's queue was full.", nil, nil),
		descLogErrors:   prometheus.NewDesc("spillway_access_log_write_errors_total", "Access log lines that failed to write.", nil, nil),
		descEjections:   prometheus.NewDesc("spillway_outlier_ejections_total", "Endpoints ejected by outlier detection.", []string{"backend_service"}, nil),
		descProbes:      prometheus.NewDesc("spillway_probes_total", "Health check probes, by target address, health check type and result (success, failure).", []string{"target", "type", "result"}, nil),
		descProbeTime:   prometheus.NewDesc("spillway_probe_duration_seconds", "Health check probe latency.", []string{"target", "type"}, nil),
		descShareRegion: prometheus.NewDesc("spillway_backend_traffic_share_by_frontend", "Share of the backend service's traffic the backend receives from the frontend's clients (its region; client_region is empty for a frontend without one), 0-1.", []string{"frontend", "client_region", "backend_service", "group", "zone"}, nil),
		descKeys:        prometheus.NewDesc("spillway_dnssec_keys", "Managed DNSSEC keys of a zone, by role (KSK, ZSK) and phase (published, active, retired).", []string{"zone", "role", "phase"}, nil),
		descKeyNext:     prometheus.NewDesc("spillway_dnssec_next_key_event_timestamp_seconds", "When a zone's managed keys next change (Unix seconds; 0: nothing scheduled).", []string{"zone"}, nil),
		descKeyFail:     prometheus.NewDesc("spillway_dnssec_key_step_failures_total", "Key steps (a rollover's next phase) that failed; the zone keeps serving its keys and the step is retried.", nil, nil),
		descArmor:       prometheus.NewDesc("spillway_security_policy_requests_total", "Requests a security policy rule decided, by policy, rule priority, result (ACCEPT, DENY, REDIRECT) and whether the rule is in preview (it would have decided so).", []string{"policy", "priority", "result", "preview"}, nil),
		descDNSQueries:  prometheus.NewDesc("spillway_dns_queries_total", "DNS queries answered, by name (a name of the zones, empty for any other), query type, response code and the GSLB member answered first (empty for static answers).", []string{"name", "type", "rcode", "member"}, nil),
		descDNSHealthy:  prometheus.NewDesc("spillway_dns_member_healthy", "1 while the GSLB member is healthy (answered), else 0.", []string{"name", "member"}, nil),
		descDNSLimited:  prometheus.NewDesc("spillway_dns_rrl_limited_total", "UDP replies response rate limiting held back, by class (answer, referral, nxdomain, nodata, error) and action (slipped: sent truncated; dropped).", []string{"class", "action"}, nil),
		descDNSEvicted:  prometheus.NewDesc("spillway_dns_rrl_evictions_total", "Rate-limit table entries still in debt that were evicted to make room (raise tableSize if it grows).", nil, nil),
		descDNSSigCap:   prometheus.NewDesc("spillway_dns_denial_signatures_refused_total", "Denials of signed zones answered without a fresh signature because of dnsMaxDenialSignaturesPerSecond, by transport (udp: truncated, tcp: SERVFAIL).", []string{"transport"}, nil),
	}
}

// all returns every descriptor, for Describe.
func (d *obsDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{d.descRequests, d.descReqBytes, d.descRespBytes, d.descRetries, d.descConnErrors, d.descTimeouts, d.descLatency, d.descBackendLat, d.descLogLines, d.descLogDropped, d.descLogErrors, d.descEjections, d.descProbes, d.descProbeTime, d.descShareRegion, d.descDNSQueries, d.descDNSHealthy, d.descDNSLimited, d.descDNSEvicted, d.descDNSSigCap, d.descArmor, d.descKeys, d.descKeyNext, d.descKeyFail}
}
