package h2

import (
	"fmt"

	"golang.org/x/net/http2"
)

// goAwayFlowError is a connection flow-control error.
func connError(code http2.ErrCode) error { return http2.ConnectionError(code) }

func streamError(id uint32, code http2.ErrCode) error {
	return http2.StreamError{StreamID: id, Code: code}
}

// processFrame applies one frame (reader only), as x/net's server does.
func (c *conn) processFrame(f http2.Frame) error {
	if !c.sawSettings {
		if _, ok := f.(*http2.SettingsFrame); !ok {
			return connError(http2.ErrCodeProtocol)
		}
		c.sawSettings = true
	}
	if c.ignoredAfterGoAway(f) {
		return nil
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		return c.processSettings(f)
	case *http2.MetaHeadersFrame:
		return c.processHeaders(f)
	case *http2.WindowUpdateFrame:
		return c.processWindowUpdate(f)
	case *http2.PingFrame:
		return c.processPing(f)
	case *http2.DataFrame:
		return c.processData(f)
	case *http2.RSTStreamFrame:
		return c.processReset(f)
	case *http2.PriorityFrame:
		if f.StreamID == f.StreamDep {
			return streamError(f.StreamID, http2.ErrCodeProtocol)
		}
		return nil
	case *http2.GoAwayFrame:
		go c.startGracefulShutdown()
		return nil
	case *http2.PushPromiseFrame:
		return connError(http2.ErrCodeProtocol)
	}
	return nil // unknown and ignored frame types
}

// ignoredAfterGoAway reports a frame for a stream the GOAWAY sent left
// out, returning the connection window a DATA frame used.
func (c *conn) ignoredAfterGoAway(f http2.Frame) bool {
	c.mu.Lock()
	ignore := c.goingAway && f.Header().StreamID > c.goAwayLast
	var credit int32
	if d, ok := f.(*http2.DataFrame); ignore && ok && c.inflow.take(d.Length) {
		credit = c.inflow.add(int(d.Length))
	}
	c.mu.Unlock()
	c.writeWindowUpdates(0, credit, 0, true)
	return ignore
}

// state returns a stream's RFC 9113 §5.1 state as x/net tells it apart:
// the stream if open, else whether it is closed (false: idle).
func (c *conn) state(id uint32) (*stream, bool) {
	c.mu.Lock()
	st := c.streams[id]
	c.mu.Unlock()
	if st != nil {
		return st, true
	}
	return nil, id%2 == 1 && id <= c.maxStreamID
}

func (c *conn) processSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		c.unackedSettings--
		if c.unackedSettings < 0 {
			return connError(http2.ErrCodeProtocol)
		}
		return nil
	}
	if f.NumSettings() > 100 || f.HasDuplicates() {
		return connError(http2.ErrCodeProtocol)
	}
	table := uint32(0)
	haveTable := false
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingHeaderTableSize:
			table, haveTable = s.Val, true
		case http2.SettingInitialWindowSize:
			return c.setInitialWindow(int32(s.Val))
		case http2.SettingNoRFC7540Priorities:
			if s.Val > 1 {
				return connError(http2.ErrCodeProtocol)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.writeControl(true, func() error {
		if haveTable {
			c.henc.SetMaxDynamicTableSizeLimit(min(table, maxEncoderTable))
		}
		return c.fw.WriteSettingsAck()
	})
	return nil
}

// setInitialWindow applies a new SETTINGS_INITIAL_WINDOW_SIZE to every
// stream's send window (RFC 9113 §6.9.2).
func (c *conn) setInitialWindow(v int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delta := int64(v) - int64(c.peerInitWindow)
	c.peerInitWindow = v
	for _, st := range c.streams {
		if !addWindow(&st.sendWindow, delta) {
			return connError(http2.ErrCodeFlowControl)
		}
		signal(st.winCh)
	}
	return nil
}

func (c *conn) processPing(f *http2.PingFrame) error {
	if f.IsAck() {
		return nil
	}
	if f.StreamID != 0 {
		return connError(http2.ErrCodeProtocol)
	}
	c.writeControl(true, func() error { return c.fw.WritePing(true, f.Data) })
	return nil
}

func (c *conn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		if !addWindow(&c.sendWindow, int64(f.Increment)) {
			return connError(http2.ErrCodeFlowControl)
		}
		for _, st := range c.streams {
			signal(st.winCh)
		}
		return nil
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID%2 == 0 || f.StreamID > c.maxStreamID {
			return connError(http2.ErrCodeProtocol) // idle stream
		}
		return nil // closed: allowed
	}
	if !addWindow(&st.sendWindow, int64(f.Increment)) {
		return streamError(f.StreamID, http2.ErrCodeFlowControl)
	}
	signal(st.winCh)
	return nil
}

func (c *conn) processReset(f *http2.RSTStreamFrame) error {
	st, closed := c.state(f.StreamID)
	if st == nil {
		if !closed {
			return connError(http2.ErrCodeProtocol) // idle stream
		}
		return nil
	}
	c.mu.Lock()
	st.abort(http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode})
	c.closeStream(st)
	c.mu.Unlock()
	return nil
}

// processData buffers a DATA frame's payload for its stream's handler.
func (c *conn) processData(f *http2.DataFrame) error {
	id := f.StreamID
	st, closed := c.state(id)
	if id == 0 || st == nil && !closed {
		return connError(http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	if st == nil || st.recvEnd || st.gotTrailer {
		// Not open for data: the connection window still counts it.
		err := c.refund(f, streamError(id, http2.ErrCodeStreamClosed))
		c.mu.Unlock()
		return err
	}
	data := f.Data()
	if st.declLen != -1 && st.recvd+int64(len(data)) > st.declLen {
		if st.bodyErr == nil {
			st.bodyErr = fmt.Errorf("sender tried to send more than declared Content-Length of %d bytes", st.declLen)
		}
		err := c.refund(f, streamError(id, http2.ErrCodeProtocol))
		c.mu.Unlock()
		return err
	}
	var connCredit, stCredit int32
	if f.Length > 0 {
		if f.Length > uint32(c.inflow.avail) || f.Length > uint32(st.inflow.avail) {
			c.mu.Unlock()
			return streamError(id, http2.ErrCodeFlowControl)
		}
		c.inflow.take(f.Length)
		st.inflow.take(f.Length)
		st.recvd += int64(len(data))
		if st.bodyClosed {
			connCredit = c.inflow.add(len(data))
		} else if len(data) > 0 {
			st.buf = append(st.buf, data...)
			signal(st.dataCh)
		}
		pad := int(f.Length) - len(data)
		connCredit += c.inflow.add(pad)
		stCredit = st.inflow.add(pad)
	}
	if f.StreamEnded() {
		st.endStream()
		stCredit = 0
	}
	c.mu.Unlock()
	c.writeWindowUpdates(id, connCredit, stCredit, true)
	return nil
}

// refund takes a discarded DATA frame's length from the connection
// window and returns it at once (c.mu held; the update is written with
// the lock held, which the reader may do for control frames).
func (c *conn) refund(f *http2.DataFrame, err error) error {
	if !c.inflow.take(f.Length) {
		return streamError(f.StreamID, http2.ErrCodeFlowControl)
	}
	credit := c.inflow.add(int(f.Length))
	if credit > 0 {
		c.mu.Unlock()
		c.writeWindowUpdates(0, credit, 0, true)
		c.mu.Lock()
	}
	return err
}
