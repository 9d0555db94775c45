#!/usr/bin/env bash
# Install (Debian packages via apt-get) and start a PostgreSQL and a MariaDB server for tiltframe's
# integration tests, both listening on loopback only (127.0.0.1), and create the `tiltframe` role/user
# (password `tiltframe`) and database in each.  Works without systemd (pg_ctlcluster / init script /
# mysqld_safe).  Idempotent: when both servers already accept the tiltframe login it only prints.
#
# stdout is exactly the two export lines, everything else goes to stderr, so use it as
#     eval "$(bash scripts/services.sh)"
# Needs root (apt-get, starting the daemons).
set -euo pipefail

exec 3>&1 1>&2 # fd 3 = real stdout (exports only); all other output goes to stderr

PG_CLUSTER=main
DB=tiltframe
DB_USER=tiltframe
DB_PASSWORD=tiltframe
WAIT_SECONDS=60
MARIADB_CNF=/etc/mysql/mariadb.conf.d/99-tiltframe.cnf
# What the start commands print. The daemons must not inherit the caller's stdout/stderr: a caller
# reading them through a pipe (CI, `$(...)`) would otherwise wait for the servers to exit.
SERVER_LOG=/tmp/tiltframe-services.log

log() { echo "services: $*"; }
die() {
    echo "services: ERROR: $*"
    [[ -s "$SERVER_LOG" ]] && { echo "services: last lines of $SERVER_LOG:"; tail -n 20 "$SERVER_LOG"; }
    exit 1
}

# Write TEXT to FILE unless it holds exactly that already; succeeds only when it wrote (a restart is due).
write_config() {
    local file=$1 text=$2
    [[ "$(cat "$file" 2>/dev/null || true)" == "$text" ]] && return 1
    mkdir -p "$(dirname "$file")"
    printf '%s\n' "$text" >"$file"
}

print_exports() {
    printf "export TILTFRAME_TEST_POSTGRES_URL='jdbc:postgresql://127.0.0.1:%s/%s?user=%s&password=%s'\n" \
        "$PG_PORT" "$DB" "$DB_USER" "$DB_PASSWORD" >&3
    printf "export TILTFRAME_TEST_MYSQL_URL='jdbc:mysql://127.0.0.1:%s/%s?user=%s&password=%s'\n" \
        "$MARIADB_PORT" "$DB" "$DB_USER" "$DB_PASSWORD" >&3
}

