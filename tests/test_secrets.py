"""A password never leaves pgaccel: the one redaction function (``safe_dsn`` /
``scrub_secrets``) on well-formed and malformed DSNs, and every command given a DSN with a
password that is wrong or unreachable: the documented exit code, one paragraph, no
traceback, the password nowhere."""

from __future__ import annotations

import pytest

from helpers import pgaccel
from pgaccel.pg.secrets import scrub_secrets
from pgaccel.server.target_base import explain_connect_error, safe_dsn
from pgaccel.workloads.pgbench import libpq_env

PW = "S3cr3tPW"

# (dsn, text that must remain in the safe form)
CASES = [
    (f"postgresql://alice:{PW}@db.example:5432/app", "db.example"),
    (f"postgres://alice:{PW}@db.example/app?sslmode=require", "sslmode=require"),
    (f"postgresql://alice:{PW}@[::1", "alice"),                       # unclosed bracket
    (f"postgresql://alice:{PW}@[::1]:5432/app", "alice"),
    (f"postgresql://alice:{PW}@[", "alice"),
    (f"postgresql://alice:{PW}x@y@host/app", "host"),                  # unencoded @ in pw
    (f"postgresql://alice:{PW}%40x%20y@host/app", "host"),             # percent-encoded
    (f"postgresql://host/app?password={PW}&sslmode=disable", "host"),
    (f"postgresql://host/app?sslmode=disable&password={PW}", "host"),
    (f"postgresql://host:notaport/app?password={PW}", "host"),         # malformed port
    (f"host=db password={PW} dbname=app", "dbname=app"),
    (f"host=db password = {PW} dbname=app", "host=db"),
    (f"host=db password='{PW} with spaces' dbname=app", "dbname=app"),
    (f"host=db password='{PW} \\' quoted' dbname=app", "dbname=app"),
    (f"host=db password='{PW} unclosed", "host=db"),                   # unclosed quote
    (f"host=db PASSWORD={PW}", "host=db"),                             # unknown key (case)
    (f"host=db user=bob password={PW} sslmode=verify-full", "sslmode=verify-full"),
    (f"password={PW}", ""),
    (f"hostaddr=127.0.0.1 port=5432 password=\"{PW}\"", "127.0.0.1"),
]


@pytest.mark.parametrize("dsn,keep", CASES)
def test_safe_dsn_never_shows_the_password(dsn, keep):
    shown = safe_dsn(dsn)
    assert PW not in shown, shown
    assert keep in shown


@pytest.mark.parametrize("dsn,keep", CASES)
def test_scrub_secrets_in_surrounding_text(dsn, keep):
    text = f'error: invalid connection option in "{dsn}": something'
    assert PW not in scrub_secrets(text)


def test_safe_dsn_keeps_the_rest():
    assert set(safe_dsn("host=h port=5 dbname=d").split()) == {"host=h", "port=5", "dbname=d"}
    assert safe_dsn("") == "(defaults)"
    assert "user=alice" in safe_dsn(f"postgresql://alice:{PW}@h/d")


def test_explain_connect_error_scrubs_the_message():
    e = Exception(f'could not connect with "postgresql://u:{PW}@h/d" password={PW}')
    err = explain_connect_error(e, "the server")
    assert PW not in err.message
    err = explain_connect_error(Exception(f"bare {PW} in text"), "x", secret=PW)
    assert PW not in err.message


def test_libpq_env_inherits_the_users_environment_dsn_wins():
    base = {"PGAPPNAME": "from-env", "PGSSLMODE": "prefer", "PGPASSFILE": "/p",
            "PGSERVICEFILE": "/s", "PGUSER": "envuser", "PATH": "/bin"}
    env = libpq_env(f"host=h port=7 dbname=db user=dsnuser password={PW}",
                    "-c work_mem=4MB", base=base)
    assert env["PGAPPNAME"] == "from-env" and env["PGSSLMODE"] == "prefer"
    assert env["PGPASSFILE"] == "/p" and env["PGSERVICEFILE"] == "/s" and env["PATH"] == "/bin"
    assert env["PGUSER"] == "dsnuser" and env["PGPASSWORD"] == PW     # DSN keys win
    assert env["PGHOST"] == "h" and env["PGPORT"] == "7" and env["PGDATABASE"] == "db"
    assert env["PGOPTIONS"] == "-c work_mem=4MB"
    env = libpq_env("host=h application_name=dsn-app", base=base)
    assert env["PGAPPNAME"] == "dsn-app" and env["PGUSER"] == "envuser"


# -- the commands --------------------------------------------------------------------------
BAD_DSN = f"postgresql://alice:{PW}@[::1"
UNREACHABLE = f"postgresql://alice:{PW}@127.0.0.1:1/postgres"
UNREACHABLE_KV = f"host=127.0.0.1 port=1 user=alice password='{PW} x'"


def _one_paragraph(r):
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    assert PW not in r.stdout and PW not in r.stderr, r.stdout + r.stderr
    text = r.stderr.strip()
    assert text.startswith("pgaccel:") and "\n\n" not in text, text


@pytest.mark.parametrize("cmd", [["run", "--quick"], ["bench"], ["tune"], ["probe"]])
def test_malformed_dsn_is_a_usage_error(cmd):
    r = pgaccel(*cmd, "--dsn", BAD_DSN, timeout=120)
    assert r.returncode == 2, r.stderr
    _one_paragraph(r)
    assert "not a valid connection string" in r.stderr


@pytest.mark.parametrize("cmd", [["run", "--quick"], ["bench"], ["tune"], ["probe"]])
@pytest.mark.parametrize("dsn", [UNREACHABLE, UNREACHABLE_KV])
def test_unreachable_dsn_cannot_connect(cmd, dsn):
    r = pgaccel(*cmd, "--dsn", dsn, timeout=120)
    assert r.returncode == 5, r.stderr
    _one_paragraph(r)
    assert "127.0.0.1" in r.stderr


def test_probe_never_copies_a_password_from_a_setting(cluster):
    """A standby's primary_conninfo may hold a password; probe's non-default settings (also
    written to run.json) show it scrubbed."""
    from pgaccel.server.database import Database
    secret = "Pr1mary-S3cret"
    with cluster.connect() as conn:
        conn.execute(f"ALTER SYSTEM SET primary_conninfo = 'host=10.0.0.9 user=rep "
                     f"password={secret}'")
        conn.execute("SELECT pg_reload_conf()")
    try:
        import time
        for _ in range(50):
            with cluster.connect() as conn:
                facts = Database(conn).facts()
            rows = {r["name"]: r for r in facts["non_default_settings"]}
            if "primary_conninfo" in rows:
                break
            time.sleep(0.1)
        assert "primary_conninfo" in rows
        assert secret not in str(facts) and "host=10.0.0.9" in rows["primary_conninfo"]["setting"]
    finally:
        with cluster.connect() as conn:
            conn.execute("ALTER SYSTEM RESET primary_conninfo")
            conn.execute("SELECT pg_reload_conf()")
