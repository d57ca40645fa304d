package cdn

import (
	"bufio"
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// diskMagic starts every file of the disk tier (format version 1).
const diskMagic = "SPWCDN1\n"

// diskQueue bounds the objects waiting for the disk writer; past it
// objects are not written (the memory tier still has them).
const diskQueue = 256

// Disk is the optional second tier: one file per object in a directory,
// bounded in bytes (oldest written first out), indexed in memory and
// found again by scanning the directory at start, so that it survives
// restarts. Objects are written by one goroutine, in the background.
type Disk struct {
	dir      string
	capacity int64
	now      func() time.Time
	log      *slog.Logger

	// found is how many objects the directory held when it was opened.
	found int

	mu    sync.Mutex
	index map[string]*list.Element // key → *diskEntry
	// pending are the objects queued (or being written), by key: an
	// invalidation or removal takes them out, and the writer then does
	// not write (or keep) them.
	pending map[string]*Object
	order   *list.List // oldest at the front
	bytes   int64

	queue chan diskOp
	done  chan struct{}
	once  sync.Once
}

type diskEntry struct {
	key, file  string
	host, path string
	size       int64
}

// diskOp is an object to write, or (done set) a flush.
type diskOp struct {
	obj  *Object
	done chan struct{}
}

// diskMeta is what a file holds before the body.
type diskMeta struct {
	Key, Host, Path string
	Status          int
	Header          http.Header
	Date            time.Time
	TTL, SWR, SIE   time.Duration
	ClientCC        string
	Vary            []string
	Marker          bool
	Variants        []string `json:",omitempty"`
}

// OpenDisk opens (creating it if needed) the disk tier in dir and
// indexes the objects already there; unreadable files are removed.
func OpenDisk(dir string, capacity int64, now func() time.Time, log *slog.Logger) (*Disk, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cdn disk tier: %w", err)
	}
	d := &Disk{dir: dir, capacity: capacity, now: now, log: log, index: map[string]*list.Element{}, pending: map[string]*Object{},
		order: list.New(), queue: make(chan diskOp, diskQueue), done: make(chan struct{})}
	if err := d.scan(); err != nil {
		return nil, err
	}
	go d.writer()
	return d, nil
}

// scan indexes the directory's files, oldest first.
func (d *Disk) scan() error {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("cdn disk tier: %w", err)
	}
	type found struct {
		e   diskEntry
		mod time.Time
	}
	var all []found
	for _, de := range ents {
		name := de.Name()
		if !de.Type().IsRegular() || strings.HasPrefix(name, ".tmp") || len(name) != 64 {
			continue
		}
		p := filepath.Join(d.dir, name)
		m, info, err := readMeta(p)
		if err != nil {
			_ = os.Remove(p)
			continue
		}
		all = append(all, found{diskEntry{key: m.Key, file: name, host: m.Host, path: m.Path, size: info.Size()}, info.ModTime()})
	}
	slices.SortFunc(all, func(a, b found) int { return a.mod.Compare(b.mod) })
	for _, f := range all {
		e := f.e
		d.index[e.key] = d.order.PushBack(&e)
		d.bytes += e.size
	}
	d.trim()
	d.found = len(d.index)
	return nil
}

func fileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// readMeta reads a file's header.
func readMeta(p string) (*diskMeta, os.FileInfo, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	m, _, err := decodeMeta(bufio.NewReader(f))
	return m, info, err
}

func decodeMeta(r io.Reader) (*diskMeta, int, error) {
	var head [len(diskMagic) + 4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, 0, err
	}
	if string(head[:len(diskMagic)]) != diskMagic {
		return nil, 0, errors.New("not a cache file")
	}
	n := binary.BigEndian.Uint32(head[len(diskMagic):])
	if n > 1<<20 {
		return nil, 0, errors.New("cache file header too large")
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, 0, err
	}
	var m diskMeta
	if err := json.Unmarshal(buf, &m); err != nil {
		return nil, 0, err
	}
	return &m, len(head) + int(n), nil
}

// Get reads the object stored under key, nil when none (or unreadable).
func (d *Disk) Get(key string) *Object {
	d.mu.Lock()
	el := d.index[key]
	d.mu.Unlock()
	if el == nil {
		return nil
	}
	e := el.Value.(*diskEntry)
	data, err := os.ReadFile(filepath.Join(d.dir, e.file))
	if err != nil {
		d.remove(key)
		return nil
	}
	m, off, err := decodeMeta(bytes.NewReader(data))
	if err != nil || m.Key != key {
		d.remove(key)
		return nil
	}
	return (&Object{Key: m.Key, Host: m.Host, Path: m.Path, Status: m.Status, Header: m.Header, Body: data[off:],
		Date: m.Date, TTL: m.TTL, SWR: m.SWR, SIE: m.SIE, ClientCC: m.ClientCC, Vary: m.Vary, Marker: m.Marker, Variants: m.Variants}).prepare()
}

