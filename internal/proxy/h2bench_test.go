package proxy_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"testing"
)

// BenchmarkProxyH2: GETs through the proxy on the default loop over one
// HTTP/2 connection (h2c with prior knowledge, and h2 over TLS), serial
// and 16 at a time; allocs/op counts client, proxy and backend.
func BenchmarkProxyH2(b *testing.B) {
	for _, e := range h2Entries {
		b.Run(e.name, func(b *testing.B) {
			be := newBackend(b, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				io.WriteString(w, "hello, world\n")
			})
			var p http.Protocols
			p.SetHTTP2(e.tls)
			p.SetUnencryptedHTTP2(!e.tls)
			l := e.lab(b, basic("", "", be.addr()))
			tr := &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the test's own certificate
			b.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr}
			get := func(req *http.Request) error {
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
					b.Errorf("got %d over %s", resp.StatusCode, resp.Proto)
				}
				return nil
			}
			b.Run("serial", func(b *testing.B) {
				req, _ := http.NewRequest("GET", l.url+"/bench?x=1", nil)
				b.ReportAllocs()
				for b.Loop() {
					if err := get(req); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(8) // 16 on 2 CPUs
				b.RunParallel(func(pb *testing.PB) {
					req, _ := http.NewRequest("GET", l.url+"/bench?x=1", nil)
					for pb.Next() {
						if err := get(req); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}
