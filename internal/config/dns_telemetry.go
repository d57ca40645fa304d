package config

import "strings"

// DNSQueryLog is spillway.dnsQueryLog: a sample of the DNS frontends'
// queries, one JSON line each, written by the access log's writer
// (docs/dns.md "Telemetry").
type DNSQueryLog struct {
	// Enable turns the log on.
	Enable bool `json:"enable,omitempty"`
	// SampleRate is the fraction (0-1) of queries logged. Default 1.
	SampleRate *float64 `json:"sampleRate,omitempty"`
	// Path is the file the lines are appended to, or "stdout". Default:
	// the access log's destination when the access log is on (its lines
	// and these interleave whole), else stdout.
	Path string `json:"path,omitempty"`
}

// DNSTap is spillway.dnstap: every DNS query and response as dnstap
// AUTH_QUERY and AUTH_RESPONSE messages in a Frame Streams stream
// (docs/dns.md "Telemetry"). Exactly one of Socket and File.
type DNSTap struct {
	// Socket is the path of a Unix socket a dnstap collector listens on
	// (Spillway connects, and reconnects when it goes away).
	Socket string `json:"socket,omitempty"`
	// File is a file written from the start (truncated) at every start
	// and at every reload that changes the dnstap settings.
	File string `json:"file,omitempty"`
	// Identity and Version are the dnstap identity and version fields.
	// Defaults: the host name, and "spillway".
	Identity string `json:"identity,omitempty"`
	Version  string `json:"version,omitempty"`
	// BufferSize is how many messages may wait for the writer; past it
	// messages are dropped and counted (spillway_dnstap_dropped_total).
	// Default 8192.
	BufferSize *int `json:"bufferSize,omitempty"`
}

// dnsTelemetry validates spillway.dnsQueryLog and spillway.dnstap.
func (v *validator) dnsTelemetry() {
	sp := v.c.Spillway
	if sp == nil {
		return
	}
	if ql := sp.DNSQueryLog; ql != nil {
		v.floatRange("spillway.dnsQueryLog.sampleRate", ql.SampleRate, 0, 1)
		if strings.ContainsRune(ql.Path, 0) {
			v.add("spillway.dnsQueryLog.path", `write a file path or "stdout"`, "%q is not a file path", ql.Path)
		}
	}
	if dt := sp.DNSTap; dt != nil {
		if (dt.Socket == "") == (dt.File == "") {
			v.add("spillway.dnstap", "set exactly one of socket (a Unix socket path) and file", "socket %q and file %q", dt.Socket, dt.File)
		}
		v.intRange("spillway.dnstap.bufferSize", dt.BufferSize, 1, 1<<20)
	}
}
