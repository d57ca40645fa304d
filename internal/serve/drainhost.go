package serve

import (
	"context"
	"errors"

	"github.com/spillwaylb/spillway/internal/control"
)

// errStopped is returned by calls into a Server whose loop has stopped.
var errStopped = errors.New("serve: the server has stopped")

// inLoop runs f on the Server's loop (which owns the control state) and
// waits for it. It returns ctx's error if ctx ends first and errStopped
// if the loop has stopped; f has then not run, or its result is not
// waited for.
func (s *Server) inLoop(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case s.events <- event{do: func() { f(); close(done) }}:
	case <-s.stopped:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-s.stopped:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DrainSnapshot returns the auto-capacity-drain state of the Server's
// control state (control.State.DrainSnapshot), for a fleet's elected
// control loop to publish.
func (s *Server) DrainSnapshot(ctx context.Context) ([]control.DrainEntry, error) {
	var snap []control.DrainEntry
	err := s.inLoop(ctx, func() { snap = s.state.DrainSnapshot() })
	return snap, err
}

// ApplyDrain sets the Server's drain state to one a fleet's leader
// published (control.State.ApplyDrain), logs the backends drained or
// undrained by it, and publishes the new view.
func (s *Server) ApplyDrain(ctx context.Context, snap []control.DrainEntry) error {
	return s.inLoop(ctx, func() {
		if s.state.ApplyDrain(snap, s.now()) {
			s.logDrainChanges()
			s.publish(s.state.Plan(), nil)
		}
	})
}

// SetDrainFollower makes the Server follow a fleet's published drain
// state (true) or decide drains itself (false, the default and
// standalone): control.State.SetDrainFollower. A reload keeps it. A
// Server that starts deciding evaluates at once.
func (s *Server) SetDrainFollower(ctx context.Context, follower bool) error {
	return s.inLoop(ctx, func() {
		s.state.SetDrainFollower(follower)
		if !follower && s.state.Tick(s.now()) {
			s.logDrainChanges()
			s.publish(s.state.Plan(), nil)
		}
	})
}
