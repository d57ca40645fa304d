package config

// Defaults of fields that are absent from a configuration. Parse leaves
// absent fields unset; the plan package applies these values. Where Google
// Cloud documents a default, the constant follows the API reference.
const (
	// DefaultCheckIntervalSec is healthChecks[].checkIntervalSec when unset.
	DefaultCheckIntervalSec = 5
	// DefaultTimeoutSec is healthChecks[].timeoutSec when unset.
	DefaultTimeoutSec = 5
	// DefaultHealthyThreshold is healthChecks[].healthyThreshold when unset:
	// consecutive successes that make an unhealthy endpoint healthy.
	DefaultHealthyThreshold = 2
	// DefaultUnhealthyThreshold is healthChecks[].unhealthyThreshold when
	// unset: consecutive failures that make a healthy endpoint unhealthy.
	DefaultUnhealthyThreshold = 2
	// DefaultFailoverHealthThreshold is
	// serviceLbPolicies[].failoverConfig.failoverHealthThreshold when unset
	// (70 for the global external Application Load Balancer).
	DefaultFailoverHealthThreshold = 70
	// ClassicFailoverHealthThreshold is the failover threshold of a
	// backend service of the classic Application Load Balancer
	// (loadBalancingScheme EXTERNAL): 50, Google's documented default.
	ClassicFailoverHealthThreshold = 50
	// Seed000NoPolicyFailoverHealthThreshold is the failover threshold of
	// an EXTERNAL_MANAGED backend service without a serviceLbPolicy under
	// spillway.fidelityProfile SEED_000: 50, what seed 000's no-policy
	// rows measure (docs/semantics.md §2.2). Without the profile such a
	// service takes DefaultFailoverHealthThreshold, Google's documented
	// value.
	Seed000NoPolicyFailoverHealthThreshold = 50
	// DefaultSecondLayerProxies is spillway.secondLayerProxies when unset:
	// how many second-layer proxies of a region one client's requests
	// pass through under WATERFALL_BY_REGION (docs/semantics.md §2.4).
	DefaultSecondLayerProxies = 8
	// DefaultBackendTimeoutSec is backendServices[].timeoutSec when unset.
	DefaultBackendTimeoutSec = 30
	// DefaultUndrainHoldSec is spillway.undrainHoldSec when unset: how long
	// a drained group must stay healthy enough before it is undrained.
	DefaultUndrainHoldSec = 60
	// DefaultDemandWindowSec is spillway.demandWindowSec when unset.
	DefaultDemandWindowSec = 1
	// DefaultNumRetries is routeAction.retryPolicy.numRetries when unset
	// (one retry: up to two attempts).
	DefaultNumRetries = 1
	// DefaultPortName is backendServices[].portName when unset, for
	// instance-group backends.
	DefaultPortName = "http"
	// DefaultMinimumRingSize is consistentHash.minimumRingSize when unset.
	DefaultMinimumRingSize = 1024
	// DefaultCapacityScaler is backends[].capacityScaler when unset.
	DefaultCapacityScaler = 1.0
)

// The values of spillway.fidelityProfile.
const (
	// FidelityDocumented follows Google's documentation where it and a
	// seed's measurements disagree (the default).
	FidelityDocumented = "DOCUMENTED"
	// FidelitySeed000 follows seed 000's measurements.
	FidelitySeed000 = "SEED_000"
)

// Defaults of outlierDetection fields, from the Compute Engine API v1
// reference (they differ from Envoy's and from older Terraform texts; the
// table in docs/semantics.md §4.2 has both). They apply only when
// outlierDetection is present: an absent block disables outlier detection.
const (
	// DefaultOutlierIntervalSec is outlierDetection.interval, in seconds.
	DefaultOutlierIntervalSec = 1
	// DefaultOutlierBaseEjectionTimeSec is outlierDetection.baseEjectionTime,
	// in seconds; an endpoint stays ejected base × times-ejected.
	DefaultOutlierBaseEjectionTimeSec = 30
	// DefaultOutlierMaxEjectionPercent caps the share of endpoints ejected.
	DefaultOutlierMaxEjectionPercent = 50
	// DefaultOutlierConsecutiveErrors is outlierDetection.consecutiveErrors.
	DefaultOutlierConsecutiveErrors = 5
	// DefaultOutlierConsecutiveGatewayFailure is
	// outlierDetection.consecutiveGatewayFailure (502/503/504).
	DefaultOutlierConsecutiveGatewayFailure = 3
	// DefaultOutlierEnforcingConsecutiveErrors is the percent chance of
	// ejecting on consecutiveErrors: 0, so plain 5xx ejection is off.
	DefaultOutlierEnforcingConsecutiveErrors = 0
	// DefaultOutlierEnforcingConsecutiveGatewayFailure is the percent chance
	// of ejecting on consecutiveGatewayFailure.
	DefaultOutlierEnforcingConsecutiveGatewayFailure = 100
	// DefaultOutlierEnforcingSuccessRate is the percent chance of ejecting a
	// success-rate outlier.
	DefaultOutlierEnforcingSuccessRate = 100
	// DefaultOutlierSuccessRateMinimumHosts is the number of endpoints with
	// enough volume needed to run success-rate detection.
	DefaultOutlierSuccessRateMinimumHosts = 5
	// DefaultOutlierSuccessRateRequestVolume is the requests per interval an
	// endpoint needs to count for success-rate detection.
	DefaultOutlierSuccessRateRequestVolume = 100
	// DefaultOutlierSuccessRateStdevFactor sets the success-rate threshold:
	// mean − (factor/1000)·stdev.
	DefaultOutlierSuccessRateStdevFactor = 1900
)