// Put queues o to be written; it is dropped when the queue is full.
func (d *Disk) Put(o *Object) {
	d.mu.Lock()
	d.pending[o.Key] = o
	d.mu.Unlock()
	select {
	case d.queue <- diskOp{obj: o}:
	default:
		d.mu.Lock()
		if d.pending[o.Key] == o {
			delete(d.pending, o.Key)
		}
		d.mu.Unlock()
	}
}

// writer writes queued objects until Close.
func (d *Disk) writer() {
	defer close(d.done)
	for op := range d.queue {
		if op.done != nil {
			close(op.done)
			continue
		}
		d.mu.Lock()
		wanted := d.pending[op.obj.Key] == op.obj
		d.mu.Unlock()
		if !wanted {
			continue // invalidated, removed or replaced while queued
		}
		if err := d.write(op.obj); err != nil {
			d.log.Warn("cdn disk tier: write failed", "err", err)
		}
		d.mu.Lock()
		if d.pending[op.obj.Key] == op.obj { // not written (too large, or an error)
			delete(d.pending, op.obj.Key)
		}
		d.mu.Unlock()
	}
}

func (d *Disk) write(o *Object) error {
	meta, err := json.Marshal(diskMeta{Key: o.Key, Host: o.Host, Path: o.Path, Status: o.Status, Header: o.Header,
		Date: o.Date, TTL: o.TTL, SWR: o.SWR, SIE: o.SIE, ClientCC: o.ClientCC, Vary: o.Vary, Marker: o.Marker, Variants: o.Variants})
	if err != nil {
		return err
	}
	size := int64(len(diskMagic) + 4 + len(meta) + len(o.Body))
	if size > d.capacity/10 {
		return nil
	}
	tmp, err := os.CreateTemp(d.dir, ".tmp")
	if err != nil {
		return err
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(meta)))
	w := bufio.NewWriter(tmp)
	_, _ = w.WriteString(diskMagic)
	_, _ = w.Write(n[:])
	_, _ = w.Write(meta)
	_, _ = w.Write(o.Body)
	err = errors.Join(w.Flush(), tmp.Close())
	name := fileName(o.Key)
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(d.dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending[o.Key] != o {
		// Invalidated, removed or replaced while being written: the file
		// (which replaced any older one of the key, itself removed then)
		// goes.
		_ = os.Remove(filepath.Join(d.dir, name))
		return nil
	}
	delete(d.pending, o.Key)
	if el := d.index[o.Key]; el != nil {
		d.bytes -= el.Value.(*diskEntry).size
		d.order.Remove(el)
	}
	d.index[o.Key] = d.order.PushBack(&diskEntry{key: o.Key, file: name, host: o.Host, path: o.Path, size: size})
	d.bytes += size
	d.trim()
	return nil
}

// trim removes the oldest files until the tier is within its bound
// (d.mu held).
func (d *Disk) trim() {
	for d.bytes > d.capacity {
		el := d.order.Front()
		e := el.Value.(*diskEntry)
		d.order.Remove(el)
		delete(d.index, e.key)
		d.bytes -= e.size
		_ = os.Remove(filepath.Join(d.dir, e.file))
	}
}

func (d *Disk) remove(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pending, key)
	if el := d.index[key]; el != nil {
		e := el.Value.(*diskEntry)
		d.order.Remove(el)
		delete(d.index, key)
		d.bytes -= e.size
		_ = os.Remove(filepath.Join(d.dir, e.file))
	}
}

// DeleteMatching removes the files of the objects match selects, and
// keeps those waiting to be written from being written.
func (d *Disk) DeleteMatching(match func(*Object) bool) int {
	d.mu.Lock()
	for k, o := range d.pending {
		if match(o) {
			delete(d.pending, k)
		}
	}
	var keys []string
	for k, el := range d.index {
		e := el.Value.(*diskEntry)
		if match(&Object{Host: e.host, Path: e.path}) {
			keys = append(keys, k)
		}
	}
	d.mu.Unlock()
	for _, k := range keys {
		d.remove(k)
	}
	return len(keys)
}

// Stats returns the tier's object count and bytes.
func (d *Disk) Stats() (objects int, bytes, capacity int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.index), d.bytes, d.capacity
}

// Flush waits until what is queued now has been written.
func (d *Disk) Flush() {
	done := make(chan struct{})
	d.queue <- diskOp{done: done}
	<-done
}

// Close writes what is queued and stops the writer.
func (d *Disk) Close() error {
	d.once.Do(func() { close(d.queue) })
	<-d.done
	return nil
}
