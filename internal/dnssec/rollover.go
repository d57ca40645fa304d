package dnssec

import (
	"fmt"
	"slices"
	"time"
)

// Key roles of a zone with automated keys: a key-signing key (DNSKEY
// flags 257, SEP) signs the DNSKEY, CDS and CDNSKEY sets and is what the
// parent's DS points at; a zone-signing key (flags 256) signs the rest.
const (
	RoleKSK = "KSK"
	RoleZSK = "ZSK"
)

// ZSKFlags is the DNSKEY flags field of a zone-signing key (Zone Key).
const ZSKFlags = 256

// KeyTiming is one key of a zone's key state and its schedule. Every
// time is decided when the key is made (or when its successor is), so
// the state is a plan: what is published and what signs at a time t is
// a function of the state and t alone (InDNSKEY, Signs, InDS).
type KeyTiming struct {
	Tag  uint16 `json:"tag"`
	Role string `json:"role"`
	// File is the private key's file name in the key directory.
	File    string    `json:"file"`
	Created time.Time `json:"created"`
	// Published is when the DNSKEY enters the zone's DNSKEY set.
	Published time.Time `json:"published"`
	// Active is when a ZSK starts signing, and when a KSK becomes the
	// key of the CDS and CDNSKEY sets (the parent's DS should follow).
	Active time.Time `json:"active"`
	// Retired is when a ZSK stops signing and a KSK leaves the CDS and
	// CDNSKEY sets (zero: not scheduled).
	Retired time.Time `json:"retired,omitzero"`
	// Removed is when the DNSKEY leaves the DNSKEY set (zero: not
	// scheduled); the key is then dropped from the state.
	Removed time.Time `json:"removed,omitzero"`
}

// KeyState is the key state of one zone, as kept in its key directory.
type KeyState struct {
	Zone string      `json:"zone"`
	Keys []KeyTiming `json:"keys"`
}

// Policy is a zone's key schedule.
type Policy struct {
	// ZSKLifetime is how long a ZSK signs before its successor does.
	ZSKLifetime time.Duration
	// KSKLifetime is how long a KSK is the DS key before its successor
	// is; 0: the KSK is never rolled automatically.
	KSKLifetime time.Duration
	// Propagation is how long a change of the zone takes to reach every
	// server answering for it (secondaries, fleet instances, clock skew).
	Propagation time.Duration
	// MaxZoneTTL is the longest TTL of any set the zone serves: how long
	// a resolver may keep a signature made by a retired ZSK.
	MaxZoneTTL time.Duration
	// ParentDelay is how long after the CDS set names a new KSK the
	// parent has replaced the DS and the old DS has left caches (the
	// parent's scan interval plus its DS TTL).
	ParentDelay time.Duration
}

// dnskeyWait is how long after a DNSKEY is published every validator
// can see it: the DNSKEY set's TTL plus propagation.
func (p Policy) dnskeyWait() time.Duration { return DNSKEYTTL*time.Second + p.Propagation }

// InDNSKEY reports whether k's DNSKEY is in the zone's DNSKEY set at t.
func (k *KeyTiming) InDNSKEY(t time.Time) bool {
	return !t.Before(k.Published) && (k.Removed.IsZero() || t.Before(k.Removed))
}

// Signs reports whether k signs at t: a ZSK between Active and Retired
// signs the zone's sets; a KSK signs the DNSKEY, CDS and CDNSKEY sets
// whenever it is published (both KSKs during a rollover).
func (k *KeyTiming) Signs(t time.Time) bool {
	if k.Role == RoleKSK {
		return k.InDNSKEY(t)
	}
	return !t.Before(k.Active) && (k.Retired.IsZero() || t.Before(k.Retired))
}

// InDS reports whether KSK k is in the CDS and CDNSKEY sets at t.
func (k *KeyTiming) InDS(t time.Time) bool {
	return k.Role == RoleKSK && !t.Before(k.Active) && (k.Retired.IsZero() || t.Before(k.Retired))
}

// Phase names k's state at t: "published" (in the DNSKEY set, not yet
// active), "active", "retired" (still published) or "removed".
func (k *KeyTiming) Phase(t time.Time) string {
	switch {
	case !k.Removed.IsZero() && !t.Before(k.Removed):
		return "removed"
	case !k.Retired.IsZero() && !t.Before(k.Retired):
		return "retired"
	case !t.Before(k.Active):
		return "active"
	case !t.Before(k.Published):
		return "published"
	}
	return "created"
}

// NewKey is what Step asks for when it makes a key: a key of role, and
// the name of the file it is kept in.
type NewKey func(role string) (k *Key, file string, err error)

