"""sorbet-snn: Sorbet, a neuromorphic-hardware-compatible spiking language model (Tang, Yan & Wong,
ICML 2025): PTsoftmax, BSPN, binary weights, power-of-two activation quantisers, IF spike re-encoding,
multi-step distillation from a HuggingFace BERT teacher, and an op-count energy model.

The names below load on first use (PEP 562), so ``sorbet-snn --help`` and :mod:`sorbet_snn.config` do
not import torch or transformers. Loading a model name (e.g. ``SorbetForSequenceClassification``)
registers ``SorbetConfig`` with ``AutoConfig``/``AutoModel``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

__version__ = importlib.metadata.version("sorbet-snn")

# name -> submodule that defines it
_LAZY = {
    "DistillConfig": "config",
    "EvaluateConfig": "config",
    "ExportConfig": "config",
    "EnergyConfig": "config",
    "DemoConfig": "config",
    "ConfigError": "config",
    "run_distill": "experiments",
    "run_evaluate": "experiments",
    "run_export": "experiments",
    "run_energy": "experiments",
    "run_demo": "experiments",
    "STAGES": "configuration_sorbet",
    "SorbetConfig": "configuration_sorbet",
    "stage_config": "configuration_sorbet",
    "ConversionReport": "modeling",
    "SorbetForSequenceClassification": "modeling",
    "SorbetModel": "modeling",
    "SpikeRecorder": "modeling",
    "SpikeSettings": "modeling",
    "convert_teacher": "modeling",
    "reset_spike_state": "modeling",
    "to_snn": "modeling",
    "IFNeuron": "neuron",
    "if_closed_form": "neuron",
    "if_counts": "neuron",
    "if_simulate": "neuron",
    "threshold": "neuron",
    "BSPN": "ops",
    "BinaryWeight": "ops",
    "LSQQuantizer": "ops",
    "binarize": "ops",
    "npot": "ops",
    "pot": "ops",
    "ptsoftmax": "ops",
}

__all__ = [
    "BSPN",
    "STAGES",
    "BinaryWeight",
    "ConfigError",
    "ConversionReport",
    "DemoConfig",
    "DistillConfig",
    "EnergyConfig",
    "EvaluateConfig",
    "ExportConfig",
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
    "run_demo",
    "run_distill",
    "run_energy",
    "run_evaluate",
    "run_export",
    "stage_config",
    "threshold",
    "to_snn",
]

if TYPE_CHECKING:
    from .config import (
        ConfigError,
        DemoConfig,
        DistillConfig,
        EnergyConfig,
        EvaluateConfig,
        ExportConfig,
    )
    from .configuration_sorbet import STAGES, SorbetConfig, stage_config
    from .experiments import run_demo, run_distill, run_energy, run_evaluate, run_export
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


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
