package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
)

// Start picks the config an instance starts with: the fleet's current
// revision when etcd answers within timeout; otherwise the fallback file
// (the --config FILE; "" for none), saying so in the log. With neither,
// the error says what to fix. The status tells the Agent where the
// instance stands (the revision in force, stale when etcd did not answer).
func Start(ctx context.Context, store *Store, fallback string, timeout time.Duration, log *slog.Logger) (*config.Config, control.FleetStatus, error) {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	rec, _, err := store.Current(tctx)
	cancel()
	var st control.FleetStatus
	switch {
	case err == nil:
		cfg, perr := rec.Parse()
		if perr == nil {
			st.Revision = rec.Revision
			log.Info("fleet: starting with the fleet's config", "revision", rec.Revision, "author", rec.Author)
			return cfg, st, nil
		}
		st.RejectedRevision, st.RejectedError = rec.Revision, perr.Error()
		if fallback == "" {
			return nil, st, fmt.Errorf("fleet: the current config does not load on this instance and there is no --config FILE to fall back on: %w (fix: push a config that loads, or give --config FILE)", perr)
		}
		log.Error("fleet: the current config does not load on this instance; starting from the --config file", "revision", rec.Revision, "file", fallback, "err", perr)
	case errors.Is(err, ErrNoConfig):
		if fallback == "" {
			return nil, st, fmt.Errorf("fleet: %w, and there is no --config FILE to start from", err)
		}
		log.Warn("fleet: the fleet holds no config yet; starting from the --config file until one is pushed", "file", fallback)
	default:
		st.Stale, st.StaleWhy = true, err.Error()
		if fallback == "" {
			return nil, st, fmt.Errorf("fleet: cannot reach etcd at %s within %s, and there is no --config FILE to fall back on: %w (fix: check --fleet and that etcd is up, or give --config FILE to start from it)",
				strings.Join(store.cl.Endpoints(), ","), timeout, err)
		}
		log.Warn("fleet: cannot reach etcd at start; serving the --config file, marked stale, until etcd is back", "file", fallback, "err", err)
	}
	cfg, lerr := config.Load(fallback)
	if lerr != nil {
		return nil, st, fmt.Errorf("fleet: fallback --config %s: %w", fallback, lerr)
	}
	return cfg, st, nil
}
