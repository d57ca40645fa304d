package config

// CdnPolicy is backendService.cdnPolicy and backendBucket.cdnPolicy
// (Google's BackendServiceCdnPolicy and BackendBucketCdnPolicy): how
// Cloud CDN caches the backend's responses. It is read only while the
// backend's enableCDN (enableCdn on buckets) is true. Durations are in
// seconds, as in Google's API. docs/cdn.md describes each field.
type CdnPolicy struct {
	// CacheMode is CACHE_ALL_STATIC (the default), USE_ORIGIN_HEADERS or
	// FORCE_CACHE_ALL.
	CacheMode string `json:"cacheMode,omitempty"`
	// DefaultTTL is the TTL of responses without an explicit one
	// (default 3600); MaxTTL caps origin TTLs under CACHE_ALL_STATIC
	// (default 86400); ClientTTL caps the max-age sent to clients
	// (default 3600). 0 to 31,622,400.
	DefaultTTL *int `json:"defaultTtl,omitempty"`
	MaxTTL     *int `json:"maxTtl,omitempty"`
	ClientTTL  *int `json:"clientTtl,omitempty"`
	// NegativeCaching caches error and redirect statuses for the TTLs of
	// NegativeCachingPolicy, or Google's defaults when it is empty.
	NegativeCaching       *bool                   `json:"negativeCaching,omitempty"`
	NegativeCachingPolicy []NegativeCachingPolicy `json:"negativeCachingPolicy,omitempty"`
	// ServeWhileStale is how long past its TTL an object may be served
	// while it is revalidated or while the origin fails (default 86400,
	// at most 604800; 0 turns it off).
	ServeWhileStale *int `json:"serveWhileStale,omitempty"`
	// RequestCoalescing sends one origin request for concurrent misses
	// of one key (default true).
	RequestCoalescing *bool `json:"requestCoalescing,omitempty"`
	// CacheKeyPolicy says what the cache key is made of.
	CacheKeyPolicy *CacheKeyPolicy `json:"cacheKeyPolicy,omitempty"`
	// BypassCacheOnRequestHeaders: a request carrying any of these
	// headers goes to the origin, and its response is not stored (at
	// most 5).
	BypassCacheOnRequestHeaders []BypassCacheOnRequestHeader `json:"bypassCacheOnRequestHeaders,omitempty"`
	// SignedURLCacheMaxAgeSec is how long a response to a signed request
	// is fresh, whatever its Cache-Control (default 3600).
	SignedURLCacheMaxAgeSec *int `json:"signedUrlCacheMaxAgeSec,omitempty"`
	// SignedURLKeyNames is output only in Google's API (the keys are
	// added with gcloud … add-signed-url-key); accepted and ignored.
	// Spillway's keys are in spillway.signedUrlKeys.
	SignedURLKeyNames []string `json:"signedUrlKeyNames,omitempty"`
}

// NegativeCachingPolicy is one negativeCachingPolicy[] entry.
type NegativeCachingPolicy struct {
	Code int  `json:"code"`
	TTL  *int `json:"ttl,omitempty"`
}

// CacheKeyPolicy is cdnPolicy.cacheKeyPolicy. Backend buckets take only
// queryStringWhitelist and includeHttpHeaders (as in Google's API).
type CacheKeyPolicy struct {
	IncludeHost          *bool    `json:"includeHost,omitempty"`
	IncludeProtocol      *bool    `json:"includeProtocol,omitempty"`
	IncludeQueryString   *bool    `json:"includeQueryString,omitempty"`
	QueryStringWhitelist []string `json:"queryStringWhitelist,omitempty"`
	QueryStringBlacklist []string `json:"queryStringBlacklist,omitempty"`
	IncludeHTTPHeaders   []string `json:"includeHttpHeaders,omitempty"`
	IncludeNamedCookies  []string `json:"includeNamedCookies,omitempty"`
}

// BypassCacheOnRequestHeader is one bypassCacheOnRequestHeaders[] entry.
type BypassCacheOnRequestHeader struct {
	HeaderName string `json:"headerName"`
}

