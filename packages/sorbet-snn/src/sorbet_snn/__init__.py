"""sorbet-snn: Sorbet, a neuromorphic-hardware-compatible spiking language model (Tang, Yan & Wong,
ICML 2025): PTsoftmax, BSPN, binary weights, power-of-two activation quantisers, IF spike re-encoding,
multi-step distillation from a HuggingFace BERT teacher, and an op-count energy model."""

from importlib.metadata import version

from .config import STAGES, SorbetConfig, stage_config
from .modeling import (
    ConversionReport,
    SorbetForSequenceClassification,
    SorbetModel,
    SpikeRecorder,
    SpikeSettings,
    convert_teacher,
    reset_spike_state,
    to_snn,
)
from .neuron import IFNeuron, if_closed_form, if_counts, if_simulate, threshold
from .ops import BSPN, BinaryWeight, LSQQuantizer, binarize, npot, pot, ptsoftmax

__version__ = version("sorbet-snn")

__all__ = [
    "BSPN",
    "STAGES",
    "BinaryWeight",
    "ConversionReport",
    "IFNeuron",
    "LSQQuantizer",
    "SorbetConfig",
    "SorbetForSequenceClassification",
    "SorbetModel",
    "SpikeRecorder",
    "SpikeSettings",
    "__version__",
    "binarize",
    "convert_teacher",
    "if_closed_form",
    "if_counts",
    "if_simulate",
    "npot",
    "pot",
    "ptsoftmax",
    "reset_spike_state",
    "stage_config",
    "threshold",
    "to_snn",
]
