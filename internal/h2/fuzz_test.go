package h2

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// buildOps turns fuzz bytes into a client script: each op is a byte
// choosing the frame and bytes for its arguments, so that most scripts
// are made of well-formed frames with hostile sequences and values.
func buildOps(w *scriptWriter, b []byte) {
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	for ops := 0; len(b) > 0 && ops < 64; ops++ {
		op, id := next(), uint32(next()%16)
		buildOp(w, op, id, next)
	}
}

// buildOp appends one op (see buildOps).
func buildOp(w *scriptWriter, op byte, id uint32, next func() byte) {
	arg := next()
	switch op % 12 {
	case 0:
		w.headers(id, arg&1 != 0)
	case 1:
		w.headers(id, arg&1 != 0, "content-length", string('0'+rune(arg%4)))
	case 2:
		w.fr.WriteData(id, arg&1 != 0, make([]byte, int(arg)*64))
	case 3:
		w.rst(id)
	case 4:
		w.fr.WriteWindowUpdate(id, uint32(arg)<<uint(next()%32))
	case 5:
		w.fr.WriteSettings(http2.Setting{ID: http2.SettingID(arg % 10), Val: uint32(next()) << uint(next()%32)})
	case 6:
		w.fr.WritePriority(id, http2.PriorityParam{StreamDep: uint32(arg % 16)})
	case 7:
		w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: w.block(id)[:int(arg)%8], EndStream: true})
	case 8:
		w.fr.WriteContinuation(id, arg&1 != 0, w.block(id)[int(arg)%8:])
	case 9:
		w.raw(http2.FrameType(arg%12), http2.Flags(next()), id, make([]byte, int(next())%20))
	case 10:
		w.headers(id, true, "te", "trailers", "connection", string('a'+rune(arg%3)))
	default:
		w.fr.WriteGoAway(id, http2.ErrCode(arg%14), nil)
	}
}

// fuzzInputLimit bounds one FuzzServerFrames input: each takes a few
// seconds at most (two 2 s reads and a 5 s wait for the server's end,
// per server).
const fuzzInputLimit = 30 * time.Second

// FuzzServerFrames sends fuzzed frame sequences to this package's
// server and to x/net's: neither may panic (ServeConn's goroutines
// would crash the test binary), and the outcomes must agree by the
// harness's rules (F1–F3: same connection error, same stream errors
// and answers, the handler called for the same streams — never for a
// request x/net refuses).
func FuzzServerFrames(f *testing.F) {
	f.Add([]byte{0, 1, 1})
	f.Add([]byte{1, 3, 0, 2, 3, 1})
	f.Add([]byte{0, 1, 0, 3, 1, 0, 2, 1, 1})
	f.Add([]byte{4, 0, 255, 31, 4, 0, 255, 31})
	f.Add([]byte{7, 1, 3, 8, 1, 1})
	f.Add([]byte{5, 0, 4, 0, 0, 0, 1, 1})
	f.Add([]byte{10, 1, 0})
	f.Add([]byte{0, 5, 1, 0, 3, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 256 {
			return
		}
		// A hung input would stall the fuzzer silently; crash with every
		// goroutine's stack instead, so that the input is saved.
		watchdog := time.AfterFunc(fuzzInputLimit, func() {
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("input still running after %v:\n%s", fuzzInputLimit, buf[:runtime.Stack(buf, true)]))
		})
		defer watchdog.Stop()
		w := newScript()
		buildOps(w, b)
		diffScript(t, w)
	})
}
