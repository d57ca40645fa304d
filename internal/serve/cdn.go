package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"reflect"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwaylb/spillway/internal/cdn"
	"github.com/spillwaylb/spillway/internal/cdnpolicy"
	"github.com/spillwaylb/spillway/internal/config"
)

// cdnCache is the process's Cloud CDN cache. It is made once, from the
// spillway.cdn block of the config serve starts with (a reload keeps the
// store and its size: the objects stay, each request applies its
// backend's current cdnPolicy), and closed when Run returns.
type cdnCache struct {
	cache *cdn.Cache
	conf  config.CDN // the spillway.cdn the store was made with
}

// In fleet mode (hold) the disk tier is not read until the fleet's
// invalidations have been caught up on (CacheCaughtUp).
func newCache(cfg *config.Config, log *slog.Logger, hold bool) (cdnCache, error) {
	conf := cdnOf(cfg)
	o := cdn.Options{Logger: log, HoldDisk: hold, DiskPath: conf.DiskPath}
	if conf.MemoryBytes != nil {
		o.MemoryBytes = *conf.MemoryBytes
	}
	if conf.DiskBytes != nil {
		o.DiskBytes = *conf.DiskBytes
	}
	c, err := cdn.New(o)
	if err != nil {
		return cdnCache{}, fmt.Errorf("spillway.cdn: %w", err)
	}
	return cdnCache{cache: c, conf: conf}, nil
}

// cdnOf returns cfg's spillway.cdn (zero when absent).
func cdnOf(cfg *config.Config) config.CDN {
	if cfg.Spillway == nil || cfg.Spillway.CDN == nil {
		return config.CDN{}
	}
	return *cfg.Spillway.CDN
}

// storeChanged reports whether cfg's spillway.cdn differs from the one
// the store was made with: a reload cannot apply it (a restart does).
func (c cdnCache) storeChanged(cfg *config.Config) bool {
	return !reflect.DeepEqual(c.conf, cdnOf(cfg))
}

// Close writes the disk tier's queue and stops its writer.
func (c cdnCache) Close() error {
	if c.cache == nil {
		return nil
	}
	return c.cache.Close()
}

// readSignedKeys reads spillway.signedUrlKeys[].keyFile, by backend and
// key name.
func readSignedKeys(cfg *config.Config) (map[string]map[string][]byte, error) {
	if cfg.Spillway == nil {
		return nil, nil
	}
	out := map[string]map[string][]byte{}
	for i, k := range cfg.Spillway.SignedURLKeys {
		if k.KeyFile == "" {
			continue
		}
		b, err := os.ReadFile(k.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("spillway.signedUrlKeys[%d].keyFile: %w (fix: create the file with the key, 16 random bytes in base64url, or set keyValue instead)", i, err)
		}
		key, err := cdnpolicy.DecodeKey(string(b))
		if err != nil {
			return nil, fmt.Errorf("spillway.signedUrlKeys[%d].keyFile %s: %w (fix: 16 random bytes in base64url, as gcloud's --key-file holds them)", i, k.KeyFile, err)
		}
		name := config.RefName(k.Backend)
		if out[name] == nil {
			out[name] = map[string][]byte{}
		}
		out[name][k.KeyName] = key
	}
	return out, nil
}

// checkBuckets refuses a backend bucket whose bucketName is neither
// mapped to an S3-compatible bucket (spillway.buckets) nor a
// directory here (a typo, a volume not mounted): served, every request
// to it would be answered 503. It runs at start and on every reload, so
// a reload naming a missing directory keeps the running config.
func checkBuckets(cfg *config.Config) error {
	for _, b := range cfg.BackendBuckets {
		if cfg.BucketMapping(b.BucketName) != nil {
			continue // an S3-compatible bucket (spillway.buckets), not a directory
		}
		info, err := os.Stat(b.BucketName)
		switch {
		case err != nil:
			if pe, ok := errors.AsType[*fs.PathError](err); ok {
				err = pe.Err // the path is said once, below
			}
			return fmt.Errorf("backendBuckets[%s].bucketName: %s: %w (fix: create the directory, or name the one whose files the bucket serves)", b.Name, b.BucketName, err)
		case !info.IsDir():
			return fmt.Errorf("backendBuckets[%s].bucketName: %s is not a directory (fix: name the directory whose files the bucket serves)", b.Name, b.BucketName)
		}
	}
	return nil
}

// InvalidateRequest is the body of POST /cache/invalidate (spillway
// cache invalidate): Google's CacheInvalidationRule.
type InvalidateRequest struct {
	Path string `json:"path"`
	Host string `json:"host,omitempty"`
}

// InvalidateResponse is its answer.
type InvalidateResponse struct {
	Path    string `json:"path"`
	Host    string `json:"host,omitempty"`
	Removed int    `json:"removed"`
	// Fleet is true when the invalidation was also written for the
	// other instances of the fleet.
	Fleet bool `json:"fleet,omitempty"`
}

// CacheInvalidations carries an invalidation applied on this instance to
// the others (fleet.CacheShare).
type CacheInvalidations interface {
	Publish(ctx context.Context, host, path string) error
}

