package route

import (
	"errors"

	"github.com/spillwaylb/spillway/internal/config"
)

// Actions on percent-encoded slashes and backslashes in a request path
// (spillway.pathWithEscapedSlashesAction, named after Envoy's
// path_with_escaped_slashes_action).
const (
	// EscapedSlashesKeep forwards %2F and %5C as they are (hex digits
	// upper-cased). The path the URL map matches is the decoded one, in
	// which they are separators, with dot segments removed again.
	EscapedSlashesKeep = "KEEP_UNCHANGED"
	// EscapedSlashesReject answers 400 to a path with %2F or %5C.
	EscapedSlashesReject = "REJECT_REQUEST"
	// EscapedSlashesUnescape turns %2F and %5C into '/' before the dot
	// segments are removed, so the backend receives the separators the
	// URL map saw.
	EscapedSlashesUnescape = "UNESCAPE_AND_FORWARD"
)

// PathOptions says how request paths are normalised before matching and
// forwarding. The zero value is the default: normalisation on, slashes
// merged, escaped slashes kept.
type PathOptions struct {
	// Off disables normalisation: the path is matched and forwarded as
	// received (spillway.normalizePath: false).
	Off bool
	// KeepSlashes keeps runs of '/' (spillway.mergeSlashes: false).
	KeepSlashes bool
	// EscapedSlashes is one of the EscapedSlashes* actions; "" means
	// EscapedSlashesKeep.
	EscapedSlashes string
}

// PathOptionsFor returns the path options of a configuration's spillway:
// block (nil: the defaults).
func PathOptionsFor(t *config.Tuning) PathOptions {
	var o PathOptions
	if t == nil {
		return o
	}
	o.Off = t.NormalizePath != nil && !*t.NormalizePath
	o.KeepSlashes = t.MergeSlashes != nil && !*t.MergeSlashes
	o.EscapedSlashes = t.PathWithEscapedSlashesAction
	return o
}

// Errors of NormalizePath; both mean 400 Bad Request.
var (
	ErrBadEscape    = errors.New("malformed percent-encoding in request path")
	ErrEscapedSlash = errors.New("percent-encoded slash or backslash in request path")
)

// NormalizePath normalises a percent-encoded request path (as on the
// request line, without the query) for forwarding:
//
//   - percent-encoded unreserved characters (RFC 3986 §2.3: ALPHA, DIGIT,
//     '-', '.', '_', '~') are decoded and the hex digits of the remaining
//     escapes upper-cased (§6.2.2.1, §6.2.2.2);
//   - a raw backslash is treated as %5C, and %2F and %5C as o.EscapedSlashes
//     says;
//   - any other byte that may not appear raw in a path (RFC 3986 §3.3
//     pchar: non-ASCII, controls, space, '"', '<', '>', '[', ']', '^',
//     '`', '{', '|', '}') is percent-encoded, so the result is always a
//     valid encoding (url.URL keeps it as RawPath);
//   - dot segments are removed (§5.2.4), so the path cannot climb above
//     "/";
//   - runs of '/' are merged unless o.KeepSlashes.
//
// "" becomes "/", a path not starting with '/' gets one, and "*" (OPTIONS
// *) is left alone. A path that is already normal is returned as it is,
// without allocating. With o.Off the path is returned unchanged.
func NormalizePath(p string, o PathOptions) (string, error) {
	if o.Off || p == "*" {
		return p, nil
	}
	unescapeSlashes := o.EscapedSlashes == EscapedSlashesUnescape
	if normalEscaped(p, o) {
		return p, nil
	}
	b := make([]byte, 0, len(p)+1)
	if p == "" || p[0] != '/' {
		b = append(b, '/')
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch c {
		case '%':
			if i+2 >= len(p) || !ishex(p[i+1]) || !ishex(p[i+2]) {
				return "", ErrBadEscape
			}
			v := hexPair(p[i+1], p[i+2])
			i += 2
			switch {
			case unreserved(v):
				b = append(b, v)
			case v == '/' || v == '\\':
				if o.EscapedSlashes == EscapedSlashesReject {
					return "", ErrEscapedSlash
				}
				if unescapeSlashes {
					b = append(b, '/')
				} else {
					b = append(b, '%', upperHex[v>>4], upperHex[v&15])
				}
			default:
				b = append(b, '%', upperHex[v>>4], upperHex[v&15])
			}
		case '\\':
			switch o.EscapedSlashes {
			case EscapedSlashesReject:
				return "", ErrEscapedSlash
			case EscapedSlashesUnescape:
				b = append(b, '/')
			default:
				b = append(b, "%5C"...)
			}
		default:
			if pathByte(c) {
				b = append(b, c)
			} else {
				b = append(b, '%', upperHex[c>>4], upperHex[c&15])
			}
		}
	}
	return string(removeDotSegments(b, !o.KeepSlashes)), nil
}

