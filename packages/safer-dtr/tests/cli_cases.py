"""NaN-holding inputs for the conformance check (tools/conformance.py)."""

from __future__ import annotations

from pathlib import Path


def _nan_folder(tmp: Path) -> Path:
    from safer_dtr.data import write_notes_csv, write_table_csv
    from safer_dtr.synthetic import SyntheticSepsisCohort

    folder = tmp / "cohort-with-nan"
    folder.mkdir(parents=True, exist_ok=True)
    gen = SyntheticSepsisCohort(n_stays=30, seed=0)
    table = {k: v.copy() for k, v in gen.table.items()}
    table["HR"][5] = float("nan")
    write_table_csv(folder / "mimictable.csv", table)
    write_notes_csv(folder / "notes.csv", gen.notes)
    return folder


def nan_data(tmp: Path) -> dict[str, tuple[list[str], str] | str]:
    folder = _nan_folder(tmp)
    fake_checkpoint = tmp / "model.pt"
    fake_checkpoint.write_bytes(b"not read: --data is validated first")
    return {
        "train": (["--data", str(folder)], "--data"),
        "recommend": (["--data", str(folder), "--checkpoint", str(fake_checkpoint)], "--data"),
        "evaluate": (["--data", str(folder), "--checkpoint", str(fake_checkpoint)], "--data"),
        "generate": "generate reads no data",
        "demo": "demo runs on the embedded synthetic cohort only",
    }
