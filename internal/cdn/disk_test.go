package cdn

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// An invalidation that runs while an object waits in the disk tier's
// write queue (or is being written) keeps it off the disk: the writer
// must not bring back what was invalidated.
func TestDiskInvalidateQueued(t *testing.T) {
	d, err := OpenDisk(t.TempDir(), 1<<30, time.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	back := 0
	for i := range 200 {
		path := fmt.Sprintf("/p/%d", i)
		o := (&Object{Key: "bs\x00h" + path, Host: "h", Path: path, Status: 200, Header: http.Header{}, Body: []byte("x")}).prepare()
		d.Put(o)
		d.DeleteMatching(func(x *Object) bool { return x.Path == path })
		d.Flush()
		if d.Get(o.Key) != nil {
			back++
		}
	}
	if back > 0 {
		t.Errorf("%d of 200 objects invalidated while queued were written to the disk tier afterwards", back)
	}
	if n, _, _ := d.Stats(); n != 0 {
		t.Errorf("%d objects on disk, want 0", n)
	}
}
