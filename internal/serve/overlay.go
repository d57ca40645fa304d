package serve

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/overlay"
	"github.com/spillwaylb/spillway/internal/serve/dashboard"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// OverlayStore keeps the runtime overlay where every instance of a
// fleet sees it (package fleet: a key in etcd). Update applies f to the
// stored set with compare-and-swap, retrying f on a newer set, and
// returns the set stored. Nil in Options: the overlay is this
// instance's alone.
type OverlayStore interface {
	Update(ctx context.Context, f func(overlay.Set) (overlay.Set, error)) (overlay.Set, error)
}

// overlayState is the overlay in force and the problems applying it.
type overlayState struct {
	mu       sync.Mutex
	set      overlay.Set
	problems []string
	// change serialises read-modify-write changes of a standalone
	// instance's set (a fleet's store does compare-and-swap).
	change sync.Mutex
	// audit writes the audit log's JSON lines (nil: the process log
	// only).
	auditMu sync.Mutex
	audit   io.Writer
}

// get returns the set in force and its problems.
func (o *overlayState) get() (overlay.Set, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.set, o.problems
}

func (o *overlayState) put(set overlay.Set, problems []string) {
	o.mu.Lock()
	o.set, o.problems = set, problems
	o.mu.Unlock()
}

// Overlay returns the runtime overlay in force and its problems (nil
// when empty): what get-health and the dashboard show.
func (s *Server) Overlay() *report.Overlay {
	set, problems := s.ov.get()
	if len(set.Entries) == 0 && len(problems) == 0 {
		return nil
	}
	return &report.Overlay{Entries: set.Entries, Problems: problems}
}

// withOverlay returns a copy of r showing the overlay.
func (s *Server) withOverlay(r *report.Health) *report.Health {
	if r == nil {
		return nil
	}
	out := *r
	out.Overlay = s.Overlay()
	return &out
}

// overlaid applies the overlay set to base. When the result does not
// validate (a drain of a service's only backend the new config has), base
// is returned with a problem saying why: a reload never fails because of
// the overlay.
func (s *Server) overlaid(base *config.Config, set overlay.Set) (*config.Config, []string) {
	if len(set.Entries) == 0 {
		return base, nil
	}
	eff, problems, err := overlay.Apply(base, set, s.now())
	if err == nil {
		err = eff.Validate()
	}
	if err != nil {
		return base, append(problems, fmt.Sprintf("the overlay is not applied: the config with it is invalid: %v (fix: spillway ctl clear the entries it names)", err))
	}
	return eff, problems
}

// SetOverlay makes set the overlay in force (its expired entries
// dropped) and applies it on top of the config, as a reload does: the
// engine then sees it as it would see the same change in the config
// file. When the config with set does not validate, nothing changes and
// the error says why (and get-health lists it as a problem).
func (s *Server) SetOverlay(ctx context.Context, set overlay.Set) error {
	set, _ = set.Expire(s.now())
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	old, oldProblems := s.ov.get()
	if overlay.Equal(old, set) {
		return nil
	}
	base := s.base.Load()
	eff, problems, err := overlay.Apply(base, set, s.now())
	if err == nil {
		err = eff.Validate()
	}
	if err != nil {
		err = fmt.Errorf("overlay: the config with this change is invalid: %w", err)
		s.ov.put(old, append(oldProblems, "rejected: "+err.Error()))
		return err
	}
	sum := *s.inForce.Load()
	s.ov.put(set, problems)
	if err := s.swapIn(ctx, eff, sum); err != nil {
		s.ov.put(old, oldProblems)
		return err
	}
	s.noteOverlay(old, set)
	return nil
}

// noteOverlay puts the entries set and removed from old to set on the
// dashboard's timeline.
func (s *Server) noteOverlay(old, set overlay.Set) {
	was := map[string]overlay.Entry{}
	for _, e := range old.Entries {
		was[e.ID] = e
	}
	now := s.now()
	for _, e := range set.Entries {
		if o, ok := was[e.ID]; ok && o.Value == e.Value && o.Set.Equal(e.Set) {
			delete(was, e.ID)
			continue
		}
		delete(was, e.ID)
		detail := "set by " + cmp.Or(e.Actor, "?")
		if e.Reason != "" {
			detail += ": " + e.Reason
		}
		s.dash.Note(dashboard.Transition{Time: now, What: e.ID, Kind: "overlay", Detail: detail, Service: e.Service})
	}
	for _, e := range was {
		s.dash.Note(dashboard.Transition{Time: now, What: e.ID, Kind: "overlay", Detail: "cleared", Service: e.Service})
	}
}

