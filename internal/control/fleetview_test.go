package control_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/control"
)

func group(name string, members int, down ...string) control.SummaryGroup {
	return control.SummaryGroup{Name: name, Members: members, Healthy: members - len(down), Down: down}
}

func TestFleetViewDisagreements(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		self  control.Summary
		peers []control.Summary
		want  []control.Disagreement
	}{
		{
			name:  "agree",
			self:  control.Summary{Instance: "a", Groups: []control.SummaryGroup{group("g", 2, "10.0.0.1:80")}},
			peers: []control.Summary{{Instance: "b", Groups: []control.SummaryGroup{group("g", 2, "10.0.0.1:80")}}},
		},
		{
			name: "down on one, up on two",
			self: control.Summary{Instance: "b", Groups: []control.SummaryGroup{group("g", 2, "10.0.0.1:80")}},
			peers: []control.Summary{
				{Instance: "c", Groups: []control.SummaryGroup{group("g", 2)}},
				{Instance: "a", Groups: []control.SummaryGroup{group("g", 2)}},
			},
			want: []control.Disagreement{{Group: "g", Address: "10.0.0.1:80", Down: []string{"b"}, Up: []string{"a", "c"}}},
		},
		{
			name: "an instance without the group or truncated does not count",
			self: control.Summary{Instance: "a", Groups: []control.SummaryGroup{group("g", 2, "10.0.0.1:80")}},
			peers: []control.Summary{
				{Instance: "b", Groups: []control.SummaryGroup{group("h", 1)}},
				{Instance: "c", Truncated: true, Groups: []control.SummaryGroup{group("g", 2)}},
			},
		},
		{
			name: "each side down on another endpoint",
			self: control.Summary{Instance: "a", Groups: []control.SummaryGroup{group("g", 2, "10.0.0.2:80")}},
			peers: []control.Summary{
				{Instance: "b", Groups: []control.SummaryGroup{group("g", 2, "10.0.0.1:80")}},
				{Instance: "a", Groups: []control.SummaryGroup{group("g", 2)}}, // self's stale copy from etcd: ignored
			},
			want: []control.Disagreement{
				{Group: "g", Address: "10.0.0.1:80", Down: []string{"b"}, Up: []string{"a"}},
				{Group: "g", Address: "10.0.0.2:80", Down: []string{"a"}, Up: []string{"b"}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := control.NewFleetView(tc.self, tc.peers, true, now)
			if !reflect.DeepEqual(v.Disagreements, tc.want) {
				t.Errorf("disagreements %+v, want %+v", v.Disagreements, tc.want)
			}
			if !v.Instances[0].Self || v.Instances[0].Instance != tc.self.Instance {
				t.Errorf("first instance %+v, want self %s", v.Instances[0], tc.self.Instance)
			}
			for _, in := range v.Instances[1:] {
				if in.Instance == tc.self.Instance {
					t.Errorf("self listed twice")
				}
			}
		})
	}
}

func TestFleetViewInstances(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	v := control.NewFleetView(control.Summary{Instance: "b", ConfigHash: "h1", At: now.Add(-2 * time.Second), Groups: []control.SummaryGroup{group("g", 3, "x:1", "y:1")}},
		[]control.Summary{{Instance: "c", ConfigHash: "h2"}, {Instance: "a", ConfigHash: "h1", At: now}}, false, now)
	var names []string
	for _, in := range v.Instances {
		names = append(names, in.Instance)
	}
	if got := strings.Join(names, ","); got != "b,a,c" {
		t.Errorf("instances %s, want self first then by name: b,a,c", got)
	}
	if v.ConfigHashes != 2 || v.Connected || v.Instances[0].Down != 2 || v.Instances[0].AgeSec != 2 {
		t.Errorf("view %+v: want 2 config hashes, not connected, self 2 down, 2 s old", v)
	}
}

