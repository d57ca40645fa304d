package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/config"
)

// HistoryLimit is how many revisions config/history keeps.
const HistoryLimit = 50

// maxPushAttempts bounds the compare-and-swap retries of one push when
// other pushes keep winning; the pause between them grows (pushPause), so
// a push gives up only after several seconds of losing.
const maxPushAttempts = 30

// Record is one config revision: the config file's bytes and who pushed
// it when. It is stored as JSON under config/current and
// config/history/<revision>.
type Record struct {
	Revision int64     `json:"revision"`
	Author   string    `json:"author"`
	Message  string    `json:"message,omitempty"`
	Time     time.Time `json:"time"`
	// Source is the pushed file's name; its extension tells YAML from
	// JSON, and errors name it.
	Source string `json:"source"`
	// SHA256 is the hex SHA-256 of Config.
	SHA256 string `json:"sha256"`
	// RollbackOf is the revision a rollback copied (0 otherwise).
	RollbackOf int64  `json:"rollbackOf,omitempty"`
	Config     string `json:"config"`

	// modRevision is etcd's modification revision of the key the record
	// was read from (not stored).
	modRevision int64
}

// Parse decodes and validates the record's config.
func (r *Record) Parse() (*config.Config, error) {
	name := r.Source
	if name == "" {
		name = "fleet.yaml"
	}
	cfg, err := config.Parse([]byte(r.Config), name)
	if err != nil {
		return nil, fmt.Errorf("fleet revision %d: %w", r.Revision, err)
	}
	return cfg, nil
}

// PushMeta describes a push: who, why, and the file's name.
type PushMeta struct {
	Author, Message, Source string
	// RollbackOf is set by Rollback.
	RollbackOf int64
}

// InstanceReport is what an instance reports under
// instances/<name>/config: the revision in force and the last one it
// rejected. It lives as long as the instance's lease.
type InstanceReport struct {
	Instance string `json:"instance"`
	Region   string `json:"region,omitempty"`
	// Revision is the fleet revision in force (0: the --config file).
	Revision int64 `json:"revision"`
	// Status is "applied" when Revision is the newest this instance has
	// seen, "rejected" when it kept Revision because RejectedRevision
	// failed on it.
	Status           string    `json:"status"`
	RejectedRevision int64     `json:"rejectedRevision,omitempty"`
	Error            string    `json:"error,omitempty"`
	Time             time.Time `json:"time"`
}

// Store is the fleet's config in etcd under a key prefix.
type Store struct {
	cl     *clientv3.Client
	prefix string
	now    func() time.Time
	// firstRead is the etcd revision of the process's first successful
	// read of config/current (Start's, before the server and its cache
	// exist): what happened in etcd up to it predates them.
	firstRead atomic.Int64
}

// NewStore returns the store of the fleet under prefix ("" = DefaultPrefix).
func NewStore(cl *clientv3.Client, prefix string) *Store {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &Store{cl: cl, prefix: prefix, now: time.Now}
}

// CurrentKey is the key of the config in force.
func (s *Store) CurrentKey() string { return s.prefix + "config/current" }

// historyKey is the key of revision rev; zero-padded so keys sort by
// revision.
func (s *Store) historyKey(rev int64) string {
	return fmt.Sprintf("%sconfig/history/%020d", s.prefix, rev)
}

func (s *Store) instancesPrefix() string { return s.prefix + "instances/" }

func (s *Store) instanceKey(name string) string { return s.instancesPrefix() + name }

func (s *Store) instanceConfigKey(name string) string { return s.instanceKey(name) + "/config" }

// ErrNoConfig is returned when the fleet holds no config yet.
var ErrNoConfig = errors.New("the fleet holds no config yet (fix: spillway config push FILE)")

// Current returns the config in force and the etcd revision it was read
// at (to watch from); ErrNoConfig when nothing was pushed yet.
func (s *Store) Current(ctx context.Context) (*Record, int64, error) {
	resp, err := s.cl.Get(ctx, s.CurrentKey())
	if err != nil {
		return nil, 0, fmt.Errorf("fleet: read %s: %w", s.CurrentKey(), err)
	}
	s.firstRead.CompareAndSwap(0, resp.Header.Revision)
	if len(resp.Kvs) == 0 {
		return nil, resp.Header.Revision, ErrNoConfig
	}
	r, err := decodeRecord(s.CurrentKey(), resp.Kvs[0].Value)
	if err != nil {
		return nil, resp.Header.Revision, err
	}
	r.modRevision = resp.Kvs[0].ModRevision
	return r, resp.Header.Revision, nil
}

