package outlier

import (
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// Config is backendService.outlierDetection with Google's API defaults
// applied (docs/semantics.md §4.2). Percentages are 0..100.
type Config struct {
	// Interval is the time between Sweeps (ejection analysis). Default 1 s.
	// The Detector does not time itself; the caller calls Sweep this often.
	Interval time.Duration
	// BaseEjectionTime is multiplied by the ejection count to give the
	// ejection time. Default 30 s.
	BaseEjectionTime time.Duration
	// MaxEjectionPercent caps the share of endpoints ejected at once.
	// Default 50.
	MaxEjectionPercent int
	// ConsecutiveErrors is the run of errors (5xx or no response) that
	// triggers an ejection attempt; <= 0 disables it. Default 5.
	ConsecutiveErrors int
	// ConsecutiveGatewayFailure is the run of gateway failures (502, 503,
	// 504 or no response) that triggers an ejection attempt; <= 0 disables
	// it. Default 3.
	ConsecutiveGatewayFailure int
	// EnforcingConsecutiveErrors is the percent chance that a
	// ConsecutiveErrors run ejects. Default 0 (detect, never eject).
	EnforcingConsecutiveErrors int
	// EnforcingConsecutiveGatewayFailure is the percent chance that a
	// ConsecutiveGatewayFailure run ejects. Default 100.
	EnforcingConsecutiveGatewayFailure int
	// EnforcingSuccessRate is the percent chance that a success-rate
	// outlier is ejected. Default 100.
	EnforcingSuccessRate int
	// SuccessRateMinimumHosts is the number of endpoints with enough volume
	// needed to run success-rate analysis. Default 5.
	SuccessRateMinimumHosts int
	// SuccessRateRequestVolume is the requests in one interval an endpoint
	// needs to take part in success-rate analysis. Default 100.
	SuccessRateRequestVolume int
	// SuccessRateStdevFactor sets the threshold mean - factor/1000*stdev.
	// Default 1900 (1.9 standard deviations).
	SuccessRateStdevFactor int
}

// FromConfig applies the API defaults to c. It is nil-safe: a nil c or an
// unset field takes the default. Note that in the API an absent
// outlierDetection block disables the feature; deciding that is the
// caller's job, FromConfig(nil) just returns the defaults.
func FromConfig(c *config.OutlierDetection) Config {
	if c == nil {
		c = &config.OutlierDetection{}
	}
	return Config{
		Interval:                           duration(c.Interval, config.DefaultOutlierIntervalSec),
		BaseEjectionTime:                   duration(c.BaseEjectionTime, config.DefaultOutlierBaseEjectionTimeSec),
		MaxEjectionPercent:                 intOr(c.MaxEjectionPercent, config.DefaultOutlierMaxEjectionPercent),
		ConsecutiveErrors:                  intOr(c.ConsecutiveErrors, config.DefaultOutlierConsecutiveErrors),
		ConsecutiveGatewayFailure:          intOr(c.ConsecutiveGatewayFailure, config.DefaultOutlierConsecutiveGatewayFailure),
		EnforcingConsecutiveErrors:         intOr(c.EnforcingConsecutiveErrors, config.DefaultOutlierEnforcingConsecutiveErrors),
		EnforcingConsecutiveGatewayFailure: intOr(c.EnforcingConsecutiveGatewayFailure, config.DefaultOutlierEnforcingConsecutiveGatewayFailure),
		EnforcingSuccessRate:               intOr(c.EnforcingSuccessRate, config.DefaultOutlierEnforcingSuccessRate),
		SuccessRateMinimumHosts:            intOr(c.SuccessRateMinimumHosts, config.DefaultOutlierSuccessRateMinimumHosts),
		SuccessRateRequestVolume:           intOr(c.SuccessRateRequestVolume, config.DefaultOutlierSuccessRateRequestVolume),
		SuccessRateStdevFactor:             intOr(c.SuccessRateStdevFactor, config.DefaultOutlierSuccessRateStdevFactor),
	}
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func duration(d *config.Duration, defSec int) time.Duration {
	if d == nil {
		return time.Duration(defSec) * time.Second
	}
	return time.Duration(d.Seconds)*time.Second + time.Duration(d.Nanos)
}