func TestBoundKeepsSummariesSmall(t *testing.T) {
	long := strings.Repeat("n", 500)
	s := control.Summary{Instance: long, ConfigHash: "0123456789ab"}
	for i := range 1000 {
		s.Services = append(s.Services, control.SummaryService{Name: fmt.Sprintf("%s-%d", long, i), Rate: 1e9, ErrorRate: 0.5})
		g := control.SummaryGroup{Name: fmt.Sprintf("%s-%d", long, i), Zone: long, Members: 1000}
		for j := range 1000 {
			g.Down = append(g.Down, fmt.Sprintf("%s-%d", long, j))
		}
		s.Groups = append(s.Groups, g)
		sp := control.SummarySplit{Frontend: long, Source: long}
		for range 100 {
			sp.Services = append(sp.Services, control.SummaryWeighted{Service: long, Configured: 0.123456789, Measured: 0.987654321})
		}
		s.Splits = append(s.Splits, sp)
	}
	b := control.Bound(s)
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worst-case summary: %d bytes", len(raw))
	if len(raw) > control.MaxSummaryBytes || !b.Truncated {
		t.Errorf("bounded worst-case summary: %d bytes (max %d), truncated %v", len(raw), control.MaxSummaryBytes, b.Truncated)
	}
	down := 0
	for _, g := range b.Groups {
		down += len(g.Down)
	}
	if down != control.MaxSummaryDown || len(b.Groups) != control.MaxSummaryGroups {
		t.Errorf("kept %d down endpoints in %d groups, want %d in %d", down, len(b.Groups), control.MaxSummaryDown, control.MaxSummaryGroups)
	}
	small := control.Summary{Instance: "a", Groups: []control.SummaryGroup{group("g", 2, "x:1")}}
	if got := control.Bound(small); got.Truncated || !reflect.DeepEqual(got, small) {
		t.Errorf("a small summary changed: %+v", got)
	}
}

func TestSummaryChanged(t *testing.T) {
	base := control.Summary{Instance: "a", ConfigHash: "h", Rate: 100, ErrorRate: 0.01, ActiveConnections: 40,
		Services: []control.SummaryService{{Name: "s", Rate: 100}},
		Splits:   []control.SummarySplit{{Frontend: "f", Source: "default", Measured: true, Services: []control.SummaryWeighted{{Service: "s", Configured: 1, Measured: 1}}}},
		Groups:   []control.SummaryGroup{group("g", 2)}}
	with := func(f func(*control.Summary)) control.Summary {
		raw, _ := json.Marshal(base)
		var s control.Summary
		json.Unmarshal(raw, &s)
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name string
		b    control.Summary
		want bool
	}{
		{"same", with(func(*control.Summary) {}), false},
		{"only the time", with(func(s *control.Summary) { s.At = time.Now() }), false},
		{"rate within 10%", with(func(s *control.Summary) { s.Rate = 108; s.Services[0].Rate = 93 }), false},
		{"rate +30%", with(func(s *control.Summary) { s.Rate = 130 }), true},
		{"service rate to zero", with(func(s *control.Summary) { s.Services[0].Rate = 0 }), true},
		{"small rate noise", with(func(s *control.Summary) { s.Rate, s.Services[0].Rate = 0.3, 0.3 }), true},
		{"connections +3", with(func(s *control.Summary) { s.ActiveConnections = 43 }), false},
		{"connections x2", with(func(s *control.Summary) { s.ActiveConnections = 80 }), true},
		{"an endpoint down", with(func(s *control.Summary) { s.Groups[0] = group("g", 2, "x:1") }), true},
		{"config", with(func(s *control.Summary) { s.ConfigHash = "i" }), true},
		{"stale", with(func(s *control.Summary) { s.Stale = true }), true},
		{"measured share moved", with(func(s *control.Summary) { s.Splits[0].Services[0].Measured = 0.9 }), true},
		{"error share moved a little", with(func(s *control.Summary) { s.ErrorRate = 0.03 }), false},
	} {
		if got := control.SummaryChanged(base, tc.b); got != tc.want {
			t.Errorf("%s: changed %v, want %v", tc.name, got, tc.want)
		}
	}
	// Noise at low rates: 2 → 3 rps over 10 s is within 3√(0.3).
	if control.SummaryChanged(with(func(s *control.Summary) { s.Rate, s.Services[0].Rate = 2, 2 }), with(func(s *control.Summary) { s.Rate, s.Services[0].Rate = 3, 3 })) {
		t.Errorf("2 → 3 rps counted as a change")
	}
}
