package config

import "testing"

func TestRefName(t *testing.T) {
	tests := []struct{ ref, want string }{
		{"bs-web", "bs-web"},
		{"https://www.googleapis.com/compute/v1/projects/p/global/backendServices/bs-web", "bs-web"},
		{"projects/p/locations/global/serviceLbPolicies/policy", "policy"},
		{"//networkservices.googleapis.com/projects/p/locations/global/serviceLbPolicies/policy", "policy"},
		{"projects/p/zones/us-east1-b/networkEndpointGroups/neg", "neg"},
		{"https://www.googleapis.com/compute/v1/projects/p/zones/us-east1-b/instanceGroups/ig", "ig"},
		{"projects/p/global/backendServices/", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := RefName(tt.ref); got != tt.want {
			t.Errorf("RefName(%q) = %q, want %q", tt.ref, got, tt.want)
		}
	}
}

func TestRegionOfZone(t *testing.T) {
	tests := []struct{ zone, want string }{
		{"us-south1-a", "us-south1"},
		{"europe-west4-c", "europe-west4"},
		{"https://www.googleapis.com/compute/v1/projects/p/zones/us-east1-b", "us-east1"},
		{"us-south1", "us-south1"},
		{"lab", "lab"},
		{"zone-ab", "zone-ab"},
		{"-a", "-a"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := RegionOfZone(tt.zone); got != tt.want {
			t.Errorf("RegionOfZone(%q) = %q, want %q", tt.zone, got, tt.want)
		}
	}
}

func TestRegionName(t *testing.T) {
	tests := []struct{ zone, region, want string }{
		{"us-east1-b", "", "us-east1"},
		{"us-east1-b", "lab-east", "lab-east"},
		{"", "https://www.googleapis.com/compute/v1/projects/p/regions/europe-west1", "europe-west1"},
	}
	for _, tt := range tests {
		neg := &NetworkEndpointGroup{Zone: tt.zone, Region: tt.region}
		ig := &InstanceGroup{Zone: tt.zone, Region: tt.region}
		if got := neg.RegionName(); got != tt.want {
			t.Errorf("NEG{zone %q, region %q}.RegionName() = %q, want %q", tt.zone, tt.region, got, tt.want)
		}
		if got := ig.RegionName(); got != tt.want {
			t.Errorf("InstanceGroup{zone %q, region %q}.RegionName() = %q, want %q", tt.zone, tt.region, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	known := []string{"backendService", "weight", "headerAction"}
	tests := []struct{ in, want string }{
		{"weigth", "weight"},
		{"Weight", "weight"},
		{"backend_service", "backendService"},
		{"backendservice", "backendService"},
		{"headerActions", "headerAction"},
		{"colour", ""},
		{"w", ""},
	}
	for _, tt := range tests {
		if got := closest(tt.in, known); got != tt.want {
			t.Errorf("closest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
