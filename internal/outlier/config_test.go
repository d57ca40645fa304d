package outlier

import (
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

func ptr[T any](v T) *T { return &v }

// apiDefaults is Google's API v1 defaults, written out independently of
// the config package's constants.
var apiDefaults = Config{
	Interval:                           time.Second,
	BaseEjectionTime:                   30 * time.Second,
	MaxEjectionPercent:                 50,
	ConsecutiveErrors:                  5,
	ConsecutiveGatewayFailure:          3,
	EnforcingConsecutiveErrors:         0,
	EnforcingConsecutiveGatewayFailure: 100,
	EnforcingSuccessRate:               100,
	SuccessRateMinimumHosts:            5,
	SuccessRateRequestVolume:           100,
	SuccessRateStdevFactor:             1900,
}

func TestFromConfig(t *testing.T) {
	tests := []struct {
		name string
		in   *config.OutlierDetection
		want func(c *Config)
	}{
		{"nil", nil, func(*Config) {}},
		{"empty", &config.OutlierDetection{}, func(*Config) {}},
		{
			"partial",
			&config.OutlierDetection{
				Interval:                  &config.Duration{Seconds: 10},
				BaseEjectionTime:          &config.Duration{Seconds: 1, Nanos: 500_000_000},
				ConsecutiveGatewayFailure: ptr(5),
			},
			func(c *Config) {
				c.Interval = 10 * time.Second
				c.BaseEjectionTime = 1500 * time.Millisecond
				c.ConsecutiveGatewayFailure = 5
			},
		},
		{
			"explicit zeros are kept",
			&config.OutlierDetection{
				EnforcingConsecutiveGatewayFailure: ptr(0),
				MaxEjectionPercent:                 ptr(0),
				SuccessRateMinimumHosts:            ptr(0),
			},
			func(c *Config) {
				c.EnforcingConsecutiveGatewayFailure = 0
				c.MaxEjectionPercent = 0
				c.SuccessRateMinimumHosts = 0
			},
		},
		{
			"all set",
			&config.OutlierDetection{
				ConsecutiveErrors:                  ptr(7),
				ConsecutiveGatewayFailure:          ptr(8),
				EnforcingConsecutiveErrors:         ptr(9),
				EnforcingConsecutiveGatewayFailure: ptr(10),
				EnforcingSuccessRate:               ptr(11),
				Interval:                           &config.Duration{Nanos: 250_000_000},
				BaseEjectionTime:                   &config.Duration{Seconds: 180},
				MaxEjectionPercent:                 ptr(12),
				SuccessRateMinimumHosts:            ptr(13),
				SuccessRateRequestVolume:           ptr(14),
				SuccessRateStdevFactor:             ptr(15),
			},
			func(c *Config) {
				*c = Config{
					Interval: 250 * time.Millisecond, BaseEjectionTime: 180 * time.Second,
					MaxEjectionPercent: 12, ConsecutiveErrors: 7, ConsecutiveGatewayFailure: 8,
					EnforcingConsecutiveErrors: 9, EnforcingConsecutiveGatewayFailure: 10,
					EnforcingSuccessRate: 11, SuccessRateMinimumHosts: 13,
					SuccessRateRequestVolume: 14, SuccessRateStdevFactor: 15,
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := apiDefaults
			tt.want(&want)
			if got := FromConfig(tt.in); got != want {
				t.Errorf("FromConfig = %+v\nwant %+v", got, want)
			}
		})
	}
}
