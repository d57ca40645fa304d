// Package route compiles a Google Cloud URL map (config.URLMap) into an
// immutable Table and matches requests against it: host rules → path
// matcher → route rules (by priority) or path rules (longest path) → the
// matcher's default → the URL map's default.
//
// The package is pure: no I/O, no clock, no package-level mutable state.
// The proxy adapts *http.Request to Request and the simulator builds
// Requests directly, so both get the same decision. A Table is safe for
// concurrent use; Match on a request that needs no regular expression
// allocates nothing.
//
// # Decisions where Google's documentation is silent
//
// Host precedence. An exact host wins over a wildcard; among wildcards the
// longest suffix wins ("*.api.example.com" before "*.example.com"), and
// "*" is last. Comparison is case-insensitive and one trailing dot is
// ignored. A suffix wildcard needs at least one character in place of '*'.
//
// Host ports. A request host "example.net:8080" is first looked up as
// written (exact, then wildcard) if any host rule lists a host:port; then
// its port is stripped and it is looked up again. So a configured host
// without a port matches requests with or without a port, and a configured
// "example.net:8080" matches only port 8080. (Google's documentation leaves
// this open, docs/semantics.md §1.1; matching the bare host keeps a config
// written for the default port working behind a non-default listener.)
//
// Empty matchRules. A route rule without matchRules matches every request
// (Envoy and Traffic Director practice).
//
// Header predicates. A header that is absent fails every predicate except
// presentMatch: false; invertMatch then negates, so an inverted
// exactMatch on an absent header holds. presentMatch: X holds when the
// header's presence equals X. The pseudo-headers ":authority" (and "host",
// which Go keeps out of the header map) and ":method" match Request.Host and
// Request.Method; ":path" matches the path plus query (and allocates). Regex
// predicates (path, header, query) must match the whole value (RE2,
// anchored), as in Envoy's safe_regex.
//
// Query parameters. The raw query is split on '&'; names and values are
// percent-decoded ('+' is a space) before comparison; the first occurrence of
// a name is the one matched.
//
// Rewrites and redirects. pathPrefixRewrite and prefixRedirect replace the
// matched portion of the path: the prefixMatch value, the whole path for
// fullPathMatch, regexMatch and pathTemplateMatch, the text before '*' for a
// "P/*" path rule, the whole path for an exact path rule, and "/" for a
// default (so they act as a prepend there) or for a route rule without a
// path predicate.
//
// Paths are matched as given: the caller normalises them with
// NormalizePath and MatchPath (dot segments, escapes, merged slashes; see
// docs/semantics.md §6) before calling Match. An empty path is treated as
// "/".
package route
