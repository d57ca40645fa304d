package serve_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dnstap "github.com/dnstap/golang-dnstap"
	"github.com/miekg/dns"
	"google.golang.org/protobuf/proto"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// telemetryConfig is a DNS-only config with the query log and dnstap
// writing to files in dir.
func telemetryConfig(t *testing.T, dir string) *config.Config {
	t.Helper()
	y := fmt.Sprintf(`frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  records:
  - {name: ns1, type: A, rrdatas: ["127.0.0.1"]}
  - {name: mail, type: MX, rrdatas: ["10 mx.gslb.example."]}
  gslbNames:
  - name: w
    pool:
      members:
      - {name: a, address: 192.0.2.1}
spillway:
  dnsQueryLog: {enable: true, path: %s}
  dnstap: {file: %s, identity: ns-test, version: v-test}
`, filepath.Join(dir, "queries.log"), filepath.Join(dir, "dnstap.fstrm"))
	c, err := config.Parse([]byte(y), "telemetry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sentQuery is one query the test sends and what dnstap must show.
type sentQuery struct {
	network, name string
	qtype         uint16
	id            uint16
}

// Queries over real UDP and TCP sockets show in /metrics by zone, type,
// rcode and transport, in the query log, and in the dnstap file, which
// golang-dnstap's reader decodes back to the queries and their
// responses.
func TestDNSTelemetryEndToEnd(t *testing.T) {
	dir := t.TempDir()
	s := mustNew(t, telemetryConfig(t, dir))
	stop := servetest.Start(t, s)
	addr := s.DNSAddr("dns")
	sent := []sentQuery{
		{"udp", "w.gslb.example.", dns.TypeA, 0},
		{"tcp", "mail.gslb.example.", dns.TypeMX, 0},
		{"udp", "nope.gslb.example.", dns.TypeAAAA, 0},
		{"udp", "www.example.org.", dns.TypeTXT, 0},
	}
	for i := range sent {
		m := new(dns.Msg)
		m.SetQuestion(sent[i].name, sent[i].qtype)
		sent[i].id = m.Id
		c := &dns.Client{Net: sent[i].network, Timeout: 2 * time.Second}
		if _, _, err := c.Exchange(m, addr); err != nil {
			t.Fatalf("%s %s: %v", sent[i].network, sent[i].name, err)
		}
	}
	checkDNSMetrics(t, s.AdminAddr())
	stop() // the writers finish: the dnstap file is complete
	checkDnstapFile(t, filepath.Join(dir, "dnstap.fstrm"), sent)
	checkQueryLog(t, filepath.Join(dir, "queries.log"), sent)
}

func mustNew(t *testing.T, c *config.Config) *serve.Server {
	t.Helper()
	s, err := serve.New(c, serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1, Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func checkDNSMetrics(t *testing.T, admin string) {
	t.Helper()
	get := func() string {
		resp, err := http.Get("http://" + admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(body)
	}
	// The TCP listener hands a query to dnstap after writing its answer:
	// a client can have the answer before the query is queued. Wait
	// (bounded) for the four.
	body := get()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(body, "spillway_dnstap_queued_total 4") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		body = get()
	}
	for _, want := range []string{
		`spillway_dns_responses_total{qtype="A",rcode="NOERROR",transport="udp",zone="gslb.example."} 1`,
		`spillway_dns_responses_total{qtype="MX",rcode="NOERROR",transport="tcp",zone="gslb.example."} 1`,
		`spillway_dns_responses_total{qtype="AAAA",rcode="NXDOMAIN",transport="udp",zone="gslb.example."} 1`,
		`spillway_dns_responses_total{qtype="TXT",rcode="REFUSED",transport="udp",zone="other"} 1`,
		`spillway_dns_signature_cache_total{result="miss"} 0`,
		`spillway_dnstap_queued_total 4`,
		`spillway_dnstap_dropped_total 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func checkDnstapFile(t *testing.T, path string, sent []sentQuery) {
	t.Helper()
	in, err := dnstap.NewFrameStreamInputFromFilename(path)
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan []byte, 64)
	go func() { in.ReadInto(frames); close(frames) }()
	var got []string
	for f := range frames {
		var d dnstap.Dnstap
		if err := proto.Unmarshal(f, &d); err != nil {
			t.Fatal(err)
		}
		m := d.GetMessage()
		if string(d.Identity) != "ns-test" || string(d.Version) != "v-test" {
			t.Errorf("identity %q version %q", d.Identity, d.Version)
		}
		var q dns.Msg
		if err := q.Unpack(m.QueryMessage); err != nil {
			t.Fatalf("%v: query message: %v", m.GetType(), err)
		}
		line := fmt.Sprintf("%v %v %s %s %d", m.GetType(), m.GetSocketProtocol(), q.Question[0].Name, dns.TypeToString[q.Question[0].Qtype], q.Id)
		if m.GetType() == dnstap.Message_AUTH_RESPONSE {
			var r dns.Msg
			if err := r.Unpack(m.ResponseMessage); err != nil || r.Id != q.Id || !r.Response {
				t.Errorf("%s: response %v (%v)", line, &r, err)
			}
			line += " " + dns.RcodeToString[r.Rcode]
		}
		if ip := net.IP(m.QueryAddress); !ip.IsLoopback() || m.GetQueryPort() == 0 {
			t.Errorf("%s: query address %v port %d", line, ip, m.GetQueryPort())
		}
		got = append(got, line)
	}
	var want []string
	rcodes := []string{"NOERROR", "NOERROR", "NXDOMAIN", "REFUSED"}
	for i, q := range sent {
		p := strings.ToUpper(q.network)
		base := fmt.Sprintf("%s %s %s %d", p, q.name, dns.TypeToString[q.qtype], q.id)
		want = append(want, "AUTH_QUERY "+base, "AUTH_RESPONSE "+base+" "+rcodes[i])
	}
	// In the order the exchanges were tapped: a TCP query is tapped after
	// its answer is written, so a later UDP query may come first.
	slices.Sort(got)
	slices.Sort(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("dnstap messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func checkQueryLog(t *testing.T, path string, sent []sentQuery) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(sent) {
		t.Fatalf("%d query log lines, want %d:\n%s", len(lines), len(sent), b)
	}
	// The lines come in the order the answers were logged: a TCP query
	// is logged after its answer is written, so a later UDP query's line
	// may come first. Match them by name.
	type entry struct {
		Qname, Qtype, Transport, Member string
		Answers                         []string
	}
	byName := map[string]entry{}
	for _, l := range lines {
		var e struct{ DNSQuery entry }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		byName[e.DNSQuery.Qname] = e.DNSQuery
	}
	for i, want := range sent {
		q, ok := byName[want.name]
		if !ok || q.Qtype != dns.TypeToString[want.qtype] || q.Transport != want.network {
			t.Errorf("query %d: logged %+v (found %v), want %v", i, q, ok, want)
		}
		if i == 0 && (q.Member != "a" || len(q.Answers) != 1 || q.Answers[0] != "192.0.2.1") {
			t.Errorf("query 0: member %q answers %v, want a and 192.0.2.1", q.Member, q.Answers)
		}
	}
}
