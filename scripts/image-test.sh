#!/usr/bin/env bash
# `make image-test`: build the service image, run it, then run the compose stack — with podman, on a
# machine that reaches Debian's archive and PyPI but no container registry (run by .ci/run after
# `make test`). Every step prints one line; any failure ends with exit 1 and a line saying what failed,
# after everything this script started is removed.
#
#   1. tools      podman, runc, debootstrap and podman-compose (apt-get install when missing; needs root)
#   2. base       localhost/mgmatch-base:bookworm: Debian bookworm (python3 3.11, venv) made with
#                 debootstrap and imported; skipped when it exists and carries this machine's CA bundle
#   3. cpu image  the Dockerfile's cpu target with --build-arg BASE=<that base> (the wheel with [grpc])
#   4. run        the image serves; POST /v1/solve on docs/spec/examples/instance-3v3-small.json answers
#                 the optimum of expected-small.json
#   5. stack      Redis and Prometheus images from Debian packages; docker-compose.yml with
#                 deploy/local/compose.host.yml under podman-compose: Redis, api, matchmaker, 2 solvers,
#                 Prometheus on 127.0.0.1; 6 tickets posted and matched into one match; Prometheus's
#                 targets API says every mgmatch process is up
#
# Timings (seconds per step, the images' sizes) go to $IMAGE_TEST_REPORT (default
# .image-test/report.json). Usage: scripts/image-test.sh [--fresh]   (--fresh: rebuild the base and
# build every image without the layer cache, to measure a cold build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

FRESH=0
[ "${1:-}" = "--fresh" ] && FRESH=1
BASE_IMAGE=localhost/mgmatch-base:bookworm
CPU_IMAGE=localhost/mgmatch:cpu
REDIS_IMAGE=localhost/mgmatch-redis:bookworm
PROM_IMAGE=localhost/mgmatch-prometheus:bookworm
PROJECT=mgmatch-it
MIRROR=${DEBIAN_MIRROR:-}
WORK=$(mktemp -d /tmp/mgmatch-image-test.XXXXXX)
OUT_DIR=${IMAGE_TEST_DIR:-$ROOT/.image-test}
REPORT=${IMAGE_TEST_REPORT:-$OUT_DIR/report.json}
mkdir -p "$OUT_DIR"
echo '*' > "$OUT_DIR/.gitignore"
RUN_NAME="$PROJECT-cpu-$$"
STACK_UP=0
t_all=$(date +%s)
declare -A SECONDS_OF

say() { echo "image-test: $*"; }
die() { echo "image-test: FAILED: $*" >&2; exit 1; }

# podman needs two things here (docs/guides/deploy-images.md): runc (crun refuses these machines'
# cgroups) and no default ulimits (podman's are refused: "setrlimit RLIMIT_NOFILE")
export CONTAINERS_CONF="$WORK/containers.conf"
printf '[containers]\ndefault_ulimits = []\n' > "$CONTAINERS_CONF"
pm() { podman --runtime runc "$@"; }

compose() {
    podman-compose -p "$PROJECT" --podman-path "$ROOT/scripts/podman-host-net" \
        -f docker-compose.yml -f deploy/local/compose.host.yml "$@"
}

