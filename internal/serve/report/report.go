// Package report is the get-health view of a running instance: per
// backend service, backend and endpoint, like `gcloud compute
// backend-services get-health`, plus Spillway's drain state and traffic
// shares. It is built from the control state and the engine's view; the
// admin API serves it as JSON and the dashboard and the CLI read it.
package report

import (
	"time"

	"github.com/spillwaylb/spillway/internal/anycast"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/overlay"
)

// Health is the get-health view: per backend service, backend and
// endpoint, like `gcloud compute backend-services get-health`, plus
// Spillway's drain state and traffic shares.
type Health struct {
	Version  uint64    `json:"version"`
	Time     time.Time `json:"time"`
	Services []Service `json:"backendServices"`
	// Fleet is the instance's standing with the fleet's shared config
	// (spillway serve --fleet): revision in force, stale or not. Absent
	// when standalone.
	Fleet *control.FleetStatus `json:"fleet,omitempty"`
	// DNSSEC lists the managed keys (dnsZones[].dnssec.keyDirectory) of
	// each zone that has them: every key's role, schedule and phase, and
	// when the keys next change. Absent without managed keys.
	DNSSEC []KeyZone `json:"dnssec,omitempty"`
	// Overlay is the runtime changes in force (spillway ctl, POST
	// /overlay) and the problems applying them; absent when there are
	// none.
	Overlay *Overlay `json:"overlay,omitempty"`
	// SslCertificates are the config's SSL certificates, MANAGED ones
	// with their status (filled in by the server, like Fleet).
	SslCertificates []SslCertificate `json:"sslCertificates,omitempty"`
	// Resolutions are the DNS names of INTERNET_FQDN_PORT endpoints and
	// serverless base URLs: addresses in use, TTL, next lookup, and the
	// error of failed lookups (the last good addresses are kept).
	Resolutions []Resolution `json:"resolutions,omitempty"`
	// RegionalLayers is what an edge knows of the regional layers it
	// forwards to (filled in by the server, like Fleet); absent on an
	// instance without EDGE frontends.
	RegionalLayers []RegionalLayer `json:"regionalLayers,omitempty"`
	// BGP is the anycast announcements (spillway.bgp): each session with
	// a router and each prefix's state with its reason. Absent without
	// spillway.bgp.
	BGP *BGP `json:"bgp,omitempty"`
}

// RegionalLayer is one region's regional layer as an edge sees it
// (docs/global.md, "Two proxy layers").
type RegionalLayer struct {
	Region    string             `json:"region"`
	Endpoints []RegionalEndpoint `json:"endpoints"`
}

// RegionalEndpoint is one endpoint of a regional layer.
type RegionalEndpoint struct {
	Address string `json:"address"`
	// State is SERVING, or SET_ASIDE while the edge sends it nothing
	// (its health check failed, or a request could not connect).
	State string `json:"state"`
	// Connections is how many HTTP/2 connections the edge has open to it.
	Connections int `json:"connections"`
	// Checked is the time of the last health check and Detail its
	// result ("ok", or why it failed).
	Checked time.Time `json:"checked,omitzero"`
	Detail  string    `json:"detail,omitempty"`
}

// BGP is the anycast view: sessions and prefixes.
type BGP struct {
	LocalASN int64  `json:"localAsn"`
	RouterID string `json:"routerId"`
	// Sessions are the neighbors' sessions, by address.
	Sessions []BGPSession `json:"sessions"`
	// Prefixes are the frontends' anycast prefixes and how each is
	// announced (package anycast decides).
	Prefixes []anycast.Prefix `json:"prefixes"`
	// Error is the last error applying the decisions (empty: none).
	Error string `json:"error,omitempty"`
}

// BGPSession is one neighbor's session.
type BGPSession struct {
	// Neighbor is the router's address:port.
	Neighbor string `json:"neighbor"`
	PeerASN  uint32 `json:"peerAsn"`
	// State is IDLE, CONNECT, ACTIVE, OPENSENT, OPENCONFIRM or
	// ESTABLISHED.
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
	// Flaps counts the times the session went down.
	Flaps uint32 `json:"flaps"`
	// Advertised and Received count the prefixes sent and received on
	// the session (received ones are never used).
	Advertised uint64 `json:"advertised"`
	Received   uint64 `json:"received"`
}

// Overlay is the runtime changes (package overlay) an instance applies
// on top of its config.
type Overlay struct {
	Entries []overlay.Entry `json:"entries"`
	// Problems are entries that name something the config lacks (they
	// change nothing until it has it again) or that the config could not
	// take.
	Problems []string `json:"problems,omitempty"`
}

