package cdn

import (
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Bucket serves a backend bucket: Spillway's mapping of bucketName to a
// local directory, read-only. Files are opened through an os.Root, so
// no path (.., an absolute symlink, a symlink pointing out) reaches
// outside the directory; names with a segment starting with '.' are
// not served; a path ending in '/' serves its index.html. Responses
// carry Content-Type (from the extension, else
// application/octet-stream), Content-Length, Last-Modified and an
// ETag, and answer ranges and conditional requests (http.ServeContent).
type Bucket struct {
	dir string
}

// NewBucket returns the server of directory dir.
func NewBucket(dir string) *Bucket { return &Bucket{dir: dir} }

// ServeHTTP serves r from the directory; path is the request path as
// routed (decoded, normalised).
func (b *Bucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.Serve(w, r, r.URL.Path)
}

// Serve serves the file at the decoded path p.
func (b *Bucket) Serve(w http.ResponseWriter, r *http.Request, p string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		bucketError(w, http.StatusMethodNotAllowed)
		return
	}
	name, ok := bucketPath(p)
	if !ok {
		bucketError(w, http.StatusNotFound)
		return
	}
	root, err := os.OpenRoot(b.dir)
	if err != nil {
		bucketError(w, http.StatusServiceUnavailable)
		return
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		// Missing, unreadable, or a symlink out of the directory: all
		// look the same to the client.
		bucketError(w, http.StatusNotFound)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		bucketError(w, http.StatusNotFound)
		return
	}
	h := w.Header()
	ct := mime.TypeByExtension(filepath.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Etag", `"`+strconv.FormatInt(info.ModTime().UnixNano(), 36)+"-"+strconv.FormatInt(info.Size(), 36)+`"`)
	http.ServeContent(w, r, "", info.ModTime(), f)
}

// bucketPath turns a request path into a name inside the directory:
// cleaned, relative, index.html for a directory path, and refused when
// a segment starts with '.'.
func bucketPath(p string) (string, bool) {
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || strings.Contains(p, "\\") {
		return "", false
	}
	if strings.HasSuffix(p, "/") {
		p += "index.html"
	}
	clean := path.Clean(p)
	for _, seg := range strings.Split(clean, "/") {
		if strings.HasPrefix(seg, ".") {
			return "", false
		}
	}
	name := strings.TrimPrefix(clean, "/")
	if name == "" || !fs.ValidPath(name) {
		return "", false
	}
	return name, true
}

func bucketError(w http.ResponseWriter, code int) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(strconv.Itoa(code) + " " + http.StatusText(code) + "\n"))
}