cleanup() {
    local rc=$?
    set +e
    pm rm -f "$RUN_NAME" > /dev/null 2>&1
    if [ $STACK_UP = 1 ]; then
        for c in $(pm ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}'); do
            pm logs "$c" > "$OUT_DIR/$c.log" 2>&1
        done
        compose down -v > "$OUT_DIR/compose-down.log" 2>&1
        pm rm -f $(pm ps -aq --filter "label=io.podman.compose.project=$PROJECT") > /dev/null 2>&1
        pm volume rm -f $(pm volume ls -q --filter "label=io.podman.compose.project=$PROJECT") > /dev/null 2>&1
        pm network rm -f "${PROJECT}_default" > /dev/null 2>&1
    fi
    rm -rf "$WORK"
    if [ $rc = 0 ]; then
        say "PASSED in $(( $(date +%s) - t_all )) s (report: ${REPORT#"$ROOT"/})"
    else
        echo "image-test: FAILED after $(( $(date +%s) - t_all )) s; logs in ${OUT_DIR#"$ROOT"/}/" >&2
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

timed() {  # timed <key> <command…>: run, record its seconds, keep its output in $OUT_DIR/<key>.log
    local key=$1 t0 rc=0
    shift
    t0=$(date +%s)
    "$@" > "$OUT_DIR/$key.log" 2>&1 || rc=$?
    SECONDS_OF[$key]=$(( $(date +%s) - t0 ))
    if [ $rc != 0 ]; then
        tail -n 25 "$OUT_DIR/$key.log" >&2
        die "$key (exit $rc; the whole log: ${OUT_DIR#"$ROOT"/}/$key.log)"
    fi
}

image_size() { pm image inspect --format '{{.Size}}' "$1"; }

# ---------------------------------------------------------------- 1. tools
missing=()
for tool in podman runc debootstrap podman-compose; do
    command -v "$tool" > /dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing ${missing[*]}: install them (apt-get install podman runc debootstrap podman-compose) or run as root"
    say "installing ${missing[*]} with apt-get"
    timed tools sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman runc debootstrap podman-compose'
fi
say "podman $(podman --version | awk '{print $3}'), podman-compose $(podman-compose --version 2>/dev/null | awk '/podman-compose/ {print $NF}' | tail -1)"

# ---------------------------------------------------------------- 2. the Debian base
# pip inside the builds verifies PyPI against this machine's CA bundle (a TLS-inspecting proxy's
# certificate may be in it), so the base carries that bundle and a pip.conf naming it; a changed
# bundle makes a new base
CA=/etc/ssl/certs/ca-certificates.crt
[ -r "$CA" ] || die "no CA bundle at $CA (apt-get install ca-certificates)"
ca_sum=$(sha256sum "$CA" | cut -c1-16)
have_sum=$(pm image inspect --format '{{index .Labels "mgmatch.ca-bundle"}}' "$BASE_IMAGE" 2>/dev/null || true)
if [ $FRESH = 0 ] && [ "$have_sum" = "$ca_sum" ]; then
    say "base $BASE_IMAGE exists: reused"
    SECONDS_OF[base]=0
else
    if [ -z "$MIRROR" ]; then  # the mirror apt uses here
        MIRROR=$( (grep -rhoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/ \
                   2>/dev/null || true) | awk '$2 ~ /\/debian\/?$/ {print $2; exit}')
        MIRROR=${MIRROR:-http://deb.debian.org/debian}
    fi
    say "base: debootstrap bookworm from $MIRROR (about 2 minutes)"
    make_base() {  # (called where `set -e` does not apply: each step returns on failure)
        local rootfs="$WORK/rootfs"
        debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$MIRROR" \
            || return 1
        [ -x "$rootfs/usr/bin/python3" ] || { echo "debootstrap left no python3"; return 1; }
        cp "$CA" "$rootfs/etc/ssl/certs/ca-certificates.crt" || return 1
        printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$rootfs/etc/pip.conf" || return 1
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        tar -C "$rootfs" -c . | pm import --change "LABEL mgmatch.ca-bundle=$ca_sum" \
            --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" || return 1
        rm -rf "$rootfs"
    }
    timed base make_base
    say "base built in ${SECONDS_OF[base]} s"
fi

# ---------------------------------------------------------------- 3. the cpu image
cache=()
[ $FRESH = 1 ] && cache=(--no-cache)
say "building $CPU_IMAGE (Dockerfile, target cpu, BASE=$BASE_IMAGE)"
timed build-cpu pm build "${cache[@]}" --format docker --network host --build-arg "BASE=$BASE_IMAGE" \
    --target cpu -t "$CPU_IMAGE" -f Dockerfile .
say "cpu image built in ${SECONDS_OF[build-cpu]} s, $(( $(image_size "$CPU_IMAGE") / 1000000 )) MB"
if pm run --rm --network host --entrypoint python "$CPU_IMAGE" -c "import torch" > /dev/null 2>&1; then
    die "the cpu image has torch: the service install must not pull it"
fi

# ---------------------------------------------------------------- 4. run it: /v1/solve on the spec example
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
SPEC=docs/spec/examples
mkdir -p "$WORK/spec"
cp "$SPEC/instance-3v3-small.json" "$SPEC/engagement-small.json" "$SPEC/expected-small.json" "$WORK/spec/"
python3 tests/install/image_checks.py spec-config "$WORK/spec" /spec > "$WORK/spec/service.yaml"
PORT=$(free_port)
pm run -d --name "$RUN_NAME" --network host --no-healthcheck -v "$WORK/spec:/spec:ro" \
    -e MGMATCH_CONFIG=/spec/service.yaml "$CPU_IMAGE" serve --host 127.0.0.1 --port "$PORT" > /dev/null \
    || die "podman run $CPU_IMAGE"
t0=$(date +%s)
if ! python3 tests/install/image_checks.py solve "http://127.0.0.1:$PORT" "$WORK/spec"; then
    pm logs "$RUN_NAME" > "$OUT_DIR/run-cpu.log" 2>&1 || true
    tail -n 20 "$OUT_DIR/run-cpu.log" >&2
    die "the cpu image did not answer /v1/solve with the spec's optimum"
fi
SECONDS_OF[run]=$(( $(date +%s) - t0 ))
pm rm -f "$RUN_NAME" > /dev/null

# ---------------------------------------------------------------- 5. the compose stack
say "building $REDIS_IMAGE and $PROM_IMAGE from Debian packages"
timed build-redis pm build "${cache[@]}" --network host --build-arg "BASE=$BASE_IMAGE" -t "$REDIS_IMAGE" \
    -f deploy/local/redis.Containerfile deploy/local
timed build-prometheus pm build "${cache[@]}" --network host --build-arg "BASE=$BASE_IMAGE" -t "$PROM_IMAGE" \
    -f deploy/local/prometheus.Containerfile deploy/local

# the stack's addresses: deploy/local/stack.env, each port taken only where it is free (else a free one;
# a value already in the environment wins)
port_busy() { python3 -c 'import socket, sys; s = socket.socket(); sys.exit(s.connect_ex(("127.0.0.1", int(sys.argv[1]))) != 0)' "$1"; }
while IFS='=' read -r name value; do
    case $name in ''|'#'*) continue;; esac
    [ -n "${!name:-}" ] && value=${!name}
    if [[ $name == *_PORT ]] && port_busy "$value"; then value=$(free_port); fi
    export "$name=$value"
done < deploy/local/stack.env
[ "$MGMATCH_STACK_HOST" = 127.0.0.1 ] || die "MGMATCH_STACK_HOST is $MGMATCH_STACK_HOST: the stack listens on 127.0.0.1 only"
export MGMATCH_STACK_PROMETHEUS_CONFIG="$WORK/prometheus.yml"
export MGMATCH_API_KEYS="it-$$-$RANDOM"
python3 tests/install/image_checks.py prometheus-config > "$MGMATCH_STACK_PROMETHEUS_CONFIG"
chmod a+r "$MGMATCH_STACK_PROMETHEUS_CONFIG"
chmod a+rx "$WORK"

# a player pool for the tickets: generated by the image itself (`mgmatch generate`)
mkdir -p "$WORK/pool" && chmod a+rwx "$WORK/pool"
pm run --rm --network host --no-healthcheck -v "$WORK/pool:/pool" "$CPU_IMAGE" \
    generate --preset 3v3 --count 1 --seed 7 --out /pool > "$OUT_DIR/generate.log" 2>&1 \
    || { cat "$OUT_DIR/generate.log" >&2; die "mgmatch generate in the image"; }

SERVICES=(redis api matchmaker solver solver-2 prometheus)
say "compose up: ${SERVICES[*]} (podman-compose, host network, 127.0.0.1)"
STACK_UP=1
timed compose-up compose up -d --no-build "${SERVICES[@]}"
t0=$(date +%s)
python3 tests/install/image_checks.py stack "$WORK/pool/instance-00000.json" \
    || die "the compose stack (container logs in ${OUT_DIR#"$ROOT"/}/)"
SECONDS_OF[stack]=$(( $(date +%s) - t0 ))

# ---------------------------------------------------------------- report
python3 - "$REPORT" <<EOF
import json, sys
seconds = {$(for k in "${!SECONDS_OF[@]}"; do printf '"%s": %s, ' "$k" "${SECONDS_OF[$k]}"; done)}
sizes = {"$BASE_IMAGE": $(image_size "$BASE_IMAGE"), "$CPU_IMAGE": $(image_size "$CPU_IMAGE"),
         "$REDIS_IMAGE": $(image_size "$REDIS_IMAGE"), "$PROM_IMAGE": $(image_size "$PROM_IMAGE")}
json.dump({"fresh": bool($FRESH), "seconds": seconds, "bytes": sizes}, open(sys.argv[1], "w"), indent=2)
EOF
say "timings: $(for k in "${!SECONDS_OF[@]}"; do printf "%s=%ss " "$k" "${SECONDS_OF[$k]}"; done)"