// Step advances st to now under policy p: it drops keys removed by now,
// makes the first KSK and ZSK of a zone without keys (active at once),
// and starts a rollover when a key's lifetime is about to end, making
// its successor with newKey. It is pure but for newKey: the same state,
// time and policy give the same result. made lists the keys it made.
func Step(st KeyState, now time.Time, p Policy, newKey NewKey) (next KeyState, made []*Key, err error) {
	next = KeyState{Zone: st.Zone}
	for _, k := range st.Keys {
		if k.Removed.IsZero() || now.Before(k.Removed) {
			next.Keys = append(next.Keys, k)
		}
	}
	for _, role := range []string{RoleKSK, RoleZSK} {
		k, err := next.roll(role, now, p, newKey)
		if err != nil {
			return st, nil, err
		}
		if k != nil {
			made = append(made, k)
		}
	}
	return next, made, nil
}

// roll makes role's first key, or the successor of its newest key when
// that key's rollover is due.
func (st *KeyState) roll(role string, now time.Time, p Policy, newKey NewKey) (*Key, error) {
	cur := st.newest(role)
	if cur != nil && !st.rollDue(cur, now, p) {
		return nil, nil
	}
	k, file, err := newKey(role)
	if err != nil {
		return nil, fmt.Errorf("new %s: %w", role, err)
	}
	nk := KeyTiming{Tag: k.DNSKEYFlags(st.Zone, roleFlags(role)).KeyTag(), Role: role, File: file, Created: now, Published: now, Active: now}
	if cur != nil {
		// Pre-publication (RFC 6781 §4.1.1.1) for a ZSK, double-KSK
		// with CDS (RFC 7344) for a KSK: the successor is published now
		// and takes over once every validator can see its DNSKEY.
		nk.Active = now.Add(p.dnskeyWait())
		cur.Retired = nk.Active
		if role == RoleZSK {
			cur.Removed = nk.Active.Add(p.MaxZoneTTL + p.Propagation)
		} else {
			cur.Removed = nk.Active.Add(p.ParentDelay)
		}
	}
	st.Keys = append(st.Keys, nk)
	return k, nil
}

// rollDue reports whether cur, the newest key of its role, is due for a
// successor at now: its lifetime ends within the time a new DNSKEY takes
// to reach validators (so the successor is active as it ends).
func (st *KeyState) rollDue(cur *KeyTiming, now time.Time, p Policy) bool {
	life := p.ZSKLifetime
	if cur.Role == RoleKSK {
		life = p.KSKLifetime
	}
	if life <= 0 || !cur.Retired.IsZero() {
		return false
	}
	return !now.Before(cur.Active.Add(life - p.dnskeyWait()))
}

// newest returns the key of role made last, nil when there is none.
func (st *KeyState) newest(role string) *KeyTiming {
	var best *KeyTiming
	for i := range st.Keys {
		k := &st.Keys[i]
		if k.Role == role && (best == nil || !k.Created.Before(best.Created)) {
			best = k
		}
	}
	return best
}

// NextEvent returns the first time after now at which st changes what is
// served or Step has work: a key's publication, activation, retirement
// or removal, or a rollover falling due. Zero when nothing is scheduled.
func (st KeyState) NextEvent(now time.Time, p Policy) time.Time {
	var ts []time.Time
	for i := range st.Keys {
		k := &st.Keys[i]
		ts = append(ts, k.Published, k.Active, k.Retired, k.Removed)
		life := p.ZSKLifetime
		if k.Role == RoleKSK {
			life = p.KSKLifetime
		}
		if life > 0 && k.Retired.IsZero() {
			ts = append(ts, k.Active.Add(life-p.dnskeyWait()))
		}
	}
	ts = slices.DeleteFunc(ts, func(t time.Time) bool { return t.IsZero() || !t.After(now) })
	if len(ts) == 0 {
		return time.Time{}
	}
	return slices.MinFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
}

// ZoneStatus is a zone's managed keys at a time, for get-health.
type ZoneStatus struct {
	Zone string `json:"zone"`
	// Keys are the zone's keys, each with its phase (KeyTiming.Phase).
	Keys []KeyStatus `json:"keys"`
	// NextEvent is when the keys next change (zero: nothing scheduled).
	NextEvent time.Time `json:"nextEvent,omitzero"`
}

// KeyStatus is one key of a ZoneStatus.
type KeyStatus struct {
	KeyTiming
	Phase string `json:"phase"`
	// InDS says the CDS and CDNSKEY sets name the key (KSKs).
	InDS bool `json:"inDs,omitempty"`
}

// Status returns st's keys at now under policy p.
func (st KeyState) Status(now time.Time, p Policy) ZoneStatus {
	zs := ZoneStatus{Zone: st.Zone, NextEvent: st.NextEvent(now, p)}
	for i := range st.Keys {
		k := &st.Keys[i]
		zs.Keys = append(zs.Keys, KeyStatus{KeyTiming: *k, Phase: k.Phase(now), InDS: k.InDS(now)})
	}
	return zs
}