// OverlayRequest is a POST /overlay body: one change to the overlay.
type OverlayRequest struct {
	// Op is drain, undrain, set (with CapacityScaler or Weight) or clear
	// (the entry ID, or every entry with All).
	Op string `json:"op"`
	overlay.Target
	CapacityScaler *float64 `json:"capacityScaler,omitempty"`
	Weight         *int     `json:"weight,omitempty"`
	// For is how long the entry lasts (a Go duration, "30m"); empty:
	// until cleared.
	For    string `json:"for,omitempty"`
	Reason string `json:"reason,omitempty"`
	Actor  string `json:"actor,omitempty"`
	ID     string `json:"id,omitempty"`
	All    bool   `json:"all,omitempty"`
}

// auditRecord is one line of the audit log.
type auditRecord struct {
	Time    time.Time       `json:"time"`
	Actor   string          `json:"actor"`
	Remote  string          `json:"remote,omitempty"`
	Op      string          `json:"op"`
	Set     *overlay.Entry  `json:"set,omitempty"`
	Removed []overlay.Entry `json:"removed,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// errBadOverlay marks a request that is wrong whatever the config.
var errBadOverlay = errors.New("bad overlay request")

// mutation turns r into a change of a set.
func (r *OverlayRequest) mutation(now time.Time, remote string) (func(overlay.Set) (overlay.Set, []overlay.Entry, error), *overlay.Entry, error) {
	switch r.Op {
	case "undrain":
		t := r.Target
		return removeWhere(func(e *overlay.Entry) bool { return e.Action == overlay.Drain && e.Target == t }, "no drain of "+t.String()), nil, nil
	case "clear":
		if r.ID == "" && !r.All {
			return nil, nil, fmt.Errorf("%w: clear needs an entry id, or all (fix: spillway ctl list shows the ids)", errBadOverlay)
		}
		id, all := r.ID, r.All
		return removeWhere(func(e *overlay.Entry) bool { return all || e.ID == id }, "no entry "+id), nil, nil
	}
	e := &overlay.Entry{Target: r.Target, Actor: r.Actor, Remote: remote, Reason: r.Reason, Set: now}
	switch {
	case r.Op == "drain":
		e.Action = overlay.Drain
	case r.Op == "set" && r.CapacityScaler != nil && r.Weight == nil:
		e.Action, e.Value = overlay.CapacityScaler, *r.CapacityScaler
	case r.Op == "set" && r.Weight != nil && r.CapacityScaler == nil:
		e.Action, e.Value = overlay.Weight, float64(*r.Weight)
	case r.Op == "set":
		return nil, nil, fmt.Errorf("%w: set needs one of capacityScaler or weight", errBadOverlay)
	default:
		return nil, nil, fmt.Errorf("%w: op %q: want drain, undrain, set or clear", errBadOverlay, r.Op)
	}
	if r.For != "" {
		d, err := time.ParseDuration(r.For)
		if err != nil || d <= 0 {
			return nil, nil, fmt.Errorf("%w: for %q: want a positive duration such as 30m or 2h", errBadOverlay, r.For)
		}
		e.Expires = now.Add(d)
	}
	if err := e.Check(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errBadOverlay, err)
	}
	e.ID = e.Key()
	return func(s overlay.Set) (overlay.Set, []overlay.Entry, error) { return s.Put(*e), nil, nil }, e, nil
}

// removeWhere is a mutation that removes the entries match selects; none
// is an error (none says what was looked for).
func removeWhere(match func(*overlay.Entry) bool, none string) func(overlay.Set) (overlay.Set, []overlay.Entry, error) {
	return func(s overlay.Set) (overlay.Set, []overlay.Entry, error) {
		out, gone := s.Remove(match)
		if len(gone) == 0 {
			return s, nil, fmt.Errorf("%w: %s in the overlay (fix: spillway ctl list shows what is set)", errBadOverlay, none)
		}
		return out, gone, nil
	}
}

// ChangeOverlay applies one change: to this instance's overlay, or with
// an OverlayStore to the fleet's (then here at once; the other instances
// apply it from the store). Every change, and every refused one, is
// written to the audit log.
func (s *Server) ChangeOverlay(ctx context.Context, r OverlayRequest, remote string) error {
	now := s.now()
	rec := auditRecord{Time: now, Actor: r.Actor, Remote: remote, Op: r.Op}
	mut, set, err := r.mutation(now, remote)
	if err == nil {
		rec.Set = set
		rec.Removed, err = s.changeOverlay(ctx, mut)
	}
	if err != nil {
		rec.Error = err.Error()
	}
	s.writeAudit(rec)
	return err
}

// changeOverlay runs mut on the overlay (the store's, or this
// instance's) and applies the result; it returns the entries removed.
func (s *Server) changeOverlay(ctx context.Context, mut func(overlay.Set) (overlay.Set, []overlay.Entry, error)) ([]overlay.Entry, error) {
	var removed []overlay.Entry
	step := func(cur overlay.Set) (overlay.Set, error) {
		cur, _ = cur.Expire(s.now())
		next, gone, err := mut(cur)
		if err != nil {
			return cur, err
		}
		removed = gone
		return next, s.checkOverlay(next)
	}
	if st := s.opts.OverlayStore; st != nil {
		next, err := st.Update(ctx, step)
		if err != nil {
			return nil, err
		}
		return removed, s.SetOverlay(ctx, next)
	}
	s.ov.change.Lock()
	defer s.ov.change.Unlock()
	cur, _ := s.ov.get()
	next, err := step(cur)
	if err != nil {
		return nil, err
	}
	return removed, s.SetOverlay(ctx, next)
}

// checkOverlay reports whether the config in force takes set.
func (s *Server) checkOverlay(set overlay.Set) error {
	eff, _, err := overlay.Apply(s.base.Load(), set, s.now())
	if err == nil {
		err = eff.Validate()
	}
	if err != nil {
		return fmt.Errorf("overlay: the config with this change is invalid: %w", err)
	}
	return nil
}

// writeAudit logs rec on the process log and, with Options.AuditLog,
// as a JSON line there.
func (s *Server) writeAudit(rec auditRecord) {
	s.log.Info("overlay change", "op", rec.Op, "actor", rec.Actor, "remote", rec.Remote, "set", rec.Set, "removed", len(rec.Removed), "err", rec.Error)
	if s.ov.audit == nil {
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	s.ov.auditMu.Lock()
	defer s.ov.auditMu.Unlock()
	if _, err := s.ov.audit.Write(append(b, '\n')); err != nil {
		s.log.Error("audit log: write failed", "err", err)
	}
}

// expireOverlay drops expired entries, by the server's clock, every
// OverlayCheckInterval (default 1 s).
func (s *Server) expireOverlay(ctx context.Context) {
	every := s.opts.OverlayCheckInterval
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, _ := s.ov.get()
		kept, gone := cur.Expire(s.now())
		if len(gone) == 0 {
			continue
		}
		err := s.SetOverlay(ctx, kept)
		rec := auditRecord{Time: s.now(), Actor: "spillway (expiry)", Op: "expire", Removed: gone}
		if err != nil {
			rec.Error = err.Error()
		}
		s.writeAudit(rec)
	}
}

// overlayHandler serves /overlay: GET lists the overlay, POST changes it
// (an OverlayRequest; 400 for a request that is wrong in itself, 422 for
// one the config in force cannot take).
func (s *Server) overlayHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /overlay", func(w http.ResponseWriter, _ *http.Request) {
		writeOverlay(w, s.Overlay())
	})
	mux.HandleFunc("POST /overlay", func(w http.ResponseWriter, r *http.Request) {
		var req OverlayRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, "overlay request: "+err.Error(), http.StatusBadRequest)
			return
		}
		err := s.ChangeOverlay(r.Context(), req, r.RemoteAddr)
		switch {
		case errors.Is(err, errBadOverlay):
			http.Error(w, err.Error(), http.StatusBadRequest)
		case err != nil:
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		default:
			writeOverlay(w, s.Overlay())
		}
	})
	return mux
}

func writeOverlay(w http.ResponseWriter, o *report.Overlay) {
	if o == nil {
		o = &report.Overlay{Entries: []overlay.Entry{}}
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(o)
}
