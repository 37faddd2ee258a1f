package store

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/badgerstore"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
)

func TestOpenChoosesBackend(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  config.State
		want func(engine.Store) bool
	}{
		{"empty is badger", config.State{Path: filepath.Join(dir, "a")}, isBadger},
		{"badger", config.State{Backend: "badger", Path: filepath.Join(dir, "b")}, isBadger},
		{"memory", config.State{Backend: "memory"}, isMemory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(tt.cfg, engine.SystemClock{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !tt.want(s) {
				t.Fatalf("Open(%+v) = %T", tt.cfg, s)
			}
			if err := s.Put(context.Background(), "k", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestOpenBadgerDefaultPath(t *testing.T) {
	t.Chdir(t.TempDir())
	s, err := Open(config.State{}, engine.SystemClock{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fi, err := os.Stat(DefaultPath); err != nil || !fi.IsDir() {
		t.Fatalf("default path %s not created: %v", DefaultPath, err)
	}
}

func TestOpenBadgerLockedPropagates(t *testing.T) {
	cfg := config.State{Backend: "badger", Path: t.TempDir()}
	s, err := Open(cfg, engine.SystemClock{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Open(cfg, engine.SystemClock{}, nil); !errors.Is(err, engine.ErrStoreLocked) {
		t.Fatalf("second Open err = %v, want ErrStoreLocked", err)
	}
}

func TestOpenErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	const secret = "hunter2-secret"
	tests := []struct {
		name    string
		cfg     config.State
		wantMsg string
	}{
		{"unknown backend", config.State{Backend: "etcd"}, `unknown state.backend "etcd"`},
		{"redis without url", config.State{Backend: "redis"}, "state.redis_url is required"},
		{"redis unreachable", config.State{Backend: "redis", RedisURL: config.Secret("redis://:" + secret + "@" + closed + "/0")}, "redisstore: ping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(tt.cfg, engine.SystemClock{}, nil)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %q, want it to contain %q", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("err leaks the password: %q", err)
			}
		})
	}
}

func isBadger(s engine.Store) bool { _, ok := s.(*badgerstore.Store); return ok }
func isMemory(s engine.Store) bool { _, ok := s.(*memstore.Store); return ok }
