"""LSD (Park et al., ICLR 2022): Lipschitz-constrained skill discovery, as METRA's ``--dual_reg 0
--spectral_normalization 1``.

φ maximises ``(φ(s')−φ(s))ᵀz`` with spectral normalisation on every layer (so φ is 1-Lipschitz in the
Euclidean state distance) and no dual variable; reward and zero-shot skill as in METRA.
"""

from __future__ import annotations

from .metra import METRA


class LSD(METRA):
    name = "lsd"
    spectral_norm = True
    use_dual = False
