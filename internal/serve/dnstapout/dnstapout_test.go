package dnstapout_test

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve/dnstapout"
)

// A collector that accepts the connection and never answers the Frame
// Streams handshake stalls the writer: Send still returns at once, and
// past the queue (and the library's 32-frame channel) queries are
// dropped and counted.
func TestSendNeverBlocks(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "tap.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never read
		}
	}()
	buf := 4
	tap := dnstapout.New(slog.New(slog.DiscardHandler), "test")
	if err := tap.Configure(&config.Config{Spillway: &config.Tuning{DNSTap: &config.DNSTap{Socket: sock, BufferSize: &buf}}}); err != nil {
		t.Fatal(err)
	}
	const n = 10000
	e := &dnstapout.Exchange{Start: time.Now(), Client: netip.MustParseAddrPort("127.0.0.1:5353"), Query: make([]byte, 40), Response: make([]byte, 80)}
	start := time.Now()
	for range n {
		tap.Send(e)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("%d sends took %v", n, d)
	}
	c := tap.Counts()
	if c.Sent+c.Dropped != n || c.Dropped < uint64(n-buf-2*32-2) {
		t.Errorf("counts %+v of %d with a queue of %d", c, n, buf)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := tap.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// Configure rejects a file it cannot create, naming the field.
func TestConfigureBadFile(t *testing.T) {
	tap := dnstapout.New(slog.New(slog.DiscardHandler), "test")
	err := tap.Configure(&config.Config{Spillway: &config.Tuning{DNSTap: &config.DNSTap{File: filepath.Join(t.TempDir(), "missing", "tap.fstrm")}}})
	if err == nil || tap.On() {
		t.Fatalf("err %v, on %v", err, tap.On())
	}
	if got := err.Error(); len(got) < 22 || got[:22] != "spillway.dnstap.file: " {
		t.Errorf("error %q does not name spillway.dnstap.file", got)
	}
}
