"""The delta of ``delta="auto"``: a public function of the number of rows.

The rule is ``default_delta(n) = min(1e-5, 1 / (10 n))``:

* **Far below 1 / n at every size.** A guarantee with ``delta >= 1/n`` allows a
  mechanism that publishes each record whole with probability ``delta``, hence
  about ``n * delta >= 1`` records; skdp warns about such a delta. The rule
  keeps ``n * delta <= 0.1`` for every ``n``, which is what that warning
  advises, so a default fit never triggers it.
* **1e-5 up to 10,000 rows**, the value the estimators used before the rule
  existed and the one the recorded benchmarks at those sizes used: fits there
  are unchanged (same noise, same models for the same seed). Above, ``1/(10 n)``
  continues it without a jump (``1e-6`` at 100,000 rows, ``1e-8`` at 10^7).
* **Cheap where it applies.** Gaussian noise calibrated to (epsilon, delta)
  grows slowly as delta falls: at epsilon = 1 it is 1.13 times larger at
  ``1e-6`` than at ``1e-5`` and 1.37 times larger at ``1e-8``, while the noise
  on a mean over the rows falls like ``1 / n`` (1000 times smaller at
  ``n = 10^7`` than at ``n = 10^4``).

The number of rows is public (replace-one neighbours, see the privacy
contract), so a delta computed from it reveals nothing about the data.
"""

import numbers

__all__ = ["default_delta"]

_SMALL_TABLE_DELTA = 1e-5
_ROWS_PER_RECORD_RISK = 10.0


def default_delta(n_samples):
    """The delta that ``delta="auto"`` gives a fit on ``n_samples`` rows.

    ``min(1e-5, 1 / (10 * n_samples))``: 1e-5 up to 10,000 rows (the estimators'
    earlier default), then ten times below ``1 / n_samples``, so that a default
    fit never gets the ``PrivacyLeakWarning`` about a delta that is not below
    ``1 / n_samples``.

    Parameters
    ----------
    n_samples : int >= 1
        Number of rows of the training data (public).

    Returns
    -------
    float

    Examples
    --------
    >>> from skdp.accounting import default_delta
    >>> default_delta(5_000), default_delta(10_000), default_delta(100_000), default_delta(10**7)
    (1e-05, 1e-05, 1e-06, 1e-08)
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive integer; got {n_samples!r}.")
    return min(_SMALL_TABLE_DELTA, 1.0 / (_ROWS_PER_RECORD_RISK * int(n_samples)))
