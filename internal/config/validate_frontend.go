package config

import (
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// regions validates regions[].
func (v *validator) regions() {
	known := slices.Sorted(mapKeys(v.regionNames))
	for i := range v.c.Regions {
		r := &v.c.Regions[i]
		p := at("regions[%d]", i)
		v.floatRange(p+".latitude", r.Latitude, -90, 90)
		v.floatRange(p+".longitude", r.Longitude, -180, 180)
		if (r.Latitude == nil) != (r.Longitude == nil) {
			v.add(p, "set both latitude and longitude, or neither", "latitude and longitude go together")
		}
		for _, other := range slices.Sorted(mapKeys(r.RTTMs)) {
			op := p + ".rttMs." + other
			if _, ok := v.regionNames[other]; !ok && !BuiltinRegion(other) {
				v.add(op, RegionHint(other, known), "unknown region %q", other)
			}
			if ms := r.RTTMs[other]; ms < 0 {
				v.add(op, "use 0 or more milliseconds", "%s is negative", fmtFloat(ms))
			}
		}
		v.regionalLayer(p+".regionalLayer", r.RegionalLayer)
	}
}

// frontends validates frontends[].
func (v *validator) frontends() {
	addrs := map[string]int{}
	for i := range v.c.Frontends {
		f := &v.c.Frontends[i]
		p := at("frontends[%d]", i)
		if v.address(p+".address", f.Address) {
			if first, dup := addrs[f.Address]; dup {
				v.add(p+".address", "give each frontend its own address or port", "%q is already the address of frontends[%d]", f.Address, first)
			} else {
				addrs[f.Address] = i
			}
		}
		proto := f.Protocol
		if proto == "" {
			proto = "HTTP"
		}
		if !v.enum(p+".protocol", f.Protocol, "HTTP", "HTTPS", "DNS") {
			proto = ""
		}
		switch {
		case f.URLMap != "":
			v.ref(p+".urlMap", f.URLMap, "URL map", map[string]map[string]int{"urlMaps": v.urlMapNames})
		case f.Layer == LayerRegional:
			// Served from the edge's choice; a URL map only serves
			// requests that do not come from a trusted edge.
		case proto == "HTTP" || proto == "HTTPS":
			v.add(p+".urlMap", "name the URL map that routes this frontend's requests", "a URL map is required for %s", proto)
		}
		v.frontendCertificates(p, f, proto)
		v.frontendLayer(p, f, proto)
		v.frontendTLS(p, f, proto == "HTTPS")
		v.certificateFiles(p, f.Certificates)
		// A built-in Google Cloud region needs no regions[] entry (nor
		// backends of its own): its location and RTTs are known.
		if f.Region != "" && len(v.regionNames) > 0 && !BuiltinRegion(RefName(f.Region)) {
			if _, ok := v.regionNames[RefName(f.Region)]; !ok {
				v.add(p+".region", RegionHint(RefName(f.Region), slices.Sorted(mapKeys(v.regionNames))), "unknown region %q", RefName(f.Region))
			}
		}
	}
}

// certificateFiles checks that each of a frontend's certificates names
// its files.
func (v *validator) certificateFiles(p string, certs []Certificate) {
	for j, c := range certs {
		cp := at("%s.certificates[%d]", p, j)
		if c.CertificateFile == "" {
			v.add(cp+".certificateFile", "give the path of a PEM certificate (chain) file", "a certificate file is required")
		}
		if c.PrivateKeyFile == "" {
			v.add(cp+".privateKeyFile", "give the path of the PEM private key file", "a private key file is required")
		}
	}
}

// address checks a listen address host:port; host may be empty (all
// interfaces), an IP literal (IPv6 in brackets) or a host name. It
// reports whether the address is usable.
func (v *validator) address(path, s string) bool {
	const fix = "write host:port, e.g. 0.0.0.0:8080, :8080 or [::1]:8443"
	if s == "" {
		v.add(path, fix, "an address is required")
		return false
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		v.add(path, fix, "%q has no port", s)
		return false
	}
	host, port := s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		a, err := netip.ParseAddr(host[1 : len(host)-1])
		if err != nil || !a.Is6() {
			v.add(path, fix, "%q is not an IPv6 address", host)
			return false
		}
	} else if strings.Contains(host, ":") {
		v.add(path, fix, "%q: an IPv6 address needs brackets", s)
		return false
	} else if _, err := netip.ParseAddr(host); err != nil && host != "" && !IsHostName(host) {
		v.add(path, fix, "%q is not an IP address or host name", host)
		return false
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		v.add(path, fix, "port %q is not a number between 0 and 65535", port)
		return false
	}
	return true
}

// isProjectID reports whether s is a Google Cloud project ID: 6 to 30
// lowercase letters, digits and hyphens, starting with a letter and not
// ending with a hyphen.
func isProjectID(s string) bool {
	if len(s) < 6 || len(s) > 30 || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// IsHostName reports whether s looks like a DNS host name (letters,
// digits and hyphens in labels of 1 to 63 bytes, 253 bytes in all).
func IsHostName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := range len(label) {
			ch := label[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-') {
				return false
			}
		}
	}
	return true
}

// tuning validates the spillway: block.
func (v *validator) tuning() {
	t := v.c.Spillway
	if t == nil {
		return
	}
	v.intRange("spillway.undrainHoldSec", t.UndrainHoldSec, 0, 3600)
	v.intRange("spillway.demandWindowSec", t.DemandWindowSec, 1, 60)
	v.intRange("spillway.undrainRampSec", t.UndrainRampSec, 0, 3600)
	v.intRange("spillway.secondLayerProxies", t.SecondLayerProxies, 1, 64)
	v.acme(t.ACME)
	if tr := t.Tracing; tr != nil {
		if u, err := url.Parse(tr.OTLPEndpoint); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			v.add("spillway.tracing.otlpEndpoint", "give the collector's OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces", "%q is not an http(s) URL", tr.OTLPEndpoint)
		}
	}
	v.enum("spillway.fidelityProfile", t.FidelityProfile, FidelityDocumented, FidelitySeed000)
	v.enum("spillway.http1Server", t.HTTP1Server, "SPILLWAY", "NET_HTTP")
	v.enum("spillway.http2Server", t.HTTP2Server, "SPILLWAY", "NET_HTTP")
	v.enum("spillway.pathWithEscapedSlashesAction", t.PathWithEscapedSlashesAction, "KEEP_UNCHANGED", "REJECT_REQUEST", "UNESCAPE_AND_FORWARD")
	v.serverlessTuning(t)
	if al := t.AccessLog; al != nil {
		v.enum("spillway.accessLog.format", al.Format, "JSON", "TEXT")
		v.floatRange("spillway.accessLog.sampleRate", al.SampleRate, 0, 1)
		v.intRange("spillway.accessLog.bufferSize", al.BufferSize, 1, 1<<20)
		if al.ProjectID != "" && !isProjectID(al.ProjectID) {
			v.add("spillway.accessLog.projectId", "write the Google Cloud project ID (6-30 lowercase letters, digits and '-', starting with a letter), e.g. my-project", "%q is not a project ID", al.ProjectID)
		}
		if al.Path != "" && al.Path != "stdout" && strings.ContainsRune(al.Path, 0) {
			v.add("spillway.accessLog.path", `write a file path or "stdout"`, "%q is not a file path", al.Path)
		}
	}
}
