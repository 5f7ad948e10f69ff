"""Bad-data cases for the repository's CLI conformance check (``tools/conformance.py``).

``nan_data(tmp)`` writes an MMLU CSV (HF layout) whose answer cell is ``nan`` and returns, per subcommand
with a data flag, the argv (without ``--out``) and the flag the error must name.
"""

from __future__ import annotations

from pathlib import Path

HEADER = "question,choice0,choice1,choice2,choice3,answer\n"


def nan_csv(tmp: Path) -> Path:
    path = tmp / "nan-mmlu" / "anatomy_test.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [f"Question {i}?,a{i},b{i},c{i},d{i},{i % 4}" for i in range(30)]
    rows[3] = "Question 3?,a,b,c,d,nan"
    path.write_text(HEADER + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def nan_data(tmp: Path) -> dict[str, tuple[list[str], str] | str]:
    f = nan_csv(tmp)
    model = ["--model", "tiny-clm"]
    return {
        "evaluate": ([*model, "--data", str(f)], "--data"),
        "finetune": ([*model, "--data", str(f), "--method", "rcft"], "--data"),
        "regime": ([*model, "--data", str(f)], "--data"),
        "demo": (["--data", str(f)], "--data"),
    }