// MatchPath returns the path the URL map matches for a normalised path
// that has been percent-decoded: where a decoded %2F or %5C (kept by
// EscapedSlashesKeep) or a backslash makes new segments, backslashes count
// as '/' and dot segments are removed (and slashes merged) again, so that
// "/public/..%2Fsecret" is matched as "/secret", the path a backend that
// decodes it would serve. A clean path is returned without allocating.
func MatchPath(decoded string, o PathOptions) string {
	if o.Off || decoded == "*" {
		return decoded
	}
	if normalDecoded(decoded, o) {
		return decoded
	}
	b := make([]byte, 0, len(decoded)+1)
	if decoded == "" || decoded[0] != '/' {
		b = append(b, '/')
	}
	for i := 0; i < len(decoded); i++ {
		c := decoded[i]
		if c == '\\' {
			c = '/'
		}
		b = append(b, c)
	}
	return string(removeDotSegments(b, !o.KeepSlashes))
}

// normalEscaped reports whether NormalizePath would return p unchanged.
func normalEscaped(p string, o PathOptions) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '%':
			if i+2 >= len(p) || !isUpperHex(p[i+1]) || !isUpperHex(p[i+2]) {
				return false
			}
			v := hexPair(p[i+1], p[i+2])
			if unreserved(v) || ((v == '/' || v == '\\') && o.EscapedSlashes != "" && o.EscapedSlashes != EscapedSlashesKeep) {
				return false
			}
			i += 2
		case '/':
			if dotOrEmptySegment(p, i, o) {
				return false
			}
		default:
			if !pathByte(p[i]) {
				return false
			}
		}
	}
	return true
}

// normalDecoded reports whether MatchPath would return p unchanged.
func normalDecoded(p string, o PathOptions) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			return false
		case '/':
			if dotOrEmptySegment(p, i, o) {
				return false
			}
		}
	}
	return true
}

// dotOrEmptySegment reports whether the segment after the '/' at p[i] is
// "." or "..", or empty and followed by another '/' when slashes are
// merged.
func dotOrEmptySegment(p string, i int, o PathOptions) bool {
	j := i + 1
	for j < len(p) && p[j] != '/' && p[j] != '\\' {
		j++
	}
	seg := p[i+1 : j]
	if seg == "." || seg == ".." {
		return true
	}
	return seg == "" && j < len(p) && !o.KeepSlashes
}

// removeDotSegments removes "." and ".." segments from p, which starts
// with '/' (RFC 3986 §5.2.4 on an absolute path), merging runs of '/' when
// merge is set. It works in place.
func removeDotSegments(p []byte, merge bool) []byte {
	out := p[:0]
	for i := 0; i < len(p); {
		j := i + 1
		for j < len(p) && p[j] != '/' {
			j++
		}
		seg := p[i+1 : j]
		last := j == len(p)
		switch {
		case len(seg) == 1 && seg[0] == '.':
			if last {
				out = append(out, '/')
			}
		case len(seg) == 2 && seg[0] == '.' && seg[1] == '.':
			k := len(out) - 1
			for k >= 0 && out[k] != '/' {
				k--
			}
			if k < 0 {
				k = 0
			}
			out = out[:k]
			if last {
				out = append(out, '/')
			}
		case len(seg) == 0 && merge && !last:
		default:
			// Writing never overtakes reading: out only shrinks
			// relative to p.
			out = append(out, '/')
			out = append(out, seg...)
		}
		i = j
	}
	if len(out) == 0 {
		out = append(out, '/')
	}
	return out
}

// unreserved reports an RFC 3986 unreserved character.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

const upperHex = "0123456789ABCDEF"

func ishex(c byte) bool {
	_, ok := unhex(c)
	return ok
}

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

// hexPair decodes two hex digits (already checked).
func hexPair(hi, lo byte) byte {
	h, _ := unhex(hi)
	l, _ := unhex(lo)
	return h<<4 | l
}
