"""Noise awareness: a trial's share of the machine taken by other processes or the
hypervisor, and drift of a config's throughput across rounds (pure, known values)."""

from __future__ import annotations

import pytest

from pgaccel.lab import judge
from pgaccel.lab.model import Trial
from pgaccel.lab.stats import drift
from pgaccel.metrics.noise import host_noise


@pytest.mark.parametrize("busy, steal, server, client, other, steal_share, noisy", [
    (10.0, 0.0, 6.0, 2.0, 0.10, 0.0, False),     # 2 s of 20: exactly the limit, not above
    (12.0, 0.0, 6.0, 2.0, 0.20, 0.0, True),      # 4 s of 20 CPU-seconds elsewhere
    (9.5, 1.5, 6.0, 2.0, 0.0, 0.075, True),      # steal 1.5 s of 20
    (8.0, 0.0, 6.0, 3.0, 0.0, 0.0, False),       # counters overlap: never negative
])
def test_host_noise_shares(busy, steal, server, client, other, steal_share, noisy):
    m = {"host_cpu_total_s": 20.0, "host_cpu_busy_s": busy, "host_steal_s": steal,
         "server_cpu_s": server, "client_cpu_s": client}
    n = host_noise(m)
    assert n["other_cpu_share"] == pytest.approx(other)
    assert n["steal_share"] == pytest.approx(steal_share)
    assert n["loadgen_share"] == pytest.approx(client / 20)
    assert n["noisy"] is noisy and (("steal" in n["why"]) == (steal_share > 0.05))
    assert host_noise({"host_cpu_busy_s": 1.0}) is None


def test_drift_of_a_known_trend():
    d = drift([100.0, 110.0, 121.0], [0, 1, 2])            # exactly +10% a round
    assert d.per_round == pytest.approx(0.10) and d.total == pytest.approx(0.21)
    assert d.significant and d.rounds == 3
    flat = drift([100.0, 103.0, 99.0, 101.0, 98.0], [0, 1, 2, 3, 4])
    assert not flat.significant
    small = drift([100.0, 101.0, 102.01], [0, 1, 2])        # real but 2% in total: < 5%
    assert small.p_value < 0.05 and not small.significant
    assert drift([100.0, 120.0], [0, 1]) is None            # two rounds say nothing
    assert drift([100.0, 0.0, 120.0], [0, 1, 2]) is None


def test_variant_summary_counts_noisy_trials_and_flags_drift():
    def t(rnd, tps, noisy=False):
        m = {"noise": {"noisy": noisy, "why": "other processes used 30% of the machine's CPU"
                       if noisy else ""}}
        return Trial("A", "select-only", rnd, 2, 0.0, tps, "tps", m)
    v = judge.variant_summary([t(0, 100), t(1, 120, True), t(2, 144)])
    assert v.noisy_trials == 1 and "30%" in v.noise_why
    assert v.drifting and v.drift_per_round == pytest.approx(0.2)
    v = judge.variant_summary([t(0, 100), t(1, 101), t(2, 99)])
    assert v.noisy_trials == 0 and not v.drifting
