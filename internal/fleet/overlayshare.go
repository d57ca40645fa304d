package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/overlay"
)

// OverlayHost is the server an OverlayShare applies the fleet's runtime
// overlay to (*serve.Server).
type OverlayHost interface {
	SetOverlay(ctx context.Context, set overlay.Set) error
}

// OverlayShare is the fleet's runtime overlay (spillway ctl): one JSON
// value under overlay, written with compare-and-swap by the instance an
// operator asked (Update: the server's OverlayStore) and followed by
// every instance, which applies it on top of its config. An entry
// carries its absolute expiry, so each instance ends it by its own
// clock; the next write drops the expired entries from etcd. The key has
// no lease: the overlay outlives instances and restarts, as the config
// does. While etcd is unreachable an instance keeps the overlay it last
// saw.
type OverlayShare struct {
	store         *Store
	host          OverlayHost
	log           *slog.Logger
	checkInterval time.Duration
	checkTimeout  time.Duration
}

// maxOverlayAttempts bounds the compare-and-swap retries of one Update.
const maxOverlayAttempts = 20

// newOverlayShare returns the overlay share of an instance.
func newOverlayShare(store *Store, log *slog.Logger, checkInterval, checkTimeout time.Duration) *OverlayShare {
	if checkInterval <= 0 {
		checkInterval = 2 * time.Second
	}
	if checkTimeout <= 0 {
		checkTimeout = 3 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &OverlayShare{store: store, log: log, checkInterval: checkInterval, checkTimeout: checkTimeout}
}

func (o *OverlayShare) key() string { return o.store.prefix + "overlay" }

// errUnreadableOverlay marks an overlay value that does not decode: Update
// overwrites it, followers keep the overlay they had.
var errUnreadableOverlay = errors.New("unreadable overlay")

// get reads the overlay and the key's modification revision (0: absent)
// and the etcd revision of the read.
func (o *OverlayShare) get(ctx context.Context) (overlay.Set, int64, int64, error) {
	tctx, cancel := context.WithTimeout(ctx, o.checkTimeout)
	defer cancel()
	resp, err := o.store.cl.Get(tctx, o.key())
	if err != nil {
		return overlay.Set{}, 0, 0, fmt.Errorf("fleet: read %s: %w", o.key(), err)
	}
	if len(resp.Kvs) == 0 {
		return overlay.Set{}, 0, resp.Header.Revision, nil
	}
	var set overlay.Set
	if err := json.Unmarshal(resp.Kvs[0].Value, &set); err != nil {
		return overlay.Set{}, resp.Kvs[0].ModRevision, resp.Header.Revision, fmt.Errorf("fleet: %s: %w: %w (fix: spillway ctl clear --all)", o.key(), errUnreadableOverlay, err)
	}
	return set, resp.Kvs[0].ModRevision, resp.Header.Revision, nil
}

// Update applies f to the fleet's overlay with compare-and-swap, calling
// f again on a newer overlay when another write won, and returns the
// overlay stored. An error of f is returned as it is.
func (o *OverlayShare) Update(ctx context.Context, f func(overlay.Set) (overlay.Set, error)) (overlay.Set, error) {
	for range maxOverlayAttempts {
		cur, mod, _, err := o.get(ctx)
		if err != nil && !errors.Is(err, errUnreadableOverlay) {
			return overlay.Set{}, err
		}
		next, err := f(cur)
		if err != nil {
			return overlay.Set{}, err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return overlay.Set{}, fmt.Errorf("fleet: encode the overlay: %w", err)
		}
		tctx, cancel := context.WithTimeout(ctx, o.checkTimeout)
		resp, err := o.store.cl.Txn(tctx).If(clientv3.Compare(clientv3.ModRevision(o.key()), "=", mod)).
			Then(clientv3.OpPut(o.key(), string(b))).Commit()
		cancel()
		if err != nil {
			return overlay.Set{}, fmt.Errorf("fleet: write %s: %w", o.key(), err)
		}
		if resp.Succeeded {
			return next, nil
		}
		pause(ctx, pushPause(1))
	}
	return overlay.Set{}, fmt.Errorf("fleet: the overlay changed %d times while this change was written (fix: try again)", maxOverlayAttempts)
}

// up applies the fleet's overlay, then follows it until the watch or a
// check fails (or ctx ends).
func (o *OverlayShare) up(ctx context.Context, _ *session) (bool, error) {
	set, mod, rev, err := o.get(ctx)
	switch {
	case errors.Is(err, errUnreadableOverlay):
		o.log.Error("fleet: ignored an unreadable overlay", "err", err)
	case err != nil:
		return false, err
	default:
		o.apply(ctx, set)
	}
	wch := o.store.cl.Watch(clientv3.WithRequireLeader(ctx), o.key(), clientv3.WithRev(rev+1))
	tick := time.NewTicker(o.checkInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case wr, ok := <-wch:
			if !ok {
				return true, errors.New("fleet: the watch of the overlay ended")
			}
			if err := wr.Err(); err != nil {
				return true, fmt.Errorf("fleet: watch of the overlay: %w", err)
			}
			for _, ev := range wr.Events {
				mod = ev.Kv.ModRevision
				var s overlay.Set
				if ev.Type == clientv3.EventTypePut {
					if err := json.Unmarshal(ev.Kv.Value, &s); err != nil {
						o.log.Error("fleet: ignored an unreadable overlay", "err", err)
						continue
					}
				}
				o.apply(ctx, s)
			}
		case <-tick.C:
			s, m, _, err := o.get(ctx)
			if err != nil && !errors.Is(err, errUnreadableOverlay) {
				return true, err
			}
			if m != mod && err == nil {
				mod = m
				o.apply(ctx, s)
			}
		}
	}
}

// apply hands set to the host; a set the host's config cannot take is
// logged (the host lists it as a problem).
func (o *OverlayShare) apply(ctx context.Context, set overlay.Set) {
	if o.host == nil {
		return
	}
	if err := o.host.SetOverlay(ctx, set); err != nil && ctx.Err() == nil {
		o.log.Error("fleet: the fleet's overlay is not applied on this instance", "err", err)
	}
}

// down keeps the overlay last seen.
func (o *OverlayShare) down(context.Context, error) {}

func (o *OverlayShare) idle(ctx context.Context, d time.Duration) { pause(ctx, d) }
