package proxy_test

import (
	"io"
	"net/http"
	"testing"
	"time"
)

func TestMirrorSendsShadowCopyWithoutDelayingPrimary(t *testing.T) {
	t.Parallel()
	primary := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "primary") })
	hosts := make(chan string, 4)
	stop := make(chan struct{})
	shadow := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
		select { // a slow mirror must not hold the primary answer
		case <-stop:
		case <-time.After(30 * time.Second):
		}
	})
	t.Cleanup(func() { close(stop) }) // runs before the backend's Close
	yaml := "healthChecks:\n- name: hc\n  type: HTTP\n" +
		"networkEndpointGroups:\n- name: neg-a\n  zone: us-east1-b\n  endpoints:\n" + eps(primary.addr()) +
		"- name: neg-shadow\n  zone: us-east1-b\n  endpoints:\n" + eps(shadow.addr()) +
		"backendServices:\n- name: bs\n  healthChecks: [hc]\n  backends: [{group: neg-a, balancingMode: RATE, maxRatePerEndpoint: 1000}]\n" +
		"- name: bs-shadow\n  healthChecks: [hc]\n  backends: [{group: neg-shadow, balancingMode: RATE, maxRatePerEndpoint: 1000}]\n" +
		"urlMaps:\n- name: um\n  defaultRouteAction:\n    weightedBackendServices: [{backendService: bs, weight: 1}]\n" +
		"    requestMirrorPolicy: {backendService: bs-shadow}\n" +
		"frontends:\n- name: fe\n  address: 127.0.0.1:0\n  urlMap: um\n  region: us-east1\n"
	l := newLab(t, yaml, nil)
	var resp *http.Response
	var body string
	within(t, 10*time.Second, "primary answer with a mirror that holds 30 s", func() { resp, body = l.get("/m", "shop.example.com") })
	if resp.StatusCode != 200 || body != "primary" {
		t.Fatalf("got %d %q, want 200 primary", resp.StatusCode, body)
	}
	select {
	case h := <-hosts:
		if h != "shop.example.com-shadow" {
			t.Errorf("mirror saw Host %q, want shop.example.com-shadow", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("mirror backend never saw the copy")
	}
	// POSTs with bodies are not mirrored.
	req, _ := http.NewRequest("POST", l.url+"/m", nil)
	req.Body = io.NopCloser(io.LimitReader(zeros{}, 10))
	req.ContentLength = 10
	l.do(req)
	select {
	case h := <-hosts:
		t.Errorf("a request with a body was mirrored (Host %q)", h)
	case <-time.After(200 * time.Millisecond):
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestFaultDelay(t *testing.T) {
	t.Parallel()
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "late") })
	um := "  defaultRouteAction:\n    weightedBackendServices: [{backendService: bs, weight: 1}]\n" +
		"    faultInjectionPolicy:\n      delay: {fixedDelay: {nanos: 300000000}, percentage: 100}\n"
	l := newLab(t, basic("", um, be.addr()), nil)
	start := time.Now()
	resp, body := l.get("/", "")
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("answered after %v, want at least the 300ms fault delay", el)
	}
	if resp.StatusCode != 200 || body != "late" {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
}
