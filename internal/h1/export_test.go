package h1

import "time"

// SetClock makes t read the time from now (tests: a clock that lags
// models a goroutine that read the time and then was not scheduled).
func SetClock(t *Transport, now func() time.Time) { t.now = now }
