package gslb

import (
	"errors"
	"fmt"
	"time"

	"github.com/miekg/dns"
)

// TSIG (RFC 8945) on ordinary queries: a secondary that has a key for
// its primary signs its SOA queries and drops unsigned replies, so a
// signed query gets a signed reply; one whose signature does not verify
// gets NOTAUTH with the TSIG error. Zone transfers sign in transfer.go.

// tsigError returns the reply to r, whose TSIG did not verify (status),
// at now: NOTAUTH, the question, and a TSIG record with the error. A
// BADKEY or BADSIG reply carries no MAC (RFC 8945 §5.2.1, §5.2.2). A
// BADTIME reply is for a request whose MAC did verify (miekg/dns checks
// the time after the MAC), so it is to be signed: its TSIG has the
// request's Time Signed and the server's time in Other Data, 48 bits
// (§5.2.3, as BIND signs it), and sign reports that. A TSIG record with
// no algorithm name (empty RDATA) cannot be echoed, as the name is not
// one: that query gets FORMERR without a TSIG.
func tsigError(r *dns.Msg, status error, now time.Time) (m *dns.Msg, sign bool) {
	t := r.IsTsig()
	m = new(dns.Msg)
	if !dns.IsFqdn(t.Algorithm) {
		m.SetRcodeFormatError(r)
		if len(r.Question) > 1 {
			m.Question = m.Question[:1]
		}
		return m, false
	}
	code := dns.RcodeBadKey // unknown key or algorithm
	switch {
	case errors.Is(status, dns.ErrSig):
		code = dns.RcodeBadSig
	case errors.Is(status, dns.ErrTime):
		code = dns.RcodeBadTime
	}
	m.SetRcode(r, dns.RcodeNotAuth)
	if len(r.Question) > 1 {
		m.Question = m.Question[:1]
	}
	ts := &dns.TSIG{Hdr: dns.RR_Header{Name: t.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
		Algorithm: t.Algorithm, TimeSigned: t.TimeSigned, Fudge: t.Fudge, OrigId: r.Id, Error: uint16(code)}
	if code == dns.RcodeBadTime {
		ts.OtherLen, ts.OtherData = 6, fmt.Sprintf("%012x", uint64(now.Unix())&(1<<48-1))
	}
	m.Extra = append(m.Extra, ts)
	return m, code == dns.RcodeBadTime
}

// writeTSIGError writes the reply to r, whose TSIG did not verify
// (status), on TCP connection w; w signs a BADTIME reply with the
// request's MAC.
func writeTSIGError(w dns.ResponseWriter, r *dns.Msg, status error) {
	m, sign := tsigError(r, status, time.Now())
	if sign {
		_ = w.WriteMsg(m)
		return
	}
	if out, err := m.Pack(); err == nil {
		_, _ = w.Write(out)
	}
}

// tsigErrorUDP returns the reply to r, whose TSIG did not verify
// (status), packed, with a BADTIME reply signed.
func (s *Server) tsigErrorUDP(r *dns.Msg, status error) []byte {
	m, sign := tsigError(r, status, time.Now())
	if !sign {
		out, _ := m.Pack()
		return out
	}
	out, _, err := dns.TsigGenerateWithProvider(m, s.tsig, r.IsTsig().MAC, false)
	if err != nil {
		s.log.Warn("gslb: cannot sign a BADTIME reply", "qname", qname(r), "err", err)
		return nil
	}
	return out
}

// serveSigned answers a TSIG-signed query on TCP; miekg's server has
// verified it (w.TsigStatus) and signs what WriteMsg writes.
func (s *Server) serveSigned(w dns.ResponseWriter, r *dns.Msg, m *dns.Msg) {
	if err := w.TsigStatus(); err != nil {
		writeTSIGError(w, r, err)
		return
	}
	t := r.IsTsig()
	m.SetTsig(t.Hdr.Name, t.Algorithm, t.Fudge, time.Now().Unix())
	if err := w.WriteMsg(m); err != nil {
		s.log.Warn("gslb: cannot sign reply", "qname", qname(r), "err", err)
	}
}

// signUDP returns reply m to r, a TSIG-signed UDP query whose wire form
// is pkt, packed and signed within r's UDP limit, or NOTAUTH when r does
// not verify. A signed reply too large for the limit becomes the question,
// the OPT record (when there is one) and the TSIG with TC set (RFC 8945
// §5.3), and the client retries over TCP. (dns.TsigGenerateWithProvider
// packs m without its TSIG record and appends the signature to the
// output; m keeps its other records.)
func (s *Server) signUDP(m, r *dns.Msg, pkt []byte) []byte {
	if err := dns.TsigVerifyWithProvider(pkt, s.tsig, "", false); err != nil {
		return s.tsigErrorUDP(r, err)
	}
	t := r.IsTsig()
	limit := dns.MinMsgSize
	if opt := r.IsEdns0(); opt != nil {
		limit = min(max(int(opt.UDPSize()), dns.MinMsgSize), MaxUDPSize)
	}
	sign := func(m *dns.Msg) ([]byte, error) {
		m.SetTsig(t.Hdr.Name, t.Algorithm, t.Fudge, time.Now().Unix())
		out, _, err := dns.TsigGenerateWithProvider(m, s.tsig, t.MAC, false)
		return out, err
	}
	out, err := sign(m)
	if err == nil && len(out) > limit {
		tc := &dns.Msg{MsgHdr: m.MsgHdr, Question: m.Question}
		tc.Truncated = true
		if opt := m.IsEdns0(); opt != nil {
			tc.Extra = []dns.RR{opt}
		}
		out, err = sign(tc)
	}
	if err != nil {
		s.log.Warn("gslb: cannot sign reply", "qname", qname(r), "err", err)
		return nil
	}
	return out
}
