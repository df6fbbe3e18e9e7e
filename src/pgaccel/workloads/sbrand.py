"""sysbench's id distributions as pgbench expressions, so the pgbench twin of an OLTP
script draws ids the way sysbench itself does.

sysbench 1.0 (Debian 12's package) draws every id of its OLTP scripts with
``sysbench.rand.default(1, table_size)``, whose distribution is ``--rand-type``: *special*
unless told otherwise (sysbench 1.1 changed the default to uniform).  *special* with its
defaults (``--rand-spec-iter=12 --rand-spec-pct=1 --rand-spec-res=75``) works on ``t = b - a``
and one uniform number ``u`` in [0, 1):

* with probability ``(100 - res)%`` (``u * t * 100 / (100 - res) < t``): the mean of
  ``iter`` uniform numbers, scaled to the range: ``a + mean * t`` (bell-shaped around the
  middle);
* otherwise: ``a + trunc(u * (t * pct/100 + 1) + t/2 - t * pct/200)``, a narrow band just
  above the middle of the range: with the defaults and 100,000 rows, 75% of all ids fall in
  750 rows (ids 49,751..50,500).

That is sb_rand_special() of sysbench's src/sb_rand.c; the test draws from the real sysbench
binary and compares.
"""

from __future__ import annotations

RAND_TYPES = ("special", "uniform")

# sysbench's defaults for the special distribution
SPEC_ITER, SPEC_PCT, SPEC_RES = 12, 1, 75
_SCALE = 1_000_000_000          # u = random(0, _SCALE - 1) / _SCALE: a double in [0, 1)


def id_set_lines(var: str, size: str, rand_type: str, *, iter_: int = SPEC_ITER,
                 pct: int = SPEC_PCT, res: int = SPEC_RES) -> list[str]:
    """pgbench meta-commands that set ``:var`` to an id in [1, ``size``] drawn as sysbench's
    ``rand.default(1, size)`` does.  ``size`` is a pgbench expression (``:table_size``)."""
    if rand_type == "uniform":
        return [f"\\set {var} random(1, {size})"]
    if rand_type != "special":
        raise ValueError(f"unknown rand_type {rand_type!r}")
    u = f"{var}_u"
    t = f"({size} - 1)"
    # u * t * 100 / (100 - res) < t  <=>  u < (100 - res) / 100  (for t > 0)
    cut = _SCALE * (100 - res) // 100
    mean = " + ".join([f"random(0, {_SCALE - 1})"] * iter_)
    bell = f"1 + int(({mean}) / {float(_SCALE) * iter_!r} * {t})"
    band = (f"1 + int(:{u} / {float(_SCALE)!r} * ({t} * {pct / 100!r} + 1) + {t} / 2.0 "
            f"- {t} * {pct / 200!r})")
    return [f"\\set {u} random(0, {_SCALE - 1})",
            f"\\set {var} CASE WHEN :{u} < {cut} THEN {bell} ELSE {band} END"]


def special(u: float, uniforms: list[float], a: int, b: int, *, pct: int = SPEC_PCT,
            res: int = SPEC_RES) -> int:
    """sysbench's special draw for given uniform numbers (``u`` decides the branch,
    ``uniforms`` are the bell's): the reference the pgbench expression is tested against."""
    t = b - a
    if u * t * (100.0 / (100 - res)) < t:
        return a + int(sum(uniforms) * t / len(uniforms))
    return a + int(u * (t * pct / 100.0 + 1) + t / 2 - t * pct / 200.0)
