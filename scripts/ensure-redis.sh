#!/usr/bin/env bash
# Start a throwaway local Redis on 6379 when nothing answers there (tests marked `redis` need one).
set -u
port="${MGMATCH_TEST_REDIS_PORT:-6379}"
if command -v redis-cli >/dev/null 2>&1 && redis-cli -p "$port" ping >/dev/null 2>&1; then
  exit 0
fi
if command -v redis-server >/dev/null 2>&1; then
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
    --dir /tmp --logfile /tmp/mgmatch-redis.log >/dev/null
  for _ in $(seq 1 50); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && exit 0
    sleep 0.1
  done
  echo "ensure-redis: redis-server did not answer on $port" >&2
  exit 1
fi
echo "ensure-redis: no redis-server installed; tests marked 'redis' will be skipped" >&2
exit 0
