package plugins

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero/api"

	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// instantiateHostModule provides abi.ImportModule in the plugin's runtime.
// The functions run on the calling goroutine; a store operation is bounded
// by the call timeout of its own (the interrupt that enforces a call's
// deadline acts on guest code only), so a call that waits on a slow store
// may take up to twice its timeout.
func (p *plugin) instantiateHostModule(ctx context.Context) error {
	b := p.rt.NewHostModuleBuilder(abi.ImportModule)
	for _, f := range []struct {
		name string
		fn   api.GoModuleFunc
	}{
		{abi.ImportLog, p.hostLog},
		{abi.ImportKVGet, p.hostKVGet},
		{abi.ImportKVSet, p.hostKVSet},
		{abi.ImportNowMS, p.hostNowMS},
	} {
		sig, _ := abi.ImportSignature(f.name)
		b.NewFunctionBuilder().
			WithGoModuleFunction(f.fn, apiTypes(sig.Params), apiTypes(sig.Results)).
			Export(f.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// hostLog implements log(level, ptr, len): the message goes to the
// plugin's logger, truncated to abi.MaxLogBytes, through guestLine.
func (p *plugin) hostLog(_ context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := abi.LogLevel(api.DecodeI32(stack[0])), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	n = min(n, abi.MaxLogBytes)
	v, _ := p.instances.Load(mod)
	in, _ := v.(*instance)
	msg, ok := mod.Memory().Read(ptr, n)
	if !ok {
		p.guestLine(in, hclog.Warn, "guest log message out of bounds", "ptr", ptr, "len", n)
		return
	}
	p.guestLine(in, hclogLevel(level), string(msg))
}

// guestLine logs one line a guest asked for (sdk.Log, stdout, stderr) if
// the bounds allow: MaxLogLinesPerCall lines per hook call of instance in
// (nil: no per-call bound), and the plugin's token bucket (logLimiter).
// Dropped lines are counted (Status.LogsDropped) and the next line logged
// says how many were dropped before it. The message and string arguments
// are redacted (Options.Redactor): guests see upstream error bodies, which
// may echo a credential.
func (p *plugin) guestLine(in *instance, level hclog.Level, msg string, args ...any) {
	if level < p.log.GetLevel() {
		return
	}
	if in != nil {
		if in.logLines >= MaxLogLinesPerCall {
			p.logs.dropCall()
			return
		}
		in.logLines++
	}
	ok, dropped := p.logs.allow(p.clock.Now())
	if !ok {
		return
	}
	for i, a := range args {
		if s, isStr := a.(string); isStr {
			args[i] = p.redact.String(s)
		}
	}
	if dropped > 0 {
		args = append(args, "log_lines_dropped_before", dropped)
	}
	p.log.Log(level, p.redact.String(msg), args...)
}

// guestOutput is the emit function of an instance's stdout and stderr.
func (p *plugin) guestOutput(in *instance) func(hclog.Level, string) {
	return func(level hclog.Level, line string) { p.guestLine(in, level, "guest output", "line", line) }
}

func hclogLevel(l abi.LogLevel) hclog.Level {
	if l < abi.LogTrace || l > abi.LogError {
		return hclog.Info
	}
	return hclog.Level(l)
}

// kvKey returns the store key of a guest key, and false when the key is
// empty, too long or out of bounds.
func (p *plugin) kvKey(mod api.Module, ptr, n uint32) (string, bool) {
	if n == 0 || n > abi.MaxKeyBytes {
		return "", false
	}
	k, ok := mod.Memory().Read(ptr, n)
	if !ok {
		return "", false
	}
	return "plugin/" + p.name + "/" + string(k), true
}

// hostKVGet implements kv_get(key_ptr, key_len, buf_ptr, buf_cap) -> i32.
func (p *plugin) hostKVGet(ctx context.Context, mod api.Module, stack []uint64) {
	result := func(v int32) { stack[0] = api.EncodeI32(v) }
	key, ok := p.kvKey(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	if !ok || p.store == nil {
		result(abi.KVFailed)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	val, found, err := p.store.Get(ctx, key)
	switch {
	case err != nil:
		p.log.Warn("kv_get failed", "key", key, "error", err)
		result(abi.KVFailed)
		return
	case !found:
		result(abi.KVNotFound)
		return
	}
	if len(val) <= int(api.DecodeU32(stack[3])) && !mod.Memory().Write(api.DecodeU32(stack[2]), val) {
		result(abi.KVFailed)
		return
	}
	result(int32(len(val)))
}

// hostKVSet implements kv_set(key_ptr, key_len, val_ptr, val_len, ttl_ms)
// -> i32; an empty value deletes the key.
func (p *plugin) hostKVSet(ctx context.Context, mod api.Module, stack []uint64) {
	result := func(v int32) { stack[0] = api.EncodeI32(v) }
	key, ok := p.kvKey(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	n, ttl := api.DecodeU32(stack[3]), int64(stack[4])
	if !ok || p.store == nil || n > abi.MaxValueBytes || ttl < 0 || ttl > maxTTLMillis {
		result(abi.KVFailed)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var err error
	if n == 0 {
		err = p.store.Delete(ctx, key)
	} else {
		val, ok := mod.Memory().Read(api.DecodeU32(stack[2]), n)
		if !ok {
			result(abi.KVFailed)
			return
		}
		// The view aliases guest memory; the store may keep the slice.
		err = p.store.Put(ctx, key, append([]byte(nil), val...), time.Duration(ttl)*time.Millisecond)
	}
	if err != nil {
		p.log.Warn("kv_set failed", "key", key, "error", err)
		result(abi.KVFailed)
		return
	}
	result(abi.KVOK)
}

// maxTTLMillis keeps a kv_set ttl within time.Duration.
const maxTTLMillis = int64(1<<63-1) / int64(time.Millisecond)

// hostNowMS implements now_ms() -> i64 from the host clock.
func (p *plugin) hostNowMS(_ context.Context, _ api.Module, stack []uint64) {
	stack[0] = uint64(p.clock.Now().UnixMilli())
}
