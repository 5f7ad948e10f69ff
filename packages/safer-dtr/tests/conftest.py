import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings

torch.set_num_threads(1)
settings.register_profile("safer", database=None, deadline=None, max_examples=40)
settings.load_profile("safer")


def data_root() -> Path:
    default = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return Path(os.environ.get("ICML25_DATA", default))


@pytest.fixture(scope="session")
def small_cohort():
    """A 300-stay synthetic cohort, its sequences and a prepared (hashing-encoded) cohort."""
    import safer_dtr as S

    gen = S.SyntheticSepsisCohort(n_stays=300, seed=3)
    seq = gen.sequences()
    prepared = S.prepare_cohort(seq, S.HashingEncoder(64), split_seed=0)
    return gen, seq, prepared
