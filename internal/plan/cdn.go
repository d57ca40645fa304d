package plan

import (
	"github.com/spillwaylb/spillway/internal/cdnpolicy"
	"github.com/spillwaylb/spillway/internal/config"
)

// Bucket is a compiled backend bucket: a local directory, or the
// S3-compatible bucket spillway.buckets maps its bucketName to, served
// read-only (Spillway's mapping of bucketName).
type Bucket struct {
	Name string
	// Dir is the directory served (bucketName), when S3 is nil.
	Dir string
	// S3 is the S3-compatible bucket served, nil for a directory.
	S3 *config.S3Bucket
	// CDN is the compiled cdnPolicy, nil when enableCdn is false.
	CDN    *cdnpolicy.Policy
	Config *config.BackendBucket
}

// compileCDN compiles the backend buckets and the CDN policies of the
// compiled services.
func (cc *compiler) compileCDN(c *config.Config, files map[string]map[string][]byte) {
	keys := signedKeys(c, files)
	var maxObject int64
	if c.Spillway != nil && c.Spillway.CDN != nil && c.Spillway.CDN.MaxObjectBytes != nil {
		maxObject = *c.Spillway.CDN.MaxObjectBytes
	}
	for _, s := range cc.p.Services {
		if s.Config.EnableCDN {
			s.CDN = cdnpolicy.Compile(s.Config.CdnPolicy, keys[s.Name], maxObject)
		}
	}
	cc.p.Buckets = map[string]*Bucket{}
	for i := range c.BackendBuckets {
		bb := &c.BackendBuckets[i]
		b := &Bucket{Name: bb.Name, Dir: bb.BucketName, Config: bb}
		if m := c.BucketMapping(bb.BucketName); m != nil {
			b.S3 = m.S3
		}
		if bb.EnableCdn {
			b.CDN = cdnpolicy.Compile(bb.CdnPolicy, keys[bb.Name], maxObject)
		}
		cc.p.Buckets[b.Name] = b
	}
}

// signedKeys gathers spillway.signedUrlKeys by backend and key name:
// inline keyValue keys, and the keyFile keys the caller read (files,
// by backend and key name).
func signedKeys(c *config.Config, files map[string]map[string][]byte) map[string]map[string][]byte {
	out := map[string]map[string][]byte{}
	for b, m := range files {
		for n, k := range m {
			add(out, b, n, k)
		}
	}
	if c.Spillway == nil {
		return out
	}
	for _, k := range c.Spillway.SignedURLKeys {
		if k.KeyValue == "" {
			continue
		}
		if key, err := cdnpolicy.DecodeKey(k.KeyValue); err == nil {
			add(out, config.RefName(k.Backend), k.KeyName, key)
		}
	}
	return out
}

func add(m map[string]map[string][]byte, backend, name string, key []byte) {
	if m[backend] == nil {
		m[backend] = map[string][]byte{}
	}
	m[backend][name] = key
}
