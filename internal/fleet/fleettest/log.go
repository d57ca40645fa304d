package fleettest

import (
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// testLog writes etcd's log lines to a test's log until it is muted:
// while an etcd closes (it logs each listener it closes as an error) and
// once the test is over (a test's log panics after the test ends).
type testLog struct {
	mu    sync.Mutex
	t     testing.TB
	muted bool
}

// Write logs p, one etcd log line, unless muted.
func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.muted {
		l.t.Log("etcd: " + strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// Sync does nothing: the test's log is not buffered.
func (l *testLog) Sync() error { return nil }

func (l *testLog) mute(m bool) {
	l.mu.Lock()
	l.muted = m
	l.mu.Unlock()
}

func newTestLog(t testing.TB) *testLog {
	l := &testLog{t: t}
	t.Cleanup(func() { l.mute(true) })
	return l
}

// logger returns a zap logger of etcd's errors (and worse) to l, without
// stack traces: an error that matters shows in the test's log (go test
// -v, or when the test fails) and nothing goes to stderr.
func (l *testLog) logger() *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	enc.TimeKey = ""
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), l, zapcore.ErrorLevel))
}

// Logger returns a logger for an etcd member or client in test t (e.g.
// embedded.Options.Logger): errors and worse go to t's log, until t ends.
func Logger(t testing.TB) *zap.Logger {
	return newTestLog(t).logger()
}
