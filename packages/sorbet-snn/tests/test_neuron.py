from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from sorbet_snn import IFNeuron, if_closed_form, if_counts, if_simulate, threshold

LEVELS = torch.arange(-5, 41)


@pytest.mark.parametrize(
    ("steps", "mode"),
    [(t, "exact") for t in (1, 2, 4, 8, 16, 32)] + [(t, "official") for t in (1, 2, 4, 8, 16)],
)
def test_simulator_equals_closed_form_bit_for_bit(steps, mode):
    theta = threshold(steps, mode)
    sim = if_simulate(LEVELS, steps, theta)
    closed = if_closed_form(LEVELS, steps, theta)
    assert torch.equal(sim, closed)
    assert torch.equal(sim.sum(0).long(), if_counts(LEVELS, steps, theta))


@given(
    st.lists(st.integers(-50, 200), min_size=1, max_size=30),
    st.integers(1, 40),
    st.integers(1, 500),
    st.integers(1, 100),
)
def test_simulator_equals_closed_form_random_rational_thresholds(levels, steps, num, den):
    theta = Fraction(num, den)
    x = torch.tensor(levels)
    assert torch.equal(if_simulate(x, steps, theta), if_closed_form(x, steps, theta))


def test_official_threshold_value_and_large_t_error():
    assert threshold(16) == Fraction(15199905, 1000000)
    with pytest.raises(ValueError, match="exact"):
        threshold(32, "official")


@pytest.mark.parametrize("steps", [1, 2, 4, 8, 16])
def test_count_equals_level_official(steps):
    q = torch.arange(0, steps)
    assert torch.equal(if_counts(q, steps, threshold(steps)), q)


@pytest.mark.parametrize("steps", [1, 2, 4, 8, 16, 32, 64])
def test_count_equals_level_exact(steps):
    q = torch.arange(0, steps + 1)
    assert torch.equal(if_counts(q, steps, threshold(steps, "exact")), q)


def test_negative_input_never_fires_and_large_input_fires_every_step():
    theta = threshold(16)
    assert if_simulate(torch.tensor([-3, -1]), 16, theta).sum() == 0
    assert bool((if_simulate(torch.tensor([16, 40]), 16, theta) == 1).all())


def test_simulator_rejects_non_integer_levels():
    with pytest.raises(ValueError, match="integer"):
        if_simulate(torch.tensor([0.5, 1.0]), 4, 4)
    with pytest.raises(ValueError, match="NaN"):
        if_simulate(torch.tensor([float("nan")]), 4, 4)


def test_decoding_identities():
    steps = 16
    theta = threshold(steps)
    q = torch.arange(-8, 8)
    spikes = if_simulate(q + steps // 2, steps, theta).double()
    assert torch.equal((spikes - 0.5).sum(0), q.double())  # signed offset code
    u = torch.arange(0, 16)
    assert torch.equal(if_simulate(u, steps, theta).sum(0).long(), u)  # unsigned


def test_neuron_state_is_reset_between_inputs():
    neuron = IFNeuron(Fraction(4))
    neuron.step(torch.tensor([3]))  # charge left on the membrane
    carried = neuron.step(torch.tensor([3]))
    assert carried.item() == 1  # without a reset the next input inherits the charge
    neuron.reset()
    assert neuron.step(torch.tensor([3])).item() == 0
    first = neuron(torch.tensor([3]), 4)
    again = neuron(torch.tensor([3]), 4)  # forward resets: same trains twice
    assert torch.equal(first, again) and neuron.membrane is None


@pytest.mark.reference
def test_spikingjelly_ifnode_agrees():
    sj = pytest.importorskip("spikingjelly.activation_based.neuron")
    node = sj.IFNode(v_threshold=4.0, v_reset=None, step_mode="m")
    x = torch.arange(0, 6).float()
    out = node(x.expand(8, -1).clone())
    assert torch.equal(out.to(torch.uint8), if_simulate(x.long(), 8, 4))