// Resolution is one DNS name's state.
type Resolution struct {
	Name string `json:"name"`
	// Addresses are the last good answer's, in use.
	Addresses []string `json:"addresses"`
	// TTLSec is that answer's TTL; Next when the name is looked up again.
	TTLSec   float64   `json:"ttlSec"`
	Next     time.Time `json:"next"`
	Resolved time.Time `json:"resolved,omitzero"`
	// Error and Failures describe the lookups that failed since.
	Error    string `json:"error,omitempty"`
	Failures int    `json:"failures,omitempty"`
}

// Service is one backend service.
type Service struct {
	Name      string    `json:"name"`
	Algorithm string    `json:"loadBalancingAlgorithm"`
	AutoDrain bool      `json:"autoCapacityDrain"`
	Threshold int       `json:"failoverHealthThreshold"`
	Backends  []Backend `json:"backends"`
	// Frontends is the split as each HTTP(S) frontend's clients see it:
	// the engine's shares for the frontend's region (Backends[].Share is
	// for clients without a region) beside the split its requests
	// actually took.
	Frontends []FrontendSplit `json:"frontends,omitempty"`
}

// FrontendSplit is a service's split seen from one frontend.
type FrontendSplit struct {
	Frontend string `json:"frontend"`
	// ClientRegion is the frontend's region, "" when it has none (its
	// clients are then clients without a region).
	ClientRegion string `json:"clientRegion"`
	// MeasuredRequests is how many of the frontend's requests reached a
	// backend of the service since the process started; the measured
	// shares are over them.
	MeasuredRequests uint64 `json:"measuredRequests"`
	// OfferedRate is the offered rate (requests per second) the split is
	// computed for: the service's clients in ClientRegion, through every
	// frontend of the region, as last measured (the control state keeps
	// it within 5%). In fleet mode it is the fleet's: this instance's
	// own plus the other instances' published rates.
	OfferedRate float64      `json:"offeredRate"`
	Backends    []SplitShare `json:"backends"`
}

// SplitShare is one backend's computed and measured share.
type SplitShare struct {
	Group string `json:"group"`
	Zone  string `json:"zone"`
	// Share is the engine's share for the frontend's region, 0-1.
	Share float64 `json:"share"`
	// MeasuredShare is the fraction of MeasuredRequests the backend got.
	MeasuredShare float64 `json:"measuredShare"`
}

// Backend is one backend (group) of a service.
type Backend struct {
	Group        string  `json:"group"`
	Zone         string  `json:"zone"`
	Region       string  `json:"region"`
	Preference   string  `json:"preference"`
	Healthy      int     `json:"healthy"`
	Members      int     `json:"members"`
	Drained      bool    `json:"drained"`
	DrainBlocked bool    `json:"drainBlocked"`
	Share        float64 `json:"share"` // of the service's traffic (no client region)
	// MeasuredCapacity is a UTILIZATION backend's capacity in requests
	// per second as measured from its endpoints' load reports
	// (docs/global.md, "Capacity between the layers"); 0 when none.
	MeasuredCapacity float64 `json:"measuredCapacityRps,omitempty"`
	// Why explains the state in words.
	Why       string     `json:"why,omitempty"`
	Endpoints []Endpoint `json:"healthStatus"`
}

// Endpoint is one endpoint.
type Endpoint struct {
	Instance    string    `json:"instance,omitempty"`
	IPAddress   string    `json:"ipAddress"`
	HealthState string    `json:"healthState"` // HEALTHY, UNHEALTHY, UNKNOWN
	Ejected     bool      `json:"ejected,omitempty"`
	Detail      string    `json:"detail,omitempty"`
	Since       time.Time `json:"since,omitzero"`
}

