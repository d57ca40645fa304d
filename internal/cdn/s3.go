package cdn

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
	"github.com/minio/minio-go/v7/pkg/signer"
)

// emptySHA256 is the SHA-256 of an empty body, the signed payload hash
// of GET and HEAD requests.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// S3Options configures an S3 bucket origin.
type S3Options struct {
	// Name is the backend bucket's name, for logs and counters.
	Name string
	// Endpoint is the service's base URL (scheme and host only).
	Endpoint *url.URL
	// Bucket is the S3 bucket; Region signs requests (default
	// us-east-1); PathStyle puts the bucket in the path rather than the
	// host.
	Bucket, Region string
	PathStyle      bool
	// Credentials sign requests; nil or anonymous values send them
	// unsigned (a public bucket).
	Credentials *credentials.Credentials
	// MainPageSuffix is the object of a path ending in '/' (appended to
	// it); empty: such paths are 404.
	MainPageSuffix string
	// Timeout bounds the wait for the response headers, connecting and
	// waiting for a free connection included (default 10 s).
	Timeout time.Duration
	// MaxConns bounds the connections to the endpoint (default 64).
	MaxConns int
	// Logger receives the bucket's problems at Warn (default
	// slog.Default()).
	Logger *slog.Logger
}

// S3Counts are an S3 origin's failures, each counted against the bucket
// (never the client): Denied (403 from the service: the credentials or
// the bucket's policy), Missing (NoSuchBucket), Unreachable (no
// connection or no answer), Timeouts (no response headers within the
// timeout) and ServerErrors (5xx or an unexpected answer).
type S3Counts struct {
	Denied, Missing, Unreachable, Timeouts, ServerErrors atomic.Uint64
}

// S3Bucket serves a backend bucket from an S3-compatible bucket,
// read-only: GET and HEAD, with Range, If-Range and the conditional
// headers passed through, and the object's Content-Type, Content-Length,
// Content-Range, ETag, Last-Modified, Cache-Control, Expires,
// Content-Encoding, Content-Language and Content-Disposition passed
// back. It lists nothing; a key is the request path without its leading
// '/', refused (404) when a segment starts with '.' (so no '.' or '..'),
// and never decoded again.
type S3Bucket struct {
	o         S3Options
	transport *http.Transport
	counts    S3Counts
	lastWarn  atomic.Int64 // unix nanoseconds of the last Warn
}

