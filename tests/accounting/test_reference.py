"""Reference values of the accounting (from dp-accounting, see specs/anchors.md section 2)."""

import math

import numpy as np
import pytest

from skdp.accounting import (
    ApproxDPRelease,
    ExponentialMechanismRelease,
    GaussianRelease,
    LaplaceRelease,
    Parallel,
    PoissonSampled,
    Repeated,
    Sequential,
    ZCDPRelease,
    calibrate_gaussian,
    dp_to_gdp,
    dp_to_zcdp,
    gdp_to_dp,
    zcdp_to_dp,
)


def test_zcdp_half_at_1e6():
    # dp-accounting's RDP accountant: 5.2215 (order 5.9); a continuous order can
    # only be tighter, by at most the grid's resolution.
    eps = ZCDPRelease(0.5).epsilon(1e-6)
    assert 5.2210 <= eps <= 5.2216


def test_single_gaussian_exact_curve():
    assert GaussianRelease(1.0, 1.0).epsilon(1e-6) == pytest.approx(4.8866, abs=1e-4)
    assert gdp_to_dp(1.0, 1e-6) == pytest.approx(4.886554117462, rel=1e-9)


def test_dpsgd_between_pld_and_rdp():
    steps = Repeated(PoissonSampled(GaussianRelease(1.0, 1.1), 0.01), 1000)
    eps = steps.epsilon(1e-5)
    assert 1.5154 <= eps <= 1.7118 + 1e-4


def test_gaussian_composition_is_exact_gdp():
    # Ten releases of mu = 0.3 compose to mu = 0.3 sqrt(10), exactly.
    ten = Repeated(GaussianRelease(0.3, 1.0), 10)
    single = GaussianRelease(0.3 * math.sqrt(10), 1.0)
    assert ten.epsilon(1e-5) == pytest.approx(single.epsilon(1e-5), rel=1e-12)
    assert ten.delta(1.0) == pytest.approx(single.delta(1.0), rel=1e-12)


def test_zcdp_composes_additively():
    assert Repeated(ZCDPRelease(0.05), 10).epsilon(1e-6) == pytest.approx(
        ZCDPRelease(0.5).epsilon(1e-6), rel=1e-12
    )


def test_pure_laplace_composition_is_exact_at_delta_zero():
    ev = Sequential([LaplaceRelease(1.0, 2.0), LaplaceRelease(2.0, 1.0), LaplaceRelease(1.0, 4.0)])
    assert ev.epsilon(0.0) == pytest.approx(0.5 + 2.0 + 0.25)
    assert ev.delta(2.75) == 0.0


def test_laplace_exact_profile():
    # delta(eps) = 1 - exp((eps - eps0) / 2) for one Laplace release; dp-accounting's
    # PLD gives 0.22120 at eps = 0.5 for eps0 = 1.
    assert LaplaceRelease(1.0, 1.0).delta(0.5) == pytest.approx(0.2211992169, rel=1e-8)
    assert LaplaceRelease(1.0, 1.0).epsilon(1e-6) == pytest.approx(1.0 + 2 * math.log1p(-1e-6))


def test_gaussian_with_laplace_beats_rdp():
    # Laplace(b=1) + 10 Gaussian(sigma=2) at delta=1e-6: RDP 9.67, PLD 9.12 (anchors.md).
    ev = Sequential([LaplaceRelease(1.0, 1.0), Repeated(GaussianRelease(1.0, 2.0), 10)])
    eps = ev.epsilon(1e-6)
    assert 9.12 <= eps <= 9.67


def test_textbook_zcdp_bound_is_looser():
    rho, delta = 0.5, 1e-6
    assert zcdp_to_dp(rho, delta) < rho + 2 * math.sqrt(rho * math.log(1 / delta))


def test_calibration_examples_from_spec():
    # seed_003 spec section 4.3: eps = 1 gives rho_total = 0.0306 at 1e-5, 0.0244 at 1e-6.
    assert dp_to_zcdp(1.0, 1e-5) == pytest.approx(0.0306, abs=1e-4)
    assert dp_to_zcdp(1.0, 1e-6) == pytest.approx(0.0244, abs=1e-4)


def test_parallel_is_the_max():
    a, b = GaussianRelease(1.0, 1.0), LaplaceRelease(1.0, 0.5)
    assert Parallel([a, b]).epsilon(1e-6) == max(a.epsilon(1e-6), b.epsilon(1e-6))
    assert Parallel([a, b]).delta(2.0) == max(a.delta(2.0), b.delta(2.0))


def test_approx_dp_basic_composition():
    ev = Sequential([ApproxDPRelease(0.5, 1e-6), ApproxDPRelease(0.25, 2e-6)])
    assert ev.epsilon(3e-6) == pytest.approx(0.75)
    assert ev.epsilon(2e-6) == math.inf


def test_approx_dp_profile_tightens_with_more_delta():
    ev = ApproxDPRelease(1.0, 1e-6)
    assert ev.epsilon(1e-6) == 1.0
    assert ev.epsilon(0.1) < 1.0
    # Consistency of the two directions of the profile.
    assert ev.delta(ev.epsilon(0.1)) == pytest.approx(0.1, rel=1e-9)


