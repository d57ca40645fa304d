package config

import (
	"strings"
	"testing"
)

func TestValidateCDN(t *testing.T) {
	const um = "urlMaps:\n- name: um\n  defaultService: bs\n  pathMatchers:\n  - name: pm\n    defaultService: bs\n    pathRules: [{paths: ['/static/*'], service: https://www.googleapis.com/compute/v1/projects/p/global/backendBuckets/bb}]\n  hostRules: [{hosts: ['*'], pathMatcher: pm}]\n"
	const gcs = "backendBuckets:\n- name: bb\n  bucketName: my-assets\n  enableCdn: true\n"
	const bb = "backendBuckets:\n- name: bb\n  bucketName: /srv/static\n  enableCdn: true\n"
	for _, tc := range []struct{ name, bs, extra, want string }{
		{"valid", "  enableCDN: true\n  cdnPolicy: {cacheMode: CACHE_ALL_STATIC, defaultTtl: 60, maxTtl: 600, negativeCaching: true, negativeCachingPolicy: [{code: 404, ttl: 30}], cacheKeyPolicy: {queryStringWhitelist: [v]}, bypassCacheOnRequestHeaders: [{headerName: Pragma}]}\n", bb, ""},
		{"bad mode", "  enableCDN: true\n  cdnPolicy: {cacheMode: CACHE_EVERYTHING}\n", "", "cacheMode"},
		{"ttl over a year", "  enableCDN: true\n  cdnPolicy: {defaultTtl: 40000000}\n", "", "defaultTtl: 40000000 is out of range"},
		{"default over max", "  enableCDN: true\n  cdnPolicy: {defaultTtl: 600, maxTtl: 60}\n", "", "defaultTtl 600 is greater than maxTtl 60"},
		{"origin headers with ttl", "  enableCDN: true\n  cdnPolicy: {cacheMode: USE_ORIGIN_HEADERS, clientTtl: 5}\n", "", "clientTtl cannot be set with cacheMode USE_ORIGIN_HEADERS"},
		{"force with maxTtl", "  enableCDN: true\n  cdnPolicy: {cacheMode: FORCE_CACHE_ALL, maxTtl: 5}\n", "", "maxTtl cannot be set"},
		{"policy without negative caching", "  enableCDN: true\n  cdnPolicy: {negativeCachingPolicy: [{code: 404, ttl: 30}]}\n", "", "needs negativeCaching: true"},
		{"negative code", "  enableCDN: true\n  cdnPolicy: {negativeCaching: true, negativeCachingPolicy: [{code: 500, ttl: 30}]}\n", "", "500 cannot be negatively cached"},
		{"negative ttl", "  enableCDN: true\n  cdnPolicy: {negativeCaching: true, negativeCachingPolicy: [{code: 404, ttl: 3600}]}\n", "", "ttl: 3600 is out of range"},
		{"both lists", "  enableCDN: true\n  cdnPolicy: {cacheKeyPolicy: {queryStringWhitelist: [a], queryStringBlacklist: [b]}}\n", "", "both a whitelist and a blacklist"},
		{"stale over a week", "  enableCDN: true\n  cdnPolicy: {serveWhileStale: 700000}\n", "", "serveWhileStale"},
		{"bucket key policy", "", "backendBuckets:\n- name: bb\n  bucketName: /srv\n  enableCdn: true\n  cdnPolicy: {cacheKeyPolicy: {includeHost: false}}\n", "takes only queryStringWhitelist"},
		{"bucket URL", "", "backendBuckets:\n- name: bb\n  bucketName: gs://static\n", "map it to an S3-compatible bucket in spillway.buckets"},
		{"bucket named like a service", "", "backendBuckets:\n- name: bs\n  bucketName: /srv\n", "also the name of backendServices[bs]"},
		{"key for a non-CDN backend", "", bb + "spillway:\n  signedUrlKeys: [{backend: bs, keyName: k, keyValue: MDEyMzQ1Njc4OWFiY2RlZg==}]\n", "not a CDN-enabled backend"},
		{"short key", "", bb + "spillway:\n  signedUrlKeys: [{backend: bb, keyName: k, keyValue: YWJj}]\n", "not a 16-byte base64url key"},
		{"key value and file", "", bb + "spillway:\n  signedUrlKeys: [{backend: bb, keyName: k, keyValue: MDEyMzQ1Njc4OWFiY2RlZg==, keyFile: /k}]\n", "keyValue and keyFile are both set (fix: keep one of them)"},
		{"no key", "", bb + "spillway:\n  signedUrlKeys: [{backend: bb, keyName: k}]\n", "the key is missing (fix: set keyValue (16 random bytes in base64url) or keyFile (a file holding them))"},
		{"s3 mapping", "", gcs + "spillway:\n  buckets: [{bucketName: my-assets, s3: {endpoint: 'http://127.0.0.1:9000', region: us-east-1, credentialsFile: /etc/s3, profile: p, mainPageSuffix: index.html, timeoutSec: 5, maxConnections: 8}}]\n", ""},
		{"s3 other bucket", "", "backendBuckets:\n- name: bb\n  bucketName: My_Assets\n" + "spillway:\n  buckets: [{bucketName: My_Assets, s3: {endpoint: 'https://s3.example', bucket: assets}}]\n", ""},
		{"s3 bad bucket", "", "backendBuckets:\n- name: bb\n  bucketName: My_Assets\n" + "spillway:\n  buckets: [{bucketName: My_Assets, s3: {endpoint: 'https://s3.example'}}]\n", "spillway.buckets[0].s3.bucket: \"My_Assets\" is not an S3 bucket name (fix: set bucket"},
		{"s3 unmapped name", "", gcs + "spillway:\n  buckets: [{bucketName: other, s3: {endpoint: 'https://s3.example'}}]\n", "spillway.buckets[0].bucketName: no backend bucket has bucketName \"other\""},
		{"s3 twice", "", gcs + "spillway:\n  buckets: [{bucketName: my-assets, s3: {endpoint: 'https://s3.example'}}, {bucketName: my-assets, s3: {endpoint: 'https://s3.example'}}]\n", "already mapped by spillway.buckets[0]"},
		{"s3 missing", "", gcs + "spillway:\n  buckets: [{bucketName: my-assets}]\n", "spillway.buckets[0].s3: the bucket's S3-compatible service is missing"},
		{"s3 no endpoint", "", gcs + "spillway:\n  buckets: [{bucketName: my-assets, s3: {region: eu}}]\n", "spillway.buckets[0].s3.endpoint: an endpoint is required"},
		{"s3 endpoint scheme", "", gcs + "spillway:\n  buckets: [{bucketName: my-assets, s3: {endpoint: 's3.example:9000'}}]\n", "is not an http:// or https:// URL"},
		{"s3 inline credentials", "", gcs + "spillway:\n  buckets: [{bucketName: my-assets, s3: {endpoint: 'https://AKID:secret@s3.example'}}]\n", "the endpoint carries credentials (fix: remove the user information: put the keys in credentialsFile"},
		{"s3 endpoint path", "", gcs + "spillway:\n  buckets: [{bucketName: my-assets, s3: {endpoint: 'https://s3.example/my-assets'}}]\n", "has a path or query"},
		{"s3 profile alone", "", gcs + "spillway:\n  buckets: [{bucketName: my-assets, s3: {endpoint: 'https://s3.example', profile: p}}]\n", "profile without credentialsFile"},
		{"s3 timeout", "", gcs + "spillway:\n  buckets: [{bucketName: my-assets, s3: {endpoint: 'https://s3.example', timeoutSec: 0}}]\n", "timeoutSec: 0 is out of range"},
		{"s3 inline keys", "", gcs + "spillway:\n  buckets: [{bucketName: my-assets, s3: {endpoint: 'https://s3.example', secretAccessKey: x}}]\n", "unknown field \"secretAccessKey\""},
		{"good key", "", bb + "spillway:\n  signedUrlKeys: [{backend: bb, keyName: k, keyValue: MDEyMzQ1Njc4OWFiY2RlZg==}]\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := "networkEndpointGroups:\n- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: 127.0.0.1, port: 80}]}\n" +
				"backendServices:\n- name: bs\n  backends: [{group: neg}]\n" + tc.bs + tc.extra
			if strings.Contains(tc.extra, "name: bb") {
				y += um
			}
			c, err := Parse([]byte(y), "test.yaml")
			if err == nil {
				err = c.Validate()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
