package cdn

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
)

// diskFile is a cache file as Disk.write lays it out: magic, header
// length, JSON header, body.
func diskFile(meta, body []byte) []byte {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(meta)))
	return append(append(append([]byte(diskMagic), n[:]...), meta...), body...)
}

// FuzzDecodeMeta reads arbitrary bytes as a disk tier file, as a
// restart does with whatever the cache directory holds (a truncated
// write, another program's file): decodeMeta never panics, never
// allocates past its 1 MiB header bound, and the offset it returns is
// inside the file, so the body it implies can be sliced.
func FuzzDecodeMeta(f *testing.F) {
	meta, _ := json.Marshal(diskMeta{Key: "GET|h|/a", Host: "h", Path: "/a", Status: 200, Header: map[string][]string{"Content-Type": {"text/plain"}}})
	f.Add(diskFile(meta, []byte("body")))
	f.Add(diskFile([]byte("{}"), nil))
	f.Add([]byte(diskMagic + "\xff\xff\xff\xff"))
	f.Add([]byte("not a cache file at all"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, off, err := decodeMeta(bytes.NewReader(b))
		if err != nil {
			return
		}
		if off < len(diskMagic)+4 || off > len(b) {
			t.Fatalf("offset %d outside a %d-byte file", off, len(b))
		}
		o := (&Object{Key: m.Key, Status: m.Status, Header: m.Header, Body: b[off:], ClientCC: m.ClientCC, Variants: m.Variants}).prepare()
		if o.size() < int64(len(o.Body)) {
			t.Fatalf("size %d below the body's %d bytes", o.size(), len(o.Body))
		}
	})
}
