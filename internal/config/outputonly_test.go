package config

import (
	"strings"
	"testing"
)

// outputOnly is the block of output-only fields Google Cloud writes on a
// resource it returns, indented for a list item of baseConfig.
func outputOnly(kind, collection, region string) string {
	return `  kind: compute#` + kind + `
  id: "5972612387331298101"
  selfLink: https://www.googleapis.com/compute/v1/projects/my-gcp-project/global/` + collection + `/x
  selfLinkWithId: https://www.googleapis.com/compute/v1/projects/my-gcp-project/global/` + collection + `/5972612387331298101
  creationTimestamp: "2026-01-12T08:14:03.512-08:00"
  fingerprint: 7mTQoGOj2sY=
  region: https://www.googleapis.com/compute/v1/projects/my-gcp-project/regions/` + region + `
  usedBy:
  - reference: https://www.googleapis.com/compute/v1/projects/my-gcp-project/global/urlMaps/web-map
`
}

// described is what describe adds to a group: where it is and its size.
const described = `  network: https://www.googleapis.com/compute/v1/projects/my-gcp-project/global/networks/default
  subnetwork: https://www.googleapis.com/compute/v1/projects/my-gcp-project/regions/us-east1/subnetworks/default
  size: 1
`

// Every resource kind accepts the output-only fields of an export (id,
// kind, selfLink, creationTimestamp, fingerprint, region, usedBy) and
// ignores them.
func TestOutputOnlyFieldsAcceptedOnEveryKind(t *testing.T) {
	tests := []struct {
		kind string
		edit edit
	}{
		{"healthChecks", edit{"- name: hc-web\n", "- name: hc-web\n" + outputOnly("healthCheck", "healthChecks", "us-east1")}},
		{"serviceLbPolicies", edit{"- name: policy-web\n", "- name: policy-web\n" + outputOnly("serviceLbPolicy", "serviceLbPolicies", "us-east1") + "  createTime: \"2026-01-12T16:14:03.512Z\"\n"}},
		// On groups region places the group, so it must agree with the zone.
		{"networkEndpointGroups", edit{"- name: neg-east\n", "- name: neg-east\n" + outputOnly("networkEndpointGroup", "networkEndpointGroups", "us-east1") + described}},
		{"instanceGroups", edit{"- name: ig-west\n", "- name: ig-west\n" + outputOnly("instanceGroup", "instanceGroups", "us-west1") + described}},
		{"backendServices", edit{"- name: bs-east-pref\n", "- name: bs-east-pref\n" + outputOnly("backendService", "backendServices", "us-east1")}},
		{"urlMaps", edit{"- name: web-map\n", "- name: web-map\n" + outputOnly("urlMap", "urlMaps", "us-east1")}},
		{"sslPolicies", edit{"- {name: tls12, profile: MODERN, minTlsVersion: TLS_1_2}\n", "- name: tls12\n  profile: MODERN\n  minTlsVersion: TLS_1_2\n" + outputOnly("sslPolicy", "sslPolicies", "us-east1") + "  enabledFeatures: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n"}},
		{"serverTlsPolicies", edit{"- name: mtls\n", "- name: mtls\n" + outputOnly("serverTlsPolicy", "serverTlsPolicies", "us-east1")}},
		{"trustConfigs", edit{"- name: cas\n", "- name: cas\n" + outputOnly("trustConfig", "trustConfigs", "us-east1")}},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			base := baseConfig
			if tt.kind == "sslPolicies" || tt.kind == "serverTlsPolicies" || tt.kind == "trustConfigs" {
				base = apply(t, tlsEdits)
			}
			if n := strings.Count(base, tt.edit.old); n != 1 {
				t.Fatalf("edit matches %d times", n)
			}
			src := strings.Replace(base, tt.edit.old, tt.edit.new, 1)
			if _, err := Parse([]byte(src), "export.yaml"); err != nil {
				t.Fatalf("export-shaped %s rejected: %v", tt.kind, err)
			}
		})
	}
}

// Disabled features in an export load; enabled ones Spillway cannot
// honour are errors that say so.
func TestDisabledFeaturesAccepted(t *testing.T) {
	tests := []struct {
		name, block, wantErr string
	}{
		{"iap off", "  iap: {enabled: false, oauth2ClientId: \"\", oauth2ClientSecretSha256: \"\"}\n", ""},
		{"iap on", "  iap: {enabled: true, oauth2ClientId: id}\n", "Identity-Aware Proxy"},
		{"logConfig", "  logConfig: {enable: true, sampleRate: 1.0, optionalMode: EXCLUDE_ALL_OPTIONAL}\n", ""},
		{"cdnPolicy with CDN off", "  enableCDN: false\n  cdnPolicy:\n    cacheMode: CACHE_ALL_STATIC\n    cacheKeyPolicy: {includeHost: true, includeQueryString: true}\n    signedUrlCacheMaxAgeSec: \"3600\"\n", ""},
		{"CDN on", "  enableCDN: true\n  cdnPolicy: {cacheMode: CACHE_ALL_STATIC}\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(baseConfig, "- name: bs-east-pref\n", "- name: bs-east-pref\n"+tt.block, 1)
			_, err := Parse([]byte(src), "export.yaml")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	src := strings.Replace(baseConfig, "- name: hc-web\n", "- name: hc-web\n  logConfig: {enable: false}\n", 1)
	if _, err := Parse([]byte(src), "export.yaml"); err != nil {
		t.Fatalf("health check logConfig rejected: %v", err)
	}
}

// Service LB policies, server TLS policies and trust configs may carry the
// full resource name describe writes.
func TestFullResourceNames(t *testing.T) {
	src := strings.Replace(apply(t, tlsEdits), "- name: policy-web\n", "- name: projects/my-gcp-project/locations/global/serviceLbPolicies/policy-web\n", 1)
	src = strings.Replace(src, "- name: mtls\n", "- name: projects/my-gcp-project/locations/global/serverTlsPolicies/mtls\n", 1)
	src = strings.Replace(src, "- name: cas\n", "- name: projects/my-gcp-project/locations/global/trustConfigs/cas\n", 1)
	c, err := Parse([]byte(src), "export.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.ServiceLbPolicies[0].Name != "policy-web" || c.ServerTLSPolicies[0].Name != "mtls" || c.TrustConfigs[0].Name != "cas" {
		t.Errorf("names not shortened: %q %q %q", c.ServiceLbPolicies[0].Name, c.ServerTLSPolicies[0].Name, c.TrustConfigs[0].Name)
	}
	bad := strings.Replace(baseConfig, "- name: policy-web\n", "- name: projects/p/global/backendServices/policy-web\n", 1)
	if _, err := Parse([]byte(bad), "export.yaml"); err == nil || !strings.Contains(err.Error(), "is not a valid name") {
		t.Errorf("a link to another collection as a name: %v", err)
	}
}

// A field an embedded OutputOnly block defines is still subject to strict
// decoding: misspellings get a did-you-mean.
func TestOutputOnlyMisspelled(t *testing.T) {
	src := strings.Replace(baseConfig, "- name: hc-web\n", "- name: hc-web\n  selfLnk: x\n", 1)
	_, err := Parse([]byte(src), "export.yaml")
	if err == nil || !strings.Contains(err.Error(), `did you mean "selfLink"`) {
		t.Fatalf("got %v", err)
	}
}
