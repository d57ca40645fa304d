package serve

// checkTLSFiles reloads the TLS of frontends, and of regional layers
// (proxy.Layers.ReloadTLS), whose certificate, key or CA files changed. A set of files that fails to load keeps the old
// certificates serving and is logged once.
func (s *Server) checkTLSFiles() {
	s.front.each(func(name string, f *frontend) {
		if f.tls == nil {
			return
		}
		tried, err := f.tls.Reload()
		switch {
		case !tried:
			return
		case err != nil:
			s.metrics.certReloadFailures.Add(1)
			s.log.Error("TLS files changed but do not load; the old certificates keep serving", "frontend", name, "err", err)
			return
		}
		s.metrics.certReloads.Add(1)
		s.log.Info("TLS files reloaded", "frontend", name)
	})
	for _, r := range s.layers.ReloadTLS() {
		if r.Err != nil {
			s.metrics.certReloadFailures.Add(1)
			s.log.Error("regional layer TLS files changed but do not load; the old ones stay in use", "region", r.Region, "err", r.Err)
			continue
		}
		s.metrics.certReloads.Add(1)
		s.log.Info("regional layer TLS files reloaded; open connections to it are retired", "region", r.Region)
	}
}