// NewS3Bucket returns the origin o describes. With prev (the same
// bucket's origin of the config being replaced) it carries prev's
// counters on, and shares prev's connection pool when the endpoint,
// timeout and connection bound are o's.
func NewS3Bucket(o S3Options, prev *S3Bucket) *S3Bucket {
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 64
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	b := &S3Bucket{o: o}
	if prev != nil {
		b.counts.Denied.Store(prev.counts.Denied.Load())
		b.counts.Missing.Store(prev.counts.Missing.Load())
		b.counts.Unreachable.Store(prev.counts.Unreachable.Load())
		b.counts.Timeouts.Store(prev.counts.Timeouts.Load())
		b.counts.ServerErrors.Store(prev.counts.ServerErrors.Load())
		if prev.o.Endpoint.String() == o.Endpoint.String() && prev.o.MaxConns == o.MaxConns && prev.o.Timeout == o.Timeout {
			b.transport = prev.transport
			return b
		}
	}
	b.transport = &http.Transport{
		DialContext:           (&net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
		MaxConnsPerHost:       o.MaxConns,
		MaxIdleConnsPerHost:   o.MaxConns,
		MaxIdleConns:          o.MaxConns,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true, // bodies and Content-Length pass as stored
		ForceAttemptHTTP2:     true,
	}
	return b
}

// Counts returns the bucket's failure counters.
func (b *S3Bucket) Counts() *S3Counts { return &b.counts }

// CloseIdle closes the idle connections of the bucket's pool (when a
// reload drops the bucket).
func (b *S3Bucket) CloseIdle() { b.transport.CloseIdleConnections() }

// SharesPool reports whether b and o use one connection pool.
func (b *S3Bucket) SharesPool(o *S3Bucket) bool { return o != nil && b.transport == o.transport }

// passedRequest are the request headers passed to the service.
var passedRequest = []string{"Range", "If-Range", "If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since"}

// passedResponse are the response headers passed back.
var passedResponse = []string{"Content-Type", "Content-Length", "Content-Range", "Accept-Ranges", "Etag", "Last-Modified",
	"Cache-Control", "Expires", "Content-Encoding", "Content-Language", "Content-Disposition"}

// Serve serves the object at the decoded request path p.
func (b *S3Bucket) Serve(w http.ResponseWriter, r *http.Request, p string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		bucketError(w, http.StatusMethodNotAllowed)
		return
	}
	key, ok := s3Key(p, b.o.MainPageSuffix)
	if !ok {
		bucketError(w, http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	req, err := b.request(ctx, r, key)
	if err != nil {
		b.warn("signing", key, err)
		b.counts.Denied.Add(1)
		bucketError(w, http.StatusBadGateway)
		return
	}
	timer := time.AfterFunc(b.o.Timeout, cancel)
	resp, err := b.transport.RoundTrip(req)
	timedOut := !timer.Stop()
	if err == nil && timedOut { // the headers came as the timeout ran out: the body is cut
		resp.Body.Close()
		err = context.DeadlineExceeded
	}
	if err != nil {
		b.failed(w, r, key, err, timedOut)
		return
	}
	defer resp.Body.Close()
	b.answer(w, r, key, resp)
}

// request builds the signed request for key.
func (b *S3Bucket) request(ctx context.Context, r *http.Request, key string) (*http.Request, error) {
	u := *b.o.Endpoint
	objPath := "/" + key
	if b.o.PathStyle {
		objPath = "/" + b.o.Bucket + objPath
	} else {
		u.Host = b.o.Bucket + "." + u.Host
	}
	u.Path, u.RawPath = objPath, s3utils.EncodePath(objPath)
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.URL.Path, req.URL.RawPath = u.Path, u.RawPath
	for _, h := range passedRequest {
		if v := r.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	if b.o.Credentials == nil {
		return req, nil
	}
	v, err := b.o.Credentials.Get()
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	if v.SignerType.IsAnonymous() || v.AccessKeyID == "" {
		return req, nil
	}
	return signer.SignV4(*req, v.AccessKeyID, v.SecretAccessKey, v.SessionToken, b.o.Region), nil
}

// S3Credentials returns the credentials of an S3 bucket: from file (an
// AWS shared credentials file; profile, else AWS_PROFILE, else
// default) when it is set, else from the AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN environment variables,
// else nil (unsigned requests, for a public bucket). They are read now,
// so a missing file or half a key pair is an error here.
func S3Credentials(file, profile string) (*credentials.Credentials, error) {
	if file != "" {
		c := credentials.NewFileAWSCredentials(file, profile)
		v, err := c.Get()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if v.AccessKeyID == "" || v.SecretAccessKey == "" {
			return nil, fmt.Errorf("%s: no aws_access_key_id and aws_secret_access_key in the profile", file)
		}
		return c, nil
	}
	c := credentials.NewEnvAWS()
	v, err := c.Get()
	switch {
	case err != nil:
		return nil, err
	case v.AccessKeyID == "" && v.SecretAccessKey == "":
		return nil, nil
	case v.AccessKeyID == "" || v.SecretAccessKey == "":
		return nil, errors.New("only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set")
	}
	return c, nil
}

// answer passes the service's response back, or maps its error.
func (b *S3Bucket) answer(w http.ResponseWriter, r *http.Request, key string, resp *http.Response) {
	switch resp.StatusCode {
	case http.StatusOK, http.StatusPartialContent, http.StatusNotModified:
		h := w.Header()
		for _, name := range passedResponse {
			if v := resp.Header.Values(name); len(v) > 0 {
				h[name] = v
			}
		}
		if resp.StatusCode != http.StatusNotModified {
			fixContentType(h, key)
		}
		w.WriteHeader(resp.StatusCode)
		if r.Method == http.MethodGet && (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent) {
			_, _ = io.Copy(w, resp.Body)
		}
		return
	case http.StatusPreconditionFailed, http.StatusRequestedRangeNotSatisfiable:
		if cr := resp.Header.Get("Content-Range"); cr != "" {
			w.Header().Set("Content-Range", cr)
		}
		bucketError(w, resp.StatusCode)
		return
	}
	code := errorCode(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound && code != "NoSuchBucket":
		bucketError(w, http.StatusNotFound)
	case resp.StatusCode == http.StatusNotFound:
		b.counts.Missing.Add(1)
		b.warn("the S3 bucket does not exist", key, fmt.Errorf("%d %s", resp.StatusCode, code))
		bucketError(w, http.StatusBadGateway)
	case resp.StatusCode == http.StatusForbidden:
		b.counts.Denied.Add(1)
		b.warn("the S3 service refused access (credentials or bucket policy)", key, fmt.Errorf("%d %s", resp.StatusCode, code))
		bucketError(w, http.StatusForbidden)
	case resp.StatusCode == http.StatusServiceUnavailable:
		b.counts.ServerErrors.Add(1)
		b.warn("the S3 service is unavailable", key, fmt.Errorf("%d %s", resp.StatusCode, code))
		bucketError(w, http.StatusServiceUnavailable)
	default:
		b.counts.ServerErrors.Add(1)
		b.warn("unexpected answer from the S3 service", key, fmt.Errorf("%d %s", resp.StatusCode, code))
		bucketError(w, http.StatusBadGateway)
	}
}

// failed answers a request that got no response: nothing when the
// client went away (no one to answer, nothing to count), 504 when the
// timeout ran out, else 502.
func (b *S3Bucket) failed(w http.ResponseWriter, r *http.Request, key string, err error, timedOut bool) {
	switch {
	case r.Context().Err() != nil:
		return
	case timedOut || errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		b.counts.Timeouts.Add(1)
		b.warn("the S3 service did not answer in time", key, err)
		bucketError(w, http.StatusGatewayTimeout)
	default:
		b.counts.Unreachable.Add(1)
		b.warn("the S3 service is unreachable", key, err)
		bucketError(w, http.StatusBadGateway)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// warn logs a problem of the bucket, at most once a second (a client
// can make every request fail).
func (b *S3Bucket) warn(msg, key string, err error) {
	now := time.Now().UnixNano()
	last := b.lastWarn.Load()
	if now-last < int64(time.Second) || !b.lastWarn.CompareAndSwap(last, now) {
		return
	}
	b.o.Logger.Warn("backend bucket: "+msg, "bucket", b.o.Name, "s3Bucket", b.o.Bucket, "key", key, "err", err)
}

// errorCode reads the S3 error code of a failed response's body (none
// for HEAD).
func errorCode(resp *http.Response) string {
	var e struct {
		Code string `xml:"Code"`
	}
	if err := xml.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&e); err != nil {
		return ""
	}
	return e.Code
}

// fixContentType types an object stored without a useful Content-Type
// (none, or S3's binary/octet-stream default) by its extension.
func fixContentType(h http.Header, key string) {
	switch ct := h.Get("Content-Type"); ct {
	case "", "binary/octet-stream", "application/octet-stream":
		if t := mime.TypeByExtension(path.Ext(key)); t != "" {
			h.Set("Content-Type", t)
		} else if ct == "" {
			h.Set("Content-Type", "application/octet-stream")
		}
	}
}

// s3Key turns a decoded request path into an object key: no leading
// '/', suffix appended to a path ending in '/' (404 without one), and
// refused when a segment starts with '.' ('.', '..', hidden names) or
// the path holds a NUL or a backslash. It is never decoded again.
func s3Key(p, suffix string) (string, bool) {
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\x00\\") {
		return "", false
	}
	if strings.HasSuffix(p, "/") {
		if suffix == "" {
			return "", false
		}
		p += suffix
	}
	key := p[1:]
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || strings.HasPrefix(seg, ".") {
			return "", false
		}
	}
	return key, len(key) <= 1024
}
