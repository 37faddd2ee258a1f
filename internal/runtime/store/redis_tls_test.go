package store

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore/redisproc"
)

// aclRule is the ACL user of docs/deployment.md, for the prefix "bw:".
const aclRule = "on >ACL-pa55word ~bw:* &bw:* +@connection +@pubsub +get +set +del +incr +scan +sadd +smembers " +
	"+eval +evalsha +role +cluster|slots +cluster|shards"

// TestOpenRedisWithTLSAndACL: a redis-server that only takes TLS clients
// with a certificate, reached as the ACL user docs/deployment.md
// describes, through the state.redis_* settings (CA, client certificate
// and key files, user and password): every store operation the gateway
// uses works, and a wrong password or a missing client certificate is
// refused without showing the password.
func TestOpenRedisWithTLSAndACL(t *testing.T) {
	redisproc.Require(t)
	dir := t.TempDir()
	ca, caKey := newCA(t)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	writeLeaf(t, dir, "server", ca, caKey, true)
	writeLeaf(t, dir, "client", ca, caKey, false)
	tlsPort, err := redisproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := redisproc.Start(filepath.Join(dir, "redis"), "--tls-port", fmt.Sprint(tlsPort),
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server-key.pem"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "yes")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	if err := admin.Do(context.Background(), append([]any{"ACL", "SETUSER", "breakwater"}, toAny(strings.Fields(aclRule))...)...).Err(); err != nil {
		t.Fatal(err)
	}

	cfg := config.State{Backend: "redis", RedisURL: config.Secret(fmt.Sprintf("rediss://127.0.0.1:%d/0", tlsPort)),
		RedisUsername: "breakwater", RedisPassword: "ACL-pa55word", RedisKeyPrefix: "bw:",
		RedisTLSCAFile: filepath.Join(dir, "ca.pem"), RedisTLSCertFile: filepath.Join(dir, "client.pem"),
		RedisTLSKeyFile: filepath.Join(dir, "client-key.pem")}
	open := func(cfg config.State) engine.SharedStore {
		t.Helper()
		s, err := Open(cfg, engine.SystemClock{}, nil)
		if err != nil {
			t.Fatalf("Open over TLS as the ACL user: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s.(engine.SharedStore)
	}
	a, b := open(cfg), open(cfg)
	ctx := context.Background()
	changes := make(chan engine.Change, 16)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.Watch(wctx, func(c engine.Change) error { changes <- c; return nil })
	}()
	defer func() { cancel(); <-done }()
	waitChange(t, changes, engine.ChangeResync, "")
	if err := a.Put(ctx, "settings/resilience", []byte(`{}`), 0); err != nil {
		t.Fatal(err)
	}
	if ok, _, _, err := a.Swap(ctx, "breaker/p", nil, []byte(`{"state":"OPEN"}`), time.Minute); err != nil || !ok {
		t.Fatalf("Swap: %v %v", ok, err)
	}
	if kvs, err := a.Scan(ctx, "breaker/"); err != nil || len(kvs) != 1 {
		t.Fatalf("Scan: %v %v", kvs, err)
	}
	waitChange(t, changes, engine.ChangeKey, "breaker/p")

	bad := cfg
	bad.RedisPassword = "wrong-pa55word"
	if _, err := Open(bad, engine.SystemClock{}, nil); err == nil || strings.Contains(err.Error(), "pa55word") {
		t.Fatalf("wrong password: %v", err)
	}
	noCert := cfg
	noCert.RedisTLSCertFile, noCert.RedisTLSKeyFile = "", ""
	if _, err := Open(noCert, engine.SystemClock{}, nil); err == nil {
		t.Fatal("a TLS client without a certificate was let in")
	}
	if o, err := RedisOptions(cfg); err != nil || o.TLS == nil || o.TLS.RootCAs == nil || len(o.TLS.Certificates) != 1 {
		t.Fatalf("RedisOptions: %+v %v", o, err)
	}
	if _, err := RedisOptions(config.State{Backend: "redis", RedisURL: "redis://h:1", RedisTLSCAFile: filepath.Join(dir, "missing.pem")}); err == nil ||
		!strings.Contains(err.Error(), "state.redis_tls_ca_file") {
		t.Fatalf("missing CA file: %v", err)
	}
}

func waitChange(t *testing.T, ch <-chan engine.Change, kind engine.ChangeKind, key string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case c := <-ch:
			if c.Kind == kind && (key == "" || c.Key == key) {
				return
			}
		case <-deadline:
			t.Fatalf("no change %d %q", kind, key)
		}
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "breakwater test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// writeLeaf writes name.pem and name-key.pem: a server certificate for
// 127.0.0.1 or a client certificate, signed by ca.
func writeLeaf(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, server bool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", kb)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