// currentModRevision returns etcd's modification revision of
// config/current (0 when absent) without reading the config: a cheap,
// linearizable check that etcd answers and whether the key changed.
func (s *Store) currentModRevision(ctx context.Context) (int64, error) {
	resp, err := s.cl.Get(ctx, s.CurrentKey(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("fleet: read %s: %w", s.CurrentKey(), err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return resp.Kvs[0].ModRevision, nil
}

func decodeRecord(key string, b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("fleet: %s is not a config record: %w (fix: push a config again with spillway config push FILE)", key, err)
	}
	return &r, nil
}

// Get returns revision rev from the history.
func (s *Store) Get(ctx context.Context, rev int64) (*Record, error) {
	resp, err := s.cl.Get(ctx, s.historyKey(rev))
	if err != nil {
		return nil, fmt.Errorf("fleet: read revision %d: %w", rev, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("fleet: revision %d is not in the history, which keeps the last %d (fix: spillway config history lists them)", rev, HistoryLimit)
	}
	return decodeRecord(s.historyKey(rev), resp.Kvs[0].Value)
}

// History returns the revisions kept, newest first.
func (s *Store) History(ctx context.Context) ([]*Record, error) {
	from := s.prefix + "config/history/"
	resp, err := s.cl.Get(ctx, from, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(HistoryLimit+10))
	if err != nil {
		return nil, fmt.Errorf("fleet: read the history: %w", err)
	}
	var out []*Record
	for _, kv := range resp.Kvs {
		r, err := decodeRecord(string(kv.Key), kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Push validates data as a config and stores it as the next revision. The
// write is a transaction that succeeds only if config/current has not
// changed since it was read, so concurrent pushes each get their own
// revision and none is lost; the history keeps the last HistoryLimit.
func (s *Store) Push(ctx context.Context, data []byte, meta PushMeta) (*Record, error) {
	if _, err := config.Parse(data, meta.Source); err != nil {
		return nil, err
	}
	return s.PushUnchecked(ctx, data, meta)
}

// PushUnchecked stores data without validating it (tests, and the
// rollback of a revision that was valid when pushed).
func (s *Store) PushUnchecked(ctx context.Context, data []byte, meta PushMeta) (*Record, error) {
	if meta.Author == "" {
		return nil, errors.New("fleet: push without an author (fix: give --author NAME or set $USER)")
	}
	sum := sha256.Sum256(data)
	for attempt := range maxPushAttempts {
		resp, err := s.cl.Get(ctx, s.CurrentKey())
		if err != nil {
			return nil, fmt.Errorf("fleet: read %s: %w", s.CurrentKey(), err)
		}
		var prev int64
		var modRev int64
		if len(resp.Kvs) > 0 {
			cur, err := decodeRecord(s.CurrentKey(), resp.Kvs[0].Value)
			if err != nil {
				return nil, err
			}
			prev, modRev = cur.Revision, resp.Kvs[0].ModRevision
		}
		r := &Record{
			Revision: prev + 1, Author: meta.Author, Message: meta.Message, Time: s.now().UTC(),
			Source: path.Base(meta.Source), SHA256: hex.EncodeToString(sum[:]), RollbackOf: meta.RollbackOf, Config: string(data),
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("fleet: encode revision %d: %w", r.Revision, err)
		}
		ops := []clientv3.Op{clientv3.OpPut(s.CurrentKey(), string(b)), clientv3.OpPut(s.historyKey(r.Revision), string(b))}
		if old := r.Revision - HistoryLimit; old >= 1 {
			// Everything up to and including old leaves the history.
			ops = append(ops, clientv3.OpDelete(s.historyKey(0), clientv3.WithRange(s.historyKey(old+1))))
		}
		txn, err := s.cl.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(s.CurrentKey()), "=", modRev)).
			Then(ops...).
			Commit()
		if err != nil {
			return nil, fmt.Errorf("fleet: write revision %d: %w", r.Revision, err)
		}
		if txn.Succeeded {
			return r, nil
		}
		// Another push won; read again and take the next revision, after
		// a random pause that doubles with each loss (from 20 ms, at most
		// 500 ms) so racing pushes spread out.
		t := time.NewTimer(pushPause(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("fleet: push of revision %d: %w", r.Revision, ctx.Err())
		case <-t.C:
		}
	}
	return nil, fmt.Errorf("fleet: %d concurrent pushes won over this one in a row; try again", maxPushAttempts)
}

// pushPause is the random pause after the attempt-th lost
// compare-and-swap: up to 20 ms × 2^attempt, at most 500 ms.
func pushPause(attempt int) time.Duration {
	ceiling := min(20*time.Millisecond<<min(attempt, 5), 500*time.Millisecond)
	return time.Duration(rand.Int64N(int64(ceiling)))
}

// Rollback pushes revision rev's config again as a new revision.
func (s *Store) Rollback(ctx context.Context, rev int64, meta PushMeta) (*Record, error) {
	old, err := s.Get(ctx, rev)
	if err != nil {
		return nil, err
	}
	meta.RollbackOf = rev
	if meta.Source == "" {
		meta.Source = old.Source
	}
	if meta.Message == "" {
		meta.Message = "rollback to revision " + strconv.FormatInt(rev, 10)
	}
	return s.PushUnchecked(ctx, []byte(old.Config), meta)
}

// Instances returns the reports of the instances alive now (their lease
// holds), sorted by name.
func (s *Store) Instances(ctx context.Context) ([]InstanceReport, error) {
	resp, err := s.cl.Get(ctx, s.instancesPrefix(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("fleet: read the instances: %w", err)
	}
	var out []InstanceReport
	for _, kv := range resp.Kvs {
		if !strings.HasSuffix(string(kv.Key), "/config") {
			continue
		}
		var r InstanceReport
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("fleet: %s is not an instance report: %w", kv.Key, err)
		}
		out = append(out, r)
	}
	return out, nil
}
