package managedcert

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mholt/acmez/v3/acme"
)

// Status is a managed certificate's standing, as Google reports it in
// sslCertificates[].managed.
type Status struct {
	// Status is ACTIVE (every domain has a certificate), PROVISIONING,
	// PROVISIONING_FAILED (a domain failed and none is pending) or
	// RENEWAL_FAILED (a certificate is served but its renewal failed).
	Status string
	// DomainStatus maps each domain to PROVISIONING, ACTIVE,
	// FAILED_NOT_VISIBLE, FAILED_CAA_FORBIDDEN or FAILED_RATE_LIMITED.
	DomainStatus map[string]string
	// Detail is the last failure per domain (Spillway's addition).
	Detail map[string]string
	// ExpireTime is the earliest expiry of the domains' certificates
	// (zero until one is ACTIVE).
	ExpireTime time.Time
}

// Status returns the standing of a certificate for domains.
func (m *Manager) Status(domains []string) Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{DomainStatus: map[string]string{}, Detail: map[string]string{}}
	var active, pending, failed, renewalFailed int
	for _, d := range normalize(domains) {
		ds := m.status[d]
		if ds == nil {
			ds = &domainState{status: "PROVISIONING"}
		}
		st.DomainStatus[d] = ds.status
		if ds.detail != "" {
			st.Detail[d] = ds.detail
		}
		switch {
		case ds.status == "ACTIVE":
			active++
			st.ExpireTime = m.earliestExpiry(d, st.ExpireTime)
		case ds.status == "PROVISIONING":
			pending++
		default:
			failed++
		}
		if ds.renewalFailed {
			renewalFailed++
		}
	}
	switch {
	case renewalFailed > 0:
		st.Status = "RENEWAL_FAILED"
	case active > 0 && pending == 0 && failed == 0:
		st.Status = "ACTIVE"
	case failed > 0 && pending == 0:
		st.Status = "PROVISIONING_FAILED"
	default:
		st.Status = "PROVISIONING"
	}
	return st
}

// earliestExpiry returns the earlier of t (zero: none yet) and the
// expiry of d's cached certificate; the lock is held.
func (m *Manager) earliestExpiry(d string, t time.Time) time.Time {
	if m.cache == nil {
		return t
	}
	for _, c := range m.cache.AllMatchingCertificates(d) {
		if c.Leaf == nil {
			continue
		}
		if end := c.Leaf.NotAfter; t.IsZero() || end.Before(t) {
			t = end
		}
	}
	return t
}

// onEvent follows certmagic's events to keep each domain's status. It
// never returns an error (one would abort the operation).
func (m *Manager) onEvent(_ context.Context, event string, data map[string]any) error {
	switch event {
	case "cached_managed_cert":
		names, _ := data["sans"].([]string)
		for _, d := range names {
			m.set(d, func(ds *domainState) { *ds = domainState{status: "ACTIVE"} })
		}
	case "cert_obtained":
		d, _ := data["identifier"].(string)
		renewal, _ := data["renewal"].(bool)
		m.set(d, func(ds *domainState) { *ds = domainState{status: "ACTIVE"} })
		m.log.Info("managed certificate obtained", "domain", d, "renewal", renewal)
	case "cert_failed":
		d, _ := data["identifier"].(string)
		renewal, _ := data["renewal"].(bool)
		err, _ := data["error"].(error)
		m.set(d, func(ds *domainState) { ds.fail(renewal, err) })
		m.log.Warn("managed certificate failed", "domain", d, "renewal", renewal, "err", err)
	}
	return nil
}

// set changes the state of managed domain d (others are ignored).
func (m *Manager) set(d string, fn func(*domainState)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ds := m.status[strings.ToLower(d)]; ds != nil {
		fn(ds)
	}
}

// fail records a failed order or renewal.
func (ds *domainState) fail(renewal bool, err error) {
	ds.detail = fmt.Sprint(err)
	if renewal && ds.status == "ACTIVE" {
		ds.renewalFailed = true
		return
	}
	ds.status = FailureStatus(err)
}

// FailureStatus maps an order's error to Google's domain status: the
// ACME server's rate limit, a CAA record forbidding the CA, and anything
// else (the validation could not reach this server, DNS does not point
// here) as FAILED_NOT_VISIBLE.
func FailureStatus(err error) string {
	var p acme.Problem
	if errors.As(err, &p) {
		switch {
		case strings.HasSuffix(p.Type, ":rateLimited"):
			return "FAILED_RATE_LIMITED"
		case strings.HasSuffix(p.Type, ":caa"):
			return "FAILED_CAA_FORBIDDEN"
		}
	}
	return "FAILED_NOT_VISIBLE"
}