// Build reports the state st holds and the split v computes, at now.
func Build(st *control.State, v *engine.View, now time.Time) *Health {
	p := st.Plan()
	r := &Health{Version: st.Version(), Time: now}
	for _, svc := range p.Services {
		sh := Service{Name: svc.Name, Algorithm: svc.Algorithm.String(), AutoDrain: svc.AutoDrain, Threshold: int(svc.FailoverThreshold*100 + 0.5)}
		split := v.Split(svc.ID, -1)
		for _, b := range svc.Backends {
			bs := v.Backend(svc.ID, b.Index)
			bh := Backend{
				Group: b.Group.Name, Zone: b.Group.Zone, Region: b.Group.Region, Preference: "DEFAULT",
				Healthy: bs.Healthy, Members: bs.Members, Drained: bs.Drained, DrainBlocked: bs.DrainBlocked,
				MeasuredCapacity: st.Measured(svc.ID, b.Index),
			}
			if b.Preferred {
				bh.Preference = "PREFERRED"
			}
			for _, s := range split.Shares {
				if s.Backend == b.Index {
					bh.Share = s.Fraction
				}
			}
			switch {
			case bs.Drained:
				bh.Why = "auto-capacity drain: fewer than 25% of members healthy; returns after 35% are healthy for the undrain hold"
			case bs.DrainBlocked:
				bh.Why = "drain blocked: below 25% healthy, but 50% of the service's backends are already drained"
			case b.ZeroCapacity():
				bh.Why = "zero capacity (capacityScaler 0 or no members)"
			case bs.Healthy == 0:
				bh.Why = "no healthy endpoint"
			}
			for _, e := range b.Endpoints {
				hs := st.Health(e.ID)
				eh := Endpoint{Instance: e.Instance, IPAddress: e.Addr, HealthState: "UNKNOWN", Ejected: st.Ejected(e.ID), Detail: hs.Detail, Since: hs.Since}
				if hs.Known() {
					eh.HealthState = "UNHEALTHY"
					if hs.Healthy() {
						eh.HealthState = "HEALTHY"
					}
				}
				bh.Endpoints = append(bh.Endpoints, eh)
			}
			sh.Backends = append(sh.Backends, bh)
		}
		for _, f := range p.Frontends {
			if f.Protocol != "HTTP" && f.Protocol != "HTTPS" {
				continue
			}
			fsplit := FrontendSplit{Frontend: f.Name, ClientRegion: f.Region, OfferedRate: st.Demand(svc.ID, f.RegionID)}
			rsplit := v.Split(svc.ID, f.RegionID)
			for _, b := range svc.Backends {
				ss := SplitShare{Group: b.Group.Name, Zone: b.Group.Zone}
				for _, s := range rsplit.Shares {
					if s.Backend == b.Index {
						ss.Share = s.Fraction
					}
				}
				fsplit.Backends = append(fsplit.Backends, ss)
			}
			sh.Frontends = append(sh.Frontends, fsplit)
		}
		r.Services = append(r.Services, sh)
	}
	return r
}

// KeyZone is a zone's managed DNSSEC keys at a time (dnssec.ZoneStatus,
// copied here so that the report stays free of the key directory's I/O).
type KeyZone struct {
	Zone string `json:"zone"`
	Keys []Key  `json:"keys"`
	// NextEvent is when the keys next change (zero: nothing scheduled).
	NextEvent time.Time `json:"nextEvent,omitzero"`
}

// Key is one key of a KeyZone: its schedule (see dnssec.KeyTiming), its
// phase, and whether the CDS and CDNSKEY sets name it (KSKs).
type Key struct {
	Tag       uint16    `json:"tag"`
	Role      string    `json:"role"`
	File      string    `json:"file"`
	Created   time.Time `json:"created"`
	Published time.Time `json:"published"`
	Active    time.Time `json:"active"`
	Retired   time.Time `json:"retired,omitzero"`
	Removed   time.Time `json:"removed,omitzero"`
	Phase     string    `json:"phase"`
	InDS      bool      `json:"inDs,omitempty"`
}

// SslCertificate is one sslCertificates[] entry, as `gcloud compute
// ssl-certificates describe` shows it: a MANAGED one's status and each
// domain's.
type SslCertificate struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// ExpireTime is when the served certificate expires (RFC 3339; set
	// once a MANAGED certificate is ACTIVE).
	ExpireTime string         `json:"expireTime,omitempty"`
	Managed    *ManagedStatus `json:"managed,omitempty"`
}

// ManagedStatus is sslCertificates[].managed: Status is PROVISIONING,
// ACTIVE, PROVISIONING_FAILED or RENEWAL_FAILED; DomainStatus maps each
// domain to PROVISIONING, ACTIVE, FAILED_NOT_VISIBLE, FAILED_CAA_FORBIDDEN
// or FAILED_RATE_LIMITED. Detail (a Spillway addition) is each failed
// domain's last error.
type ManagedStatus struct {
	Domains      []string          `json:"domains"`
	Status       string            `json:"status"`
	DomainStatus map[string]string `json:"domainStatus,omitempty"`
	Detail       map[string]string `json:"detail,omitempty"`
}