// BackendBucket is a compute#backendBucket. Spillway's mapping:
// bucketName names a local directory whose files are served read-only,
// unless a spillway.buckets[] entry maps it to an S3-compatible bucket
// (docs/cdn.md); Cloud Storage is not reached under its own API.
type BackendBucket struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	OutputOnly
	BucketName string     `json:"bucketName"`
	EnableCdn  bool       `json:"enableCdn,omitempty"`
	CdnPolicy  *CdnPolicy `json:"cdnPolicy,omitempty"`
	// CustomResponseHeaders are added to the bucket's responses.
	CustomResponseHeaders []string `json:"customResponseHeaders,omitempty"`
	// EdgeSecurityPolicy names a CLOUD_ARMOR_EDGE policy.
	EdgeSecurityPolicy string `json:"edgeSecurityPolicy,omitempty"`
	// CompressionMode is accepted; only DISABLED (or unset) is served.
	CompressionMode string `json:"compressionMode,omitempty"`
}

// CDN is spillway.cdn: the cache's store, shared by every CDN-enabled
// backend (Google runs its own; docs/extensions.md).
type CDN struct {
	// MemoryBytes bounds the in-memory tier (default 256 MiB).
	MemoryBytes *int64 `json:"memoryBytes,omitempty"`
	// MaxObjectBytes is the largest response stored (default 10 MiB,
	// Google's limit for origins without byte ranges).
	MaxObjectBytes *int64 `json:"maxObjectBytes,omitempty"`
	// DiskPath, when set, is a directory holding a second tier that
	// survives restarts, bounded by DiskBytes (default 1 GiB).
	DiskPath  string `json:"diskPath,omitempty"`
	DiskBytes *int64 `json:"diskBytes,omitempty"`
}

// SignedURLKey is one spillway.signedUrlKeys[] entry: a signed URL key
// of a backend service or bucket, which Google keeps out of band
// (gcloud compute backend-services add-signed-url-key).
type SignedURLKey struct {
	// Backend names the backendServices[] or backendBuckets[] entry.
	Backend string `json:"backend"`
	// KeyName is the KeyName the signed URLs and cookies carry.
	KeyName string `json:"keyName"`
	// KeyValue is the 16-byte key in base64url, as gcloud's
	// --key-file holds it; KeyFile names a file holding it instead.
	KeyValue string `json:"keyValue,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
}

// BucketMapping is one spillway.buckets[] entry: where the objects of
// the backend buckets with this bucketName are read, instead of a local
// directory of that name.
type BucketMapping struct {
	// BucketName is a backendBuckets[].bucketName, as Google's export
	// has it (a Cloud Storage bucket name).
	BucketName string `json:"bucketName"`
	// S3 is the S3-compatible bucket serving it.
	S3 *S3Bucket `json:"s3,omitempty"`
}

// S3Bucket is an S3-compatible bucket read over the S3 API (GET and
// HEAD only). Credentials are never in the config: CredentialsFile, else
// the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables,
// else none (a public bucket).
type S3Bucket struct {
	// Endpoint is the service's http:// or https:// URL, without path,
	// query or user information, e.g. https://s3.us-east-1.amazonaws.com
	// or http://127.0.0.1:9000.
	Endpoint string `json:"endpoint"`
	// Bucket is the S3 bucket's name (default: the mapping's bucketName).
	Bucket string `json:"bucket,omitempty"`
	// Region signs the requests (default us-east-1).
	Region string `json:"region,omitempty"`
	// PathStyle addresses the bucket as ENDPOINT/BUCKET/KEY (default
	// true); false uses BUCKET.ENDPOINT-HOST/KEY (virtual-hosted).
	PathStyle *bool `json:"pathStyle,omitempty"`
	// CredentialsFile is an AWS shared credentials file
	// ([profile] aws_access_key_id, aws_secret_access_key,
	// aws_session_token), read at start and on every reload; Profile
	// picks its section (default: AWS_PROFILE, else default).
	CredentialsFile string `json:"credentialsFile,omitempty"`
	Profile         string `json:"profile,omitempty"`
	// MainPageSuffix is the object served for a path ending in '/'
	// (appended to it, as Cloud Storage's website.mainPageSuffix); empty:
	// such paths are 404.
	MainPageSuffix string `json:"mainPageSuffix,omitempty"`
	// TimeoutSec bounds the wait for the service's response headers,
	// connecting included (default 10, 1 to 300).
	TimeoutSec *int `json:"timeoutSec,omitempty"`
	// MaxConnections bounds the connections open to the endpoint
	// (default 64, 1 to 4096); requests past it wait for one, within
	// TimeoutSec.
	MaxConnections *int `json:"maxConnections,omitempty"`
}