def test_exponential_mechanism_uses_bounded_range():
    # 100 exponential-mechanism draws at eps0 = 0.1 cost far less than 10 (basic
    # composition) thanks to the eps0^2/8-zCDP description.
    ev = Repeated(ExponentialMechanismRelease(0.1), 100)
    assert ev.epsilon(0.0) == pytest.approx(10.0)
    # Equal to the eps^2/8-zCDP value up to the order grid (the zCDP curve is
    # refined continuously, the mixed exponential-mechanism curve is not).
    assert ev.epsilon(1e-6) <= ZCDPRelease(100 * 0.1**2 / 8).epsilon(1e-6) * (1 + 1e-4)


def test_non_private_and_empty_events():
    assert GaussianRelease(1.0, 0.0).epsilon(1e-5) == math.inf
    assert GaussianRelease(0.0, 1.0).epsilon(1e-5) == 0.0
    assert Sequential([]).epsilon(1e-5) == 0.0
    assert Parallel([]).epsilon(1e-5) == 0.0
    assert Repeated(GaussianRelease(1.0, 1.0), 0).epsilon(1e-5) == 0.0
    assert GaussianRelease(1.0, 1.0).epsilon(1.0) == 0.0


@pytest.mark.parametrize(
    "bad",
    [
        lambda: GaussianRelease(-1.0, 1.0),
        lambda: GaussianRelease(1.0, -1.0),
        lambda: LaplaceRelease(float("nan"), 1.0),
        lambda: ZCDPRelease(-0.1),
        lambda: ApproxDPRelease(1.0, 1.5),
        lambda: Repeated(GaussianRelease(1.0, 1.0), 2.5),
        lambda: PoissonSampled(LaplaceRelease(1.0, 1.0), 0.1),
        lambda: PoissonSampled(GaussianRelease(1.0, 1.0), 1.5),
        lambda: Sequential([1.0]),
        lambda: GaussianRelease(1.0, 1.0).epsilon(-0.1),
        lambda: GaussianRelease(1.0, 1.0).delta(-1.0),
    ],
)
def test_invalid_events_are_rejected(bad):
    with pytest.raises((ValueError, TypeError)):
        bad()


def test_events_are_immutable_and_hashable():
    ev = GaussianRelease(1.0, 2.0)
    with pytest.raises(AttributeError):
        ev.noise_std = 3.0
    assert {ev, GaussianRelease(1.0, 2.0)} == {ev}


def test_dp_to_gdp_inverts_gdp_to_dp():
    mu = dp_to_gdp(1.0, 1e-5)
    assert gdp_to_dp(mu, 1e-5) == pytest.approx(1.0, rel=1e-9)
    assert gdp_to_dp(mu, 1e-5) <= 1.0


def test_poisson_rate_one_and_zero():
    g = GaussianRelease(1.0, 2.0)
    assert PoissonSampled(g, 1.0).epsilon(1e-5) == pytest.approx(g.epsilon(1e-5))
    assert PoissonSampled(g, 0.0).epsilon(1e-5) == 0.0


def test_poisson_sampled_dominates_exact_replace_one_divergence():
    """Under replace-one, the sampled pair is (1-q)N(0)+qN(c) vs (1-q)N(0)+qN(-c).

    The add/remove formula with the replace-one sensitivity 2c (what the docstring
    tells users to pass) must bound its Renyi divergence.
    """
    from skdp.accounting._subsampled import poisson_gaussian_rdp

    def log_pdf(z, m, s):
        return -0.5 * ((z - m) / s) ** 2 - np.log(s * np.sqrt(2 * np.pi))

    for q, s, a in [(0.01, 1.0, 2.0), (0.1, 1.0, 4.0), (0.3, 2.0, 3.0), (0.05, 0.7, 5.0),
                    (0.5, 1.5, 2.0), (0.2, 0.6, 10.0), (0.9, 3.0, 1.5)]:
        z = np.linspace(-60 * s - 5 * a, 60 * s + 5 * a, 400001)
        lp = np.logaddexp(np.log1p(-q) + log_pdf(z, 0, s), np.log(q) + log_pdf(z, 1.0, s))
        lq = np.logaddexp(np.log1p(-q) + log_pdf(z, 0, s), np.log(q) + log_pdf(z, -1.0, s))
        v = a * lp + (1 - a) * lq
        exact = (v.max() + np.log(np.trapezoid(np.exp(v - v.max()), z))) / (a - 1)
        bound = poisson_gaussian_rdp(q, s / 2.0, [a])[0]  # sensitivity 2 with std s
        assert exact <= bound


def test_many_distinct_approximate_releases_compose():
    ev = Sequential([ApproxDPRelease(0.1 * (i + 1), 1e-7) for i in range(7)])
    assert ev.epsilon(1e-5) == pytest.approx(2.8)
    assert ev.delta(3.0) <= 1e-6


def test_conversions_never_overspend_at_extreme_parameters():
    mu = dp_to_gdp(3e15, 1e-5)
    assert gdp_to_dp(mu, 1e-5) <= 3e15
    assert dp_to_gdp(1.0, 1e-300) == 0.0
    std = calibrate_gaussian(1.0, 1.0, 1e-200)
    assert GaussianRelease(1.0, std).epsilon(1e-200) <= 1.0
