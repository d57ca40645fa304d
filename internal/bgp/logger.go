package bgp

import (
	"fmt"
	"log/slog"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

// logger hands GoBGP's log lines to the process log: its Info and Debug
// at Debug (the speaker logs session changes itself), Warn and Error as
// they are.
type logger struct {
	log   *slog.Logger
	level gobgplog.LogLevel
}

func (l *logger) emit(lvl slog.Level, msg string, fields gobgplog.Fields) {
	args := make([]any, 0, 2*len(fields))
	for k, v := range fields {
		args = append(args, "gobgp_"+k, fmt.Sprint(v))
	}
	l.log.Log(nil, lvl, "gobgp: "+msg, args...)
}

func (l *logger) Panic(msg string, fields gobgplog.Fields) {
	l.emit(slog.LevelError, msg, fields)
	panic("gobgp: " + msg)
}

func (l *logger) Fatal(msg string, fields gobgplog.Fields) {
	l.emit(slog.LevelError, msg, fields)
	panic("gobgp: " + msg)
}

func (l *logger) Error(msg string, fields gobgplog.Fields) { l.emit(slog.LevelError, msg, fields) }
func (l *logger) Warn(msg string, fields gobgplog.Fields)  { l.emit(slog.LevelWarn, msg, fields) }
func (l *logger) Info(msg string, fields gobgplog.Fields)  { l.emit(slog.LevelDebug, msg, fields) }
func (l *logger) Debug(msg string, fields gobgplog.Fields) {
	if l.level >= gobgplog.DebugLevel {
		l.emit(slog.LevelDebug, msg, fields)
	}
}
func (l *logger) SetLevel(level gobgplog.LogLevel) { l.level = level }
func (l *logger) GetLevel() gobgplog.LogLevel      { return l.level }
