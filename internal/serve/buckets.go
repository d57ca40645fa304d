package serve

import (
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwaylb/spillway/internal/cdn"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
)

// s3Buckets makes the origins of p's backend buckets that
// spillway.buckets maps to S3-compatible buckets, reading their
// credentials now (a file that does not load rejects the config, so a
// bad reload keeps the running one). Each takes over the counters, and
// when its endpoint is unchanged the connection pool, of the running
// config's origin of the same name.
func (s *Server) s3Buckets(p *plan.Plan) (map[string]*cdn.S3Bucket, error) {
	var old map[string]*cdn.S3Bucket
	if snap := s.snap.Load(); snap != nil {
		old = snap.Buckets
	}
	out := map[string]*cdn.S3Bucket{}
	for name, b := range p.Buckets {
		c := b.S3
		if c == nil {
			continue
		}
		at := fmt.Sprintf("spillway.buckets[bucketName=%s].s3", b.Config.BucketName)
		creds, err := cdn.S3Credentials(c.CredentialsFile, c.Profile)
		switch {
		case err != nil && c.CredentialsFile != "":
			return nil, fmt.Errorf("%s.credentialsFile: %w (fix: write an AWS credentials file with aws_access_key_id and aws_secret_access_key under [%s], or remove credentialsFile to use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", at, err, profileName(c.Profile))
		case err != nil:
			return nil, fmt.Errorf("%s: the AWS environment variables: %w (fix: set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither for a public bucket, or set credentialsFile)", at, err)
		}
		u, err := url.Parse(c.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("%s.endpoint: %w", at, err)
		}
		o := cdn.S3Options{Name: name, Endpoint: u, Bucket: c.Bucket, Region: c.Region, PathStyle: c.PathStyle == nil || *c.PathStyle,
			Credentials: creds, MainPageSuffix: c.MainPageSuffix, Logger: s.log}
		if o.Bucket == "" {
			o.Bucket = b.Config.BucketName
		}
		if c.TimeoutSec != nil {
			o.Timeout = time.Duration(*c.TimeoutSec) * time.Second
		}
		if c.MaxConnections != nil {
			o.MaxConns = *c.MaxConnections
		}
		out[name] = cdn.NewS3Bucket(o, old[name])
	}
	return out, nil
}

func profileName(p string) string {
	if p == "" {
		return "default"
	}
	return p
}

// closeReplaced closes the idle connections of old's origins whose pool
// the new snapshot's origins do not share.
func closeReplaced(old, cur map[string]*cdn.S3Bucket) {
	for name, b := range old {
		if !b.SharesPool(cur[name]) {
			b.CloseIdle()
		}
	}
}

// bucketMetrics collects the S3-compatible buckets' failures:
// spillway_bucket_errors_total by backend bucket and reason.
type bucketMetrics struct {
	snap   func() *proxy.Snapshot
	errors *prometheus.Desc
}

func newBucketMetrics(snap func() *proxy.Snapshot) *bucketMetrics {
	return &bucketMetrics{snap: snap, errors: prometheus.NewDesc("spillway_bucket_errors_total",
		"Requests an S3-compatible backend bucket failed, by reason: denied (403 from the service), missing_bucket, unreachable, timeout, server_error.",
		[]string{"bucket", "reason"}, nil)}
}

func (m *bucketMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.errors }

func (m *bucketMetrics) Collect(ch chan<- prometheus.Metric) {
	snap := m.snap()
	if snap == nil {
		return
	}
	for name, b := range snap.Buckets {
		k := b.Counts()
		for reason, n := range map[string]uint64{"denied": k.Denied.Load(), "missing_bucket": k.Missing.Load(),
			"unreachable": k.Unreachable.Load(), "timeout": k.Timeouts.Load(), "server_error": k.ServerErrors.Load()} {
			ch <- prometheus.MustNewConstMetric(m.errors, prometheus.CounterValue, float64(n), name, reason)
		}
	}
}