// invalidateHandler serves POST /cache/invalidate: the invalidation
// applies here, then (fleet mode) is published for the other instances;
// when that fails the answer is 503, saying it applied here only.
func (c cdnCache) invalidateHandler(log *slog.Logger, fleet CacheInvalidations) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req InvalidateRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
			http.Error(w, "bad request: want JSON {\"path\": \"/images/*\", \"host\": \"optional\"}", http.StatusBadRequest)
			return
		}
		n, err := c.cache.Invalidate(req.Host, req.Path)
		if err != nil {
			http.Error(w, "path "+req.Path+": "+err.Error(), http.StatusBadRequest)
			return
		}
		log.Info("cache invalidated", "path", req.Path, "host", req.Host, "removed", n, "from", r.RemoteAddr)
		resp := InvalidateResponse{Path: req.Path, Host: req.Host, Removed: n}
		if fleet != nil {
			if err := fleet.Publish(r.Context(), req.Host, req.Path); err != nil {
				log.Error("cache invalidation not published to the fleet", "path", req.Path, "host", req.Host, "err", err)
				http.Error(w, fmt.Sprintf("invalidated on this instance only (%d objects removed); the other instances were not told: %v (fix: check etcd, then run it again)", n, err), http.StatusServiceUnavailable)
				return
			}
			resp.Fleet = true
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
}

// InvalidateCache removes the objects of path (and host) from the
// cache: an invalidation from the fleet (fleet.CacheHost).
func (s *Server) InvalidateCache(host, path string) (int, error) {
	if s.cache.cache == nil {
		return 0, nil
	}
	return s.cache.cache.Invalidate(host, path)
}

// ClearCache removes every object from the cache (fleet.CacheHost).
func (s *Server) ClearCache() int {
	if s.cache.cache == nil {
		return 0
	}
	return s.cache.cache.Clear()
}

// CacheMark returns the fleet's invalidation mark saved beside the disk
// tier, and whether there is one (fleet.CacheHost).
func (s *Server) CacheMark() (string, bool) {
	if s.cache.cache == nil {
		return "", false
	}
	return s.cache.cache.Mark()
}

// CacheCaughtUp lets the disk tier be read once the fleet's
// invalidations have been applied to it (fleet.CacheHost).
func (s *Server) CacheCaughtUp() {
	if s.cache.cache != nil {
		s.cache.cache.ReleaseDisk()
	}
}

// SetCacheMark saves the fleet's invalidation mark beside the disk tier
// (fleet.CacheHost).
func (s *Server) SetCacheMark(mark string) error {
	if s.cache.cache == nil {
		return nil
	}
	return s.cache.cache.SetMark(mark)
}

// cdnMetrics collects the cache's metrics: per backend (a label bounded
// by the backends configured since start) hits, misses and bytes, and the
// store's size.
type cdnMetrics struct {
	c                                   *cdn.Cache
	hits, misses, bypass, hitB, fillB   *prometheus.Desc
	objects, bytes, capacity, evictions *prometheus.Desc
}

func newCDNMetrics(c *cdn.Cache) *cdnMetrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("spillway_cdn_"+name, help, labels, nil)
	}
	return &cdnMetrics{c: c,
		hits:      d("hits_total", "Requests answered from Cloud CDN's cache (fresh, stale or revalidated).", "backend"),
		misses:    d("misses_total", "Cache lookups that went to the origin.", "backend"),
		bypass:    d("bypass_total", "Requests that skipped the cache (bypassCacheOnRequestHeaders).", "backend"),
		hitB:      d("hit_bytes_total", "Body bytes served from the cache.", "backend"),
		fillB:     d("fill_bytes_total", "Body bytes stored from the origin (cacheFillBytes).", "backend"),
		objects:   d("objects", "Objects in the cache's tier.", "tier"),
		bytes:     d("bytes", "Bytes in the cache's tier.", "tier"),
		capacity:  d("capacity_bytes", "Bound of the cache's tier.", "tier"),
		evictions: d("evictions_total", "Objects evicted from the memory tier."),
	}
}

func (m *cdnMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.hits, m.misses, m.bypass, m.hitB, m.fillB, m.objects, m.bytes, m.capacity, m.evictions} {
		ch <- d
	}
}

func (m *cdnMetrics) Collect(ch chan<- prometheus.Metric) {
	c := prometheus.CounterValue
	m.c.EachCounters(func(b string, k *cdn.Counters) {
		ch <- prometheus.MustNewConstMetric(m.hits, c, float64(k.Hits.Load()), b)
		ch <- prometheus.MustNewConstMetric(m.misses, c, float64(k.Misses.Load()), b)
		ch <- prometheus.MustNewConstMetric(m.bypass, c, float64(k.Bypasses.Load()), b)
		ch <- prometheus.MustNewConstMetric(m.hitB, c, float64(k.HitBytes.Load()), b)
		ch <- prometheus.MustNewConstMetric(m.fillB, c, float64(k.FillBytes.Load()), b)
	})
	s := m.c.Memory().Stats()
	g := prometheus.GaugeValue
	ch <- prometheus.MustNewConstMetric(m.objects, g, float64(s.Objects), "memory")
	ch <- prometheus.MustNewConstMetric(m.bytes, g, float64(s.Bytes), "memory")
	ch <- prometheus.MustNewConstMetric(m.capacity, g, float64(s.Capacity), "memory")
	ch <- prometheus.MustNewConstMetric(m.evictions, c, float64(s.Evictions))
	if d := m.c.Disk(); d != nil {
		n, b, capa := d.Stats()
		ch <- prometheus.MustNewConstMetric(m.objects, g, float64(n), "disk")
		ch <- prometheus.MustNewConstMetric(m.bytes, g, float64(b), "disk")
		ch <- prometheus.MustNewConstMetric(m.capacity, g, float64(capa), "disk")
	}
}
