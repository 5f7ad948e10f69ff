"""Bad-data cases for the repository's CLI conformance check (``tools/conformance.py``).

``nan_data(tmp)`` writes a GLUE SST-2 folder whose ``train.tsv`` and ``dev.tsv`` hold a ``nan`` label
and returns, per subcommand with a data flag, the argv (without ``--out``) and the flag the error must
name. The data is read before any model, so an empty ``--model`` folder is enough.
"""

from __future__ import annotations

from pathlib import Path


def nan_data(tmp: Path) -> dict[str, tuple[list[str], str] | str]:
    folder = tmp / "SST-2"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        (folder / f"{split}.tsv").write_text("sentence\tlabel\na fine film\t1\na dull one\tnan\n")
    model = tmp / "empty-model"
    model.mkdir(exist_ok=True)
    return {
        "distill": (["--data", str(folder), "--teacher", str(model)], "--data"),
        "evaluate": (["--data", str(folder), "--task", "SST-2", "--model", str(model)], "--data"),
        "energy": (["--data", str(folder), "--task", "SST-2", "--model", str(model)], "--data"),
        "export": "export reads only a model folder (--model), no data file",
        "demo": "demo runs on its embedded generator and takes no data path",
    }
