package serve

import (
	"context"
	"crypto/sha256"
	"os"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve/tlsreload"
)

// watch polls the config file and reloads it when its content differs
// from the config in force, and reloads the TLS files of HTTPS frontends
// when they change. Polling (not inotify) is deliberate: it survives
// editors and tools that replace files, and the files are small.
func (s *Server) watch(ctx context.Context) {
	every := s.opts.WatchInterval
	if every == 0 {
		every = time.Second
	}
	var last watchState
	var zoneFiles []string
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.opts.ConfigPath != "" {
			s.checkConfigFile(ctx, &last, &zoneFiles)
		}
		s.checkTLSFiles()
	}
}

// watchState is what the watcher last looked at: the file's bytes, the
// zone files (dnsZones[].zoneFile) the file last named, and the config in
// force then. The file is parsed again only when one of them changed.
type watchState struct {
	file, zones, inForce [32]byte
}

// checkConfigFile reloads the config file when its content, or that of a
// zone file it loads (*zoneFiles, as of the last parse), is not the
// config in force. A file that is rejected is not retried until it, a
// zone file, or the config in force, changes.
func (s *Server) checkConfigFile(ctx context.Context, last *watchState, zoneFiles *[]string) {
	b, err := os.ReadFile(s.opts.ConfigPath)
	if err != nil {
		return // being replaced, or gone: keep serving, look again later
	}
	cur := watchState{file: sha256.Sum256(b), zones: tlsreload.SumFiles(*zoneFiles), inForce: *s.inForce.Load()}
	if cur == *last {
		return
	}
	*last = cur
	cfg, err := config.Parse(b, s.opts.ConfigPath)
	if err == nil {
		*zoneFiles = (*zoneFiles)[:0]
		for i := range cfg.DNSZones {
			files, _ := cfg.DNSZones[i].ZoneFiles()
			*zoneFiles = append(*zoneFiles, files...)
		}
		cur.zones = tlsreload.SumFiles(*zoneFiles)
		*last = cur
		var sum [32]byte
		if sum, err = configSum(cfg); err == nil && sum == cur.inForce {
			return
		}
	}
	if err == nil {
		err = s.Reload(ctx, cfg)
	} else {
		s.metrics.reloadFailures.Add(1)
	}
	if err != nil {
		s.log.Error("config changed but was rejected; the old config keeps serving", "file", s.opts.ConfigPath, "err", err)
	}
}
