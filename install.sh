#!/usr/bin/env bash
# Install pgaccel and everything it needs on Debian or Ubuntu:
#   system packages: PostgreSQL server, client and contrib (pg_prewarm, pg_stat_statements),
#                    the server headers for PGXS (the in-server loop's C function), sysbench,
#                    fio (for `pgaccel tune --measure-storage`), valgrind (`pgaccel profile`),
#                    python3-venv; and, where the distribution has it, perf (Debian's
#                    linux-perf, Ubuntu's linux-tools for the running kernel: the live
#                    profile and flame graphs of `pgaccel profile` and `run --stack`),
#                    chromium (Debian's package; the test suite's browser check of the HTML
#                    reports) and etcd-server, patroni, openssh-server and iproute2 (the test
#                    suite's Patroni cluster and client hosts);
#   Python packages: pgaccel and its dependencies in ./.venv (pinned ranges in pyproject.toml).
# Run it as root, or as a user with sudo; otherwise it names what to install and stops.
# Elsewhere (no apt-get: RHEL, Fedora, Arch, ...) it says what to install and stops;
# `./install.sh --python-only` then makes ./.venv alone.
# Re-running it is safe: installed pieces are skipped.
set -euo pipefail
[[ $0 == */* ]] && cd "${0%/*}"

# Python 3.11 or newer: the test extra's ansible needs it (Ubuntu 22.04's python3 is 3.10)
py_ok() { command -v "$1" >/dev/null && "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; }
pick_python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
    for p in python3 python3.13 python3.12 python3.11; do
        if py_ok "$p"; then echo "$p"; return; fi
    done
    true
}

python_part() {
    if [ ! -x .venv/bin/python ]; then
        "$PY" -m venv .venv
    fi
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
    echo "pgaccel installed: $(.venv/bin/pgaccel --version)"
}

case "${1:-}" in
    --python-only)
        PY=$(pick_python)
        if [ -z "$PY" ]; then
            echo "install.sh --python-only needs Python 3.11 or newer with its venv module" \
                 "(none of python3, python3.13, python3.12, python3.11 is): install one, or" \
                 "name it with PYTHON=/path/to/python3.11 ./install.sh --python-only." >&2
            exit 1
        fi
        python_part
        exit 0 ;;
    "") ;;
    -h|--help)
        echo "usage: ./install.sh [--python-only]"
        echo "  Debian/Ubuntu: system packages (apt) and ./.venv; --python-only: ./.venv alone."
        exit 0 ;;
    *)
        echo "install.sh: unknown option $1 (usage: ./install.sh [--python-only])" >&2
        exit 2 ;;
esac

if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
    printf '%s\n' \
        "install.sh installs system packages with apt (Debian, Ubuntu); this system has no" \
        "apt-get/dpkg-query, so it installed nothing. Install with your own package manager:" \
        "  - PostgreSQL 13 to 18: server, client programs (psql, pgbench) and contrib modules" \
        "    (pg_prewarm, pg_stat_statements); RHEL, Rocky, Alma, Fedora: PGDG's postgresqlNN," \
        "    postgresqlNN-server and postgresqlNN-contrib (in /usr/pgsql-NN/bin)" \
        "  - Python 3.11 or newer with its venv module" \
        "  - optional: the server headers (PGDG: postgresqlNN-devel; the in-server-loop" \
        "    workload), sysbench, fio, valgrind, perf" \
        "pgaccel finds /usr/pgsql-NN/bin, /usr/local/pgsql/bin and PostgreSQL on PATH by itself;" \
        "point it at any other installation with PGACCEL_PG_BIN=DIR (the directory holding" \
        "postgres, initdb, pg_ctl and pgbench). Then install pgaccel's Python part alone:" \
        "  ./install.sh --python-only" >&2
    exit 1
fi

DISTRO=$( (. /etc/os-release && echo "${ID:-}") 2>/dev/null || true)

PKGS=(postgresql postgresql-client postgresql-contrib postgresql-server-dev-all sysbench fio
      valgrind python3-venv)
PY=$(pick_python)
if [ -z "$PY" ]; then
    # Ubuntu 22.04: python3 is 3.10; its universe has python3.11
    PY=python3.11
    PKGS+=(python3.11 python3.11-venv)
fi

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
    if [ "$(id -u)" -eq 0 ]; then SUDO=()
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=(sudo)
    else
        echo "pgaccel needs these system packages: ${missing[*]}" >&2
        echo "Install them with:  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        echo "then run ./install.sh again." >&2
        exit 1
    fi
    echo "Installing system packages: ${missing[*]}"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

# perf is optional: Debian calls it linux-perf, Ubuntu ships it per kernel (linux-tools-*)
if ! command -v perf >/dev/null; then
    if [ "$(id -u)" -eq 0 ] || { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
        [ "$(id -u)" -eq 0 ] && SUDO=() || SUDO=(sudo)
        if [ "$DISTRO" = ubuntu ]; then PERF=(linux-tools-common "linux-tools-$(uname -r)")
        else PERF=(linux-perf); fi
        "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends "${PERF[@]}" >/dev/null 2>&1 \
            || echo "perf is not installed (no ${PERF[*]} package here): profiles will have" \
                    "cachegrind counts only. Install your distribution's perf to add them." >&2
    fi
fi

# Chromium is for the test suite only: it opens the generated HTML reports in a real browser
# (no console error, no external request, every chart drawn) and keeps screenshots. Ubuntu
# has it only as a snap (its chromium-browser package installs the snap), so not there.
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
    if [ "$DISTRO" = ubuntu ]; then
        echo "Chromium is not installed (Ubuntu ships it as a snap only): the report browser" \
             "tests will be skipped (outside CI)." >&2
    elif [ "$(id -u)" -eq 0 ] || { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
        [ "$(id -u)" -eq 0 ] && SUDO=() || SUDO=(sudo)
        chromium_install() {
            "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                --no-install-recommends chromium fonts-dejavu-core >/dev/null 2>&1
        }
        chromium_install || { "${SUDO[@]}" apt-get update -qq >/dev/null 2>&1 && chromium_install; } \
            || echo "Chromium is not installed: the report browser tests will be skipped" \
                    "(outside CI). Install your distribution's chromium to run them." >&2
    fi
fi

# For the test suite only: etcd and Patroni (a real two-member Patroni cluster on loopback
# checks `pgaccel tune --apply --patroni`), and sshd, ssh and iproute2 (two network namespaces
# joined by a veth pair check `pgaccel bench --client-host`).
if ! [ -x /usr/bin/etcd ] || ! [ -x /usr/bin/patroni ] || ! [ -x /usr/sbin/sshd ] \
        || ! command -v ssh >/dev/null || ! command -v ip >/dev/null; then
    if [ "$(id -u)" -eq 0 ] || { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
        [ "$(id -u)" -eq 0 ] && SUDO=() || SUDO=(sudo)
        tools_install() {
            "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                --no-install-recommends etcd-server patroni openssh-server openssh-client \
                iproute2 >/dev/null 2>&1
        }
        tools_install || { "${SUDO[@]}" apt-get update -qq >/dev/null 2>&1 && tools_install; } \
            || echo "etcd-server, patroni, openssh-server or iproute2 is not installed: the" \
                    "Patroni and client-host tests will be skipped (outside CI)." >&2
    fi
fi

python_part
