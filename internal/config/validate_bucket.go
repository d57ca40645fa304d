package config

import (
	"net/url"
	"regexp"
	"strings"
)

// s3BucketName is S3's rule for bucket names: 3 to 63 lowercase
// letters, digits, dots and hyphens, starting and ending with a letter
// or digit.
var s3BucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// BucketMapping returns the spillway.buckets[] entry of bucketName, nil
// when there is none (the bucket is a local directory).
func (c *Config) BucketMapping(bucketName string) *BucketMapping {
	if c.Spillway == nil {
		return nil
	}
	for i := range c.Spillway.Buckets {
		if m := &c.Spillway.Buckets[i]; m.BucketName == bucketName {
			return m
		}
	}
	return nil
}

// bucketMappings validates spillway.buckets[].
func (v *validator) bucketMappings() {
	if v.c.Spillway == nil {
		return
	}
	names := map[string]bool{}
	for _, b := range v.c.BackendBuckets {
		names[b.BucketName] = true
	}
	seen := map[string]int{}
	for i, m := range v.c.Spillway.Buckets {
		p := at("spillway.buckets[%d]", i)
		switch j, dup := seen[m.BucketName]; {
		case m.BucketName == "":
			v.add(p+".bucketName", "name the backendBuckets[].bucketName this entry serves, e.g. bucketName: my-assets", "a bucket name is required")
		case dup:
			v.add(p+".bucketName", "map each bucket name once", "%q is already mapped by spillway.buckets[%d]", m.BucketName, j)
		case !names[m.BucketName]:
			v.add(p+".bucketName", "name a bucketName that a backendBuckets[] entry has, or remove the entry",
				"no backend bucket has bucketName %q", m.BucketName)
		}
		seen[m.BucketName] = i
		if m.S3 == nil {
			v.add(p+".s3", "add s3: {endpoint: https://s3.example:9000}", "the bucket's S3-compatible service is missing")
			continue
		}
		v.s3Bucket(p+".s3", m.BucketName, m.S3)
	}
}

// s3Bucket validates an s3 block at p of the mapping of bucketName.
func (v *validator) s3Bucket(p, bucketName string, s *S3Bucket) {
	v.s3Endpoint(p+".endpoint", s.Endpoint)
	switch {
	case s.Bucket != "" && !s3BucketName.MatchString(s.Bucket):
		v.add(p+".bucket", "use the S3 bucket's name: 3 to 63 lowercase letters, digits, '.' and '-'", "%q is not an S3 bucket name", s.Bucket)
	case s.Bucket == "" && !s3BucketName.MatchString(bucketName):
		v.add(p+".bucket", "set bucket to the S3 bucket's name (bucketName is not one)", "%q is not an S3 bucket name", bucketName)
	}
	if s.Region != "" && !isToken(s.Region) {
		v.add(p+".region", "name the region the bucket signs for, e.g. region: us-east-1", "%q is not a region name", s.Region)
	}
	if s.Profile != "" && s.CredentialsFile == "" {
		v.add(p+".profile", "set credentialsFile too, or remove profile (AWS_PROFILE applies to credentialsFile only)", "profile without credentialsFile")
	}
	if strings.Contains(s.MainPageSuffix, "/") || strings.HasPrefix(s.MainPageSuffix, ".") {
		v.add(p+".mainPageSuffix", "name an object, e.g. mainPageSuffix: index.html", "%q is not an object name", s.MainPageSuffix)
	}
	v.intRange(p+".timeoutSec", s.TimeoutSec, 1, 300)
	v.intRange(p+".maxConnections", s.MaxConnections, 1, 4096)
}

// s3Endpoint validates an S3 endpoint URL: http or https, a host, no
// path, query, fragment or user information (credentials are never
// inline).
func (v *validator) s3Endpoint(p, e string) {
	fix := "write the service's URL, e.g. endpoint: https://s3.us-east-1.amazonaws.com or http://127.0.0.1:9000"
	if e == "" {
		v.add(p, fix, "an endpoint is required")
		return
	}
	u, err := url.Parse(e)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		v.add(p, fix, "%q is not an http:// or https:// URL", e)
	case u.User != nil:
		v.add(p, "remove the user information: put the keys in credentialsFile or the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables",
			"the endpoint carries credentials")
	case strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "":
		v.add(p, "remove the path and query: the bucket goes in bucket, the key is the request path", "%q has a path or query", e)
	}
}
