#!/usr/bin/env bash
# Install pgaccel and everything it needs on Debian or Ubuntu:
#   system packages: PostgreSQL server, client and contrib (pg_prewarm, pg_stat_statements),
#                    the server headers for PGXS (the in-server loop's C function), sysbench,
#                    fio (for `pgaccel tune --measure-storage`), valgrind (`pgaccel profile`),
#                    python3-venv; and, where the distribution has it, linux-perf (the live
#                    profile and flame graphs of `pgaccel profile` and `run --stack`) and
#                    chromium (the test suite's browser check of the HTML reports) and
#                    etcd-server, patroni, openssh-server and iproute2 (the test suite's
#                    Patroni cluster and client hosts);
#   Python packages: pgaccel and its dependencies in ./.venv (pinned ranges in pyproject.toml).
# Run it as root, or as a user with sudo; otherwise it names what to install and stops.
# Re-running it is safe: installed pieces are skipped.
set -euo pipefail
cd "$(dirname "$0")"

PKGS=(postgresql postgresql-client postgresql-contrib postgresql-server-dev-all sysbench fio
      valgrind python3-venv)

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

# perf is optional: Debian calls it linux-perf, other distributions name it per kernel
if ! command -v perf >/dev/null; then
    if [ "$(id -u)" -eq 0 ] || { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
        [ "$(id -u)" -eq 0 ] && SUDO=() || SUDO=(sudo)
        "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends linux-perf >/dev/null 2>&1 \
            || echo "perf is not installed (no linux-perf package here): profiles will have" \
                    "cachegrind counts only. Install your distribution's perf to add them." >&2
    fi
fi

# Chromium is for the test suite only: it opens the generated HTML reports in a real browser
# (no console error, no external request, every chart drawn) and keeps screenshots.
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
    if [ "$(id -u)" -eq 0 ] || { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
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

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
echo "pgaccel installed: $(.venv/bin/pgaccel --version)"
