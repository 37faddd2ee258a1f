package main

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"
)

// redisLogger routes go-redis's own messages (dial retries, pool notices)
// into the hclog tree at debug level instead of the process's stderr.
type redisLogger struct{ log hclog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	if l.log.IsDebug() {
		l.log.Debug(fmt.Sprintf(format, v...))
	}
}

// routeRedisLogs installs redisLogger. go-redis keeps one process-wide
// logger, so only the command's main path sets it.
func routeRedisLogs(log hclog.Logger) { redis.SetLogger(redisLogger{log: log.Named("store.redis")}) }
