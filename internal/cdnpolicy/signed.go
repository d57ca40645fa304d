package cdnpolicy

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // Google's signed URLs are HMAC-SHA1
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// SignedCookieName is the cookie of Cloud CDN's signed cookies.
const SignedCookieName = "Cloud-CDN-Cookie"

// Errors of signed requests; each is answered 403.
var (
	ErrSignedMethod    = errors.New("signed requests must be GET, HEAD, OPTIONS or TRACE")
	ErrSignedMalformed = errors.New("malformed signed request parameters")
	ErrSignedExpired   = errors.New("signed request has expired")
	ErrSignedKey       = errors.New("signed request names an unknown key")
	ErrSignedSignature = errors.New("signature does not match")
	ErrSignedPrefix    = errors.New("URL is outside the signed URL prefix")
)

// Verify checks a request's signed URL (a Signature query parameter) or
// signed cookie (Cloud-CDN-Cookie), as Cloud CDN does: url is the URL
// the client asked for (scheme://host/path?query, as sent). signed is
// false when the request carries neither (Google does not block such
// requests); err is non-nil for a signed request that must be refused.
func (p *Policy) Verify(method, url string, h map[string][]string, now time.Time) (signed bool, err error) {
	_, query, _ := strings.Cut(url, "?")
	if hasParam(query, "Signature") {
		return true, p.check(method, func() error { return p.verifyURL(url, query, now) })
	}
	if c, ok := Cookie(h, SignedCookieName); ok {
		return true, p.check(method, func() error { return p.verifyCookie(url, c, now) })
	}
	return false, nil
}

func (p *Policy) check(method string, verify func() error) error {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return verify()
	}
	return ErrSignedMethod
}

func hasParam(q, name string) bool {
	for q != "" {
		var part string
		part, q, _ = strings.Cut(q, "&")
		if n, _, _ := strings.Cut(part, "="); n == name {
			return true
		}
	}
	return false
}

// verifyURL checks URL?…[URLPrefix=P&]Expires=E&KeyName=K&Signature=S:
// the signature covers the URL up to "&Signature=" (or, with URLPrefix,
// "URLPrefix=P&Expires=E&KeyName=K", and the URL must start with P).
func (p *Policy) verifyURL(url, query string, now time.Time) error {
	i := strings.LastIndex(url, "&Signature=")
	if i < 0 || strings.Contains(url[i+len("&Signature="):], "&") {
		return ErrSignedMalformed
	}
	signedPart, sig := url[:i], url[i+len("&Signature="):]
	params := map[string]string{}
	for q := query[:len(query)-len(url)+i]; q != ""; {
		var part string
		part, q, _ = strings.Cut(q, "&")
		n, v, _ := strings.Cut(part, "=")
		params[n] = v
	}
	if prefix, ok := params["URLPrefix"]; ok {
		j := strings.LastIndex(signedPart, "URLPrefix=")
		if j < 0 || (signedPart[j-1] != '?' && signedPart[j-1] != '&') {
			return ErrSignedMalformed
		}
		dec, err := base64.URLEncoding.DecodeString(prefix)
		if err != nil {
			return ErrSignedMalformed
		}
		if !strings.HasPrefix(url, string(dec)) {
			return ErrSignedPrefix
		}
		signedPart = signedPart[j:]
	}
	return p.verifySig(signedPart, params["Expires"], params["KeyName"], sig, now)
}

// verifyCookie checks a Cloud-CDN-Cookie value
// URLPrefix=P:Expires=E:KeyName=K:Signature=S.
func (p *Policy) verifyCookie(url, c string, now time.Time) error {
	i := strings.LastIndex(c, ":Signature=")
	if i < 0 {
		return ErrSignedMalformed
	}
	signedPart, sig := c[:i], c[i+len(":Signature="):]
	fields := strings.Split(signedPart, ":")
	if len(fields) != 3 || !strings.HasPrefix(fields[0], "URLPrefix=") ||
		!strings.HasPrefix(fields[1], "Expires=") || !strings.HasPrefix(fields[2], "KeyName=") {
		return ErrSignedMalformed
	}
	dec, err := base64.URLEncoding.DecodeString(strings.TrimPrefix(fields[0], "URLPrefix="))
	if err != nil {
		return ErrSignedMalformed
	}
	if !strings.HasPrefix(url, string(dec)) {
		return ErrSignedPrefix
	}
	return p.verifySig(signedPart, strings.TrimPrefix(fields[1], "Expires="), strings.TrimPrefix(fields[2], "KeyName="), sig, now)
}

func (p *Policy) verifySig(signedPart, expires, keyName, sig string, now time.Time) error {
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || keyName == "" || sig == "" {
		return ErrSignedMalformed
	}
	if now.Unix() >= exp {
		return ErrSignedExpired
	}
	key, ok := p.signedKeys[keyName]
	if !ok {
		return ErrSignedKey
	}
	got, err := base64.URLEncoding.DecodeString(sig)
	if err != nil {
		return ErrSignedMalformed
	}
	if !hmac.Equal(got, Sign(key, signedPart)) {
		return ErrSignedSignature
	}
	return nil
}

// Sign returns HMAC-SHA1 of s under key: the signature of a signed URL
// or cookie before base64url encoding.
func Sign(key []byte, s string) []byte {
	m := hmac.New(sha1.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// DecodeKey decodes a signed URL key as gcloud's key files hold it:
// 16 bytes in base64url (padding optional).
func DecodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	k, err := base64.URLEncoding.DecodeString(s)
	if err != nil {
		k, err = base64.RawURLEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, errors.New("not base64url")
	}
	if len(k) != 16 {
		return nil, errors.New("not 16 bytes (128 bits)")
	}
	return k, nil
}