# --- ports (actual configured ports, falling back to the defaults) -------------------------------
pg_version() { # newest installed server version, e.g. 15
    local d
    for d in /usr/lib/postgresql/*/bin/postgres; do
        [[ -x "$d" ]] && basename "$(dirname "$(dirname "$d")")"
    done | sort -n | tail -n 1
}
pg_port() {
    local port=""
    if command -v pg_lsclusters >/dev/null 2>&1 && [[ -n "${PG_VERSION:-}" ]]; then
        port="$(pg_lsclusters -h "$PG_VERSION" "$PG_CLUSTER" 2>/dev/null | awk '{print $3}')"
    fi
    echo "${port:-5432}"
}
mariadb_port() {
    local port=""
    if command -v my_print_defaults >/dev/null 2>&1; then
        port="$(my_print_defaults --mysqld 2>/dev/null | sed -n 's/^--port=//p' | tail -n 1)"
    fi
    echo "${port:-3306}"
}

PG_VERSION="$(pg_version || true)"
PG_PORT="$(pg_port)"
MARIADB_PORT="$(mariadb_port)"

# --- login checks (as the test user, over TCP to 127.0.0.1) ---------------------------------------
pg_login_ok() {
    command -v psql >/dev/null 2>&1 &&
        PGPASSWORD="$DB_PASSWORD" PGCONNECT_TIMEOUT=3 timeout 10 \
            psql -h 127.0.0.1 -p "$PG_PORT" -U "$DB_USER" -d "$DB" -XAtqc 'select 1' >/dev/null 2>&1
}
mariadb_login_ok() {
    command -v mariadb >/dev/null 2>&1 &&
        timeout 10 mariadb --connect-timeout=3 --protocol=tcp -h 127.0.0.1 -P "$MARIADB_PORT" \
            -u "$DB_USER" -p"$DB_PASSWORD" "$DB" -e 'select 1' >/dev/null 2>&1
}

mariadb_tcp_up() {
    mariadb-admin --connect-timeout=2 --protocol=tcp -h 127.0.0.1 -P "$MARIADB_PORT" ping
}
mariadb_start() {
    if [[ -x /etc/init.d/mariadb ]]; then
        # SysV init script: starts mysqld_safe in the background and waits for it (no systemd needed).
        service mariadb start </dev/null >>"$SERVER_LOG" 2>&1 3>&-
    else
        install -d -o mysql -g mysql -m 0755 /run/mysqld
        setsid mysqld_safe </dev/null >>"$SERVER_LOG" 2>&1 3>&- &
    fi
}
mariadb_stop() {
    if [[ -x /etc/init.d/mariadb ]]; then
        service mariadb stop
    else
        mariadb-admin shutdown
    fi
}

# `services.sh stop|start postgresql|mariadb`: stop or start one server as this script started it.  Nothing
# is printed on stdout.
if (($# == 2)); then
    case "$1 $2" in
    "stop postgresql") pg_ctlcluster "$PG_VERSION" "$PG_CLUSTER" stop -m fast </dev/null >>"$SERVER_LOG" 2>&1 3>&- ;;
    "start postgresql") pg_ctlcluster "$PG_VERSION" "$PG_CLUSTER" start </dev/null >>"$SERVER_LOG" 2>&1 3>&- ;;
    "stop mariadb") mariadb_stop >>"$SERVER_LOG" 2>&1 ;;
    "start mariadb") mariadb_start ;;
    *) die "usage: $0 [stop|start postgresql|mariadb]" ;;
    esac
    exit 0
fi

# Fast path: both servers already up and provisioned.
if pg_login_ok && mariadb_login_ok; then
    log "PostgreSQL (127.0.0.1:$PG_PORT) and MariaDB (127.0.0.1:$MARIADB_PORT) already running"
    print_exports
    exit 0
fi

[[ $EUID -eq 0 ]] || die "must run as root to install/start the database servers (try: sudo bash $0)"

# --- packages -------------------------------------------------------------------------------------
PACKAGES=(postgresql mariadb-server mariadb-client) # postgresql pulls in postgresql-client-NN
missing=()
for pkg in "${PACKAGES[@]}"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)" != installed ]]; then
        missing+=("$pkg")
    fi
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
    PG_VERSION="$(pg_version || true)"
fi
[[ -n "$PG_VERSION" ]] || die "no PostgreSQL server found under /usr/lib/postgresql after install"

# Wait (bounded) until "$@" succeeds.
wait_for() {
    local what="$1" i
    shift
    for ((i = 0; i < WAIT_SECONDS; i++)); do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        sleep 1
    done
    return 1
}

# --- PostgreSQL -----------------------------------------------------------------------------------
if ! pg_lsclusters -h "$PG_VERSION" "$PG_CLUSTER" 2>/dev/null | grep -q .; then
    log "creating PostgreSQL cluster $PG_VERSION/$PG_CLUSTER"
    pg_createcluster "$PG_VERSION" "$PG_CLUSTER"
fi
PG_PORT="$(pg_port)"

pg_conf="/etc/postgresql/$PG_VERSION/$PG_CLUSTER/conf.d/99-tiltframe.conf"
pg_conf_text="# Written by tiltframe scripts/services.sh: listen on loopback only.
listen_addresses = '127.0.0.1'"
pg_conf_changed=0
write_config "$pg_conf" "$pg_conf_text" && pg_conf_changed=1

pg_hba="/etc/postgresql/$PG_VERSION/$PG_CLUSTER/pg_hba.conf"
if ! grep -Eq '^[[:space:]]*host[[:space:]]+all[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+(scram-sha-256|md5)' "$pg_hba"; then
    log "WARNING: $pg_hba has no 'host all all 127.0.0.1/32 scram-sha-256' line; password login may fail"
fi

pg_running() { pg_ctlcluster "$PG_VERSION" "$PG_CLUSTER" status >/dev/null 2>&1; }
if pg_running; then
    if ((pg_conf_changed)); then
        log "restarting PostgreSQL $PG_VERSION/$PG_CLUSTER to apply $pg_conf"
        pg_ctlcluster "$PG_VERSION" "$PG_CLUSTER" restart </dev/null >>"$SERVER_LOG" 2>&1 3>&-
    fi
else
    log "starting PostgreSQL $PG_VERSION/$PG_CLUSTER"
    # pg_ctlcluster drops to the cluster owner (postgres) itself; without systemd it runs pg_ctl.
    pg_ctlcluster "$PG_VERSION" "$PG_CLUSTER" start </dev/null >>"$SERVER_LOG" 2>&1 3>&-
fi
wait_for "PostgreSQL" pg_isready -q -h 127.0.0.1 -p "$PG_PORT" ||
    die "PostgreSQL did not accept connections on 127.0.0.1:$PG_PORT within ${WAIT_SECONDS}s" \
        "(see /var/log/postgresql/postgresql-$PG_VERSION-$PG_CLUSTER.log)"

log "provisioning PostgreSQL role/database $DB_USER/$DB"
runuser -u postgres -- psql -X -q -p "$PG_PORT" -d postgres -v ON_ERROR_STOP=1 <<SQL
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$DB_USER') THEN
        CREATE ROLE $DB_USER LOGIN CREATEDB PASSWORD '$DB_PASSWORD';
    ELSE
        ALTER ROLE $DB_USER LOGIN CREATEDB PASSWORD '$DB_PASSWORD';
    END IF;
END
\$\$;
SELECT 'CREATE DATABASE $DB OWNER $DB_USER'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$DB')\gexec
ALTER DATABASE $DB OWNER TO $DB_USER;
-- DROP DATABASE ... WITH (FORCE) of the tests' scratch databases must be able to end an autovacuum
-- worker that is still in the database; without this role PostgreSQL refuses.
GRANT pg_signal_backend TO $DB_USER;
SQL

# --- MariaDB --------------------------------------------------------------------------------------
mariadb_cnf_text="# Written by tiltframe scripts/services.sh: listen on loopback only.
[mysqld]
bind-address = 127.0.0.1"
mariadb_cnf_changed=0
write_config "$MARIADB_CNF" "$mariadb_cnf_text" && mariadb_cnf_changed=1
MARIADB_PORT="$(mariadb_port)"

# mariadb-admin ping exits 0 whenever the server answers (even with "access denied").
mariadb_running() { mariadb-admin --connect-timeout=2 ping >/dev/null 2>&1; }
if mariadb_running; then
    if ((mariadb_cnf_changed)); then
        log "restarting MariaDB to apply $MARIADB_CNF"
        mariadb_stop
        mariadb_start
    fi
else
    log "starting MariaDB"
    mariadb_start
fi
wait_for "MariaDB" mariadb_tcp_up ||
    die "MariaDB did not accept connections on 127.0.0.1:$MARIADB_PORT within ${WAIT_SECONDS}s" \
        "(see /var/log/mysql/ or the syslog)"

log "provisioning MariaDB user/database $DB_USER/$DB"
# root authenticates via unix_socket on Debian, so plain `mariadb` as root works over the socket.
mariadb --protocol=socket <<SQL
CREATE DATABASE IF NOT EXISTS \`$DB\`;
CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASSWORD';
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
ALTER USER '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASSWORD';
ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
GRANT ALL PRIVILEGES ON \`$DB\`.* TO '$DB_USER'@'127.0.0.1', '$DB_USER'@'localhost';
GRANT ALL PRIVILEGES ON \`${DB}\\_%\`.* TO '$DB_USER'@'127.0.0.1', '$DB_USER'@'localhost';
SQL

# --- final check ----------------------------------------------------------------------------------
pg_login_ok || die "cannot log in to PostgreSQL as $DB_USER at 127.0.0.1:$PG_PORT (check $pg_hba)"
mariadb_login_ok || die "cannot log in to MariaDB as $DB_USER at 127.0.0.1:$MARIADB_PORT"
log "PostgreSQL (127.0.0.1:$PG_PORT) and MariaDB (127.0.0.1:$MARIADB_PORT) ready"
print_exports
