"""AI-Clinician-style cohort loading: CSV I/O with validation, sequences, preprocessing, splits.

One code path serves the synthetic cohort (:class:`~safer_dtr.synthetic.SyntheticSepsisCohort`) and real
tables (the AI-Clinician ``mimictable.csv`` of ``uribyul/py_ai_clinician`` or the ``MIMICtable.csv`` of
``microsoft/mimic_sepsis``, plus a prepared ``notes.csv`` with ``icustayid, charttime, text``), as in
paper Sec. 6.1 / App. C.1: keep stays with at least ``seq_len`` 4-hour blocs, take the first ``seq_len``
rows (rows ``0..seq_len-2`` are inputs, the treatment of the last row is the target), align one note to
each input row, clip / remove IQR outliers / kNN-impute, recompute running totals, label the target
action by a zero bin plus quartiles of the non-zero doses, and transform as AI-Clinician does. Every
statistic (outlier bounds, imputation reference rows, bin edges, z-scores) is fitted on training stays
only and stored with the model.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEMO_COLUMNS",
    "MEDS_COLUMNS",
    "MIMICTABLE_COLUMNS",
    "REQUIRED_COLUMNS",
    "VITALS_COLUMNS",
    "AIClinicianCohort",
    "CohortTensors",
    "Preprocessor",
    "Sequences",
    "action_class",
    "build_sequences",
    "read_notes_csv",
    "read_table_csv",
    "stratified_split",
    "validate_table",
    "write_notes_csv",
    "write_table_csv",
]

# ----------------------------------------------------------------------------- the table schema

MIMICTABLE_COLUMNS: tuple[str, ...] = (
    "bloc", "icustayid", "charttime", "gender", "age", "elixhauser", "re_admission", "died_in_hosp",
    "died_within_48h_of_out_time", "mortality_90d", "delay_end_of_record_and_discharge_or_death",
    "Weight_kg", "GCS", "HR", "SysBP", "MeanBP", "DiaBP", "RR", "SpO2", "Temp_C", "FiO2_1",
    "Potassium", "Sodium", "Chloride", "Glucose", "BUN", "Creatinine", "Magnesium", "Calcium",
    "Ionised_Ca", "CO2_mEqL", "SGOT", "SGPT", "Total_bili", "Albumin", "Hb", "WBC_count",
    "Platelets_count", "PTT", "PT", "INR", "Arterial_pH", "paO2", "paCO2", "Arterial_BE",
    "Arterial_lactate", "HCO3", "mechvent", "Shock_Index", "PaO2_FiO2", "median_dose_vaso",
    "max_dose_vaso", "input_total", "input_4hourly", "output_total", "output_4hourly",
    "cumulated_balance", "SOFA", "SIRS",
)  # fmt: skip
"""Columns of ``mimictable.csv`` in the order of the AI-Clinician pipeline's output."""

VITALS_COLUMNS: tuple[str, ...] = (
    "bloc", "elixhauser", "GCS", "HR", "SysBP", "MeanBP", "DiaBP", "RR", "SpO2", "Temp_C", "FiO2_1",
    "Potassium", "Sodium", "Chloride", "Glucose", "BUN", "Creatinine", "Magnesium", "Calcium",
    "Ionised_Ca", "CO2_mEqL", "SGOT", "SGPT", "Total_bili", "Albumin", "Hb", "WBC_count",
    "Platelets_count", "PTT", "PT", "INR", "Arterial_pH", "paO2", "paCO2", "Arterial_BE",
    "Arterial_lactate", "HCO3", "mechvent", "Shock_Index", "PaO2_FiO2", "output_total",
    "output_4hourly", "cumulated_balance", "SOFA", "SIRS",
)  # fmt: skip
"""The 45 time-varying tabular model inputs, in a fixed order (the official code took a Python set)."""

MEDS_COLUMNS: tuple[str, ...] = (
    "median_dose_vaso",
    "max_dose_vaso",
    "input_total",
    "input_4hourly",
)
DEMO_COLUMNS: tuple[str, ...] = ("gender", "age", "re_admission", "Weight_kg")

REQUIRED_COLUMNS: tuple[str, ...] = tuple(
    dict.fromkeys(
        (
            "bloc",
            "icustayid",
            "charttime",
            "died_in_hosp",
            *DEMO_COLUMNS,
            *VITALS_COLUMNS,
            *MEDS_COLUMNS,
        )
    )
)
"""Columns the loader needs (the model's 45 + 4 + 4 inputs, ids, time and the outcome)."""

BINARY_COLUMNS = ("gender", "re_admission", "mechvent", "died_in_hosp")
NONNEG_COLUMNS = ("median_dose_vaso", "max_dose_vaso", "input_4hourly", "output_4hourly")
KNN_COLUMNS = (
    "Temp_C", "SGOT", "SGPT", "Total_bili", "Creatinine", "WBC_count", "PT", "INR", "input_total",
    "output_total",
)  # fmt: skip
ZSCORE_COLUMNS = (
    "age", "Weight_kg", "GCS", "HR", "SysBP", "MeanBP", "DiaBP", "RR", "Temp_C", "FiO2_1", "Potassium",
    "Sodium", "Chloride", "Glucose", "Magnesium", "Calcium", "Hb", "WBC_count", "Platelets_count",
    "PTT", "PT", "Arterial_pH", "paO2", "paCO2", "Arterial_BE", "HCO3", "Arterial_lactate", "SOFA",
    "SIRS", "Shock_Index", "PaO2_FiO2", "cumulated_balance",
)  # fmt: skip
LOG_COLUMNS = (
    "SpO2", "BUN", "Creatinine", "SGOT", "SGPT", "Total_bili", "INR", "input_total", "input_4hourly",
    "output_total", "output_4hourly",
)  # fmt: skip
# left unscaled by the official notebook; z-scored here (official code bug 13 fixed)
EXTRA_ZSCORE_COLUMNS = (
    "bloc",
    "elixhauser",
    "Ionised_Ca",
    "CO2_mEqL",
    "Albumin",
    "median_dose_vaso",
)
CLIPS = {"input_4hourly": 100_000.0, "output_4hourly": 10_000.0, "max_dose_vaso": 1.0}
PICKLE_MAGIC = b"\x80"


# ---------------------------------------------------------------------------------------------- CSV


def _check_not_pickle(path: Path) -> None:
    with open(path, "rb") as fh:
        head = fh.read(2)
    if not head:
        raise ValueError(f"{path} is empty; expected a CSV file with a header row")
    if head[:1] == PICKLE_MAGIC:
        raise ValueError(
            f"{path} looks like a Python pickle (the official SAFER dataset is a pickle named .csv); "
            "pickles can run code when loaded and are not read: export the table as a real CSV"
        )


def read_table_csv(path: str | Path, columns: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Read a numeric CSV with a header row into ``{column: float array}``.

    Raises ``ValueError`` naming the file, the row (1-based, header = row 1) and the column for an empty
    file, a truncated row, a non-numeric cell, or a NaN/inf cell; and listing missing ``columns``.
    """
    path = Path(path)
    _check_not_pickle(path)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header:
            raise ValueError(f"{path} is empty; expected a CSV file with a header row")
        header = [h.strip() for h in header]
        dupes = sorted({h for h in header if header.count(h) > 1})
        if dupes:
            raise ValueError(f"{path}: duplicate column(s) {', '.join(dupes)}")
        if columns is not None:
            missing = [c for c in columns if c not in header]
            if missing:
                raise ValueError(
                    f"{path} lacks {len(missing)} required column(s): {', '.join(missing)}"
                )
        wanted = list(columns) if columns is not None else header
        index = [header.index(c) for c in wanted]
        rows = []
        for number, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(
                    f"{path}, row {number}: {len(row)} field(s), expected {len(header)} "
                    "(a truncated or malformed row)"
                )
            rows.append([row[i] for i in index])
    if not rows:
        raise ValueError(f"{path} has a header but no data rows")
    data = {}
    for j, name in enumerate(wanted):
        cells = [r[j] for r in rows]
        try:
            values = np.array(cells, dtype=float)
        except ValueError:
            for k, cell in enumerate(cells):
                try:
                    float(cell)
                except ValueError:
                    raise ValueError(
                        f"{path}, row {k + 2}, column {name!r}: {cell!r} is not a number"
                    ) from None
            raise
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise ValueError(
                f"{path}, row {bad[0] + 2}, column {name!r}: {cells[bad[0]]!r} is not a finite "
                f"number ({bad.size} such cell(s) in this column); impute or drop them first"
            )
        data[name] = values
    return data


def write_table_csv(path: str | Path, table: dict[str, np.ndarray]) -> Path:
    """Write ``{column: array}`` as a CSV (integers without a decimal point, floats with 6 significant
    digits beyond what round-trips exactly: ``repr``)."""
    path = Path(path)
    names = list(table)
    cols = [np.asarray(table[n], dtype=float) for n in names]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(names)
        for row in zip(*cols):
            writer.writerow([str(int(v)) if float(v).is_integer() else repr(float(v)) for v in row])
    return path


def read_notes_csv(path: str | Path) -> list[tuple[int, int, str]]:
    """Read ``icustayid, charttime, text`` (charttime in Unix seconds) into a list of tuples."""
    path = Path(path)
    _check_not_pickle(path)
    notes = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header:
            raise ValueError(f"{path} is empty; expected the columns icustayid, charttime, text")
        header = [h.strip() for h in header]
        missing = [c for c in ("icustayid", "charttime", "text") if c not in header]
        if missing:
            raise ValueError(f"{path} lacks column(s) {', '.join(missing)}")
        ii, it, ix = (header.index(c) for c in ("icustayid", "charttime", "text"))
        for number, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(
                    f"{path}, row {number}: {len(row)} field(s), expected {len(header)} "
                    "(a truncated row or an unquoted comma in the text)"
                )
            values = []
            for name, k in (("icustayid", ii), ("charttime", it)):
                try:
                    value = float(row[k])
                except ValueError:
                    raise ValueError(
                        f"{path}, row {number}, column {name!r}: {row[k]!r} is not a number"
                    ) from None
                if not math.isfinite(value) or not value.is_integer():
                    raise ValueError(
                        f"{path}, row {number}, column {name!r}: {row[k]!r} is not an integer"
                    )
                values.append(int(value))
            notes.append((values[0], values[1], row[ix]))
    return notes


def write_notes_csv(path: str | Path, notes: Sequence[tuple[int, int, str]]) -> Path:
    path = Path(path)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["icustayid", "charttime", "text"])
        for stay, time, text in notes:
            writer.writerow([int(stay), int(time), text])
    return path


def validate_table(table: dict[str, np.ndarray], name: str = "table") -> None:
    """Check required columns, finiteness, binary columns, non-negative doses and unique
    (icustayid, bloc) pairs; raise ``ValueError`` naming the column / row."""
    missing = [c for c in REQUIRED_COLUMNS if c not in table]
    if missing:
        raise ValueError(f"{name} lacks {len(missing)} required column(s): {', '.join(missing)}")
    n = len(table["icustayid"])
    for col in REQUIRED_COLUMNS:
        values = np.asarray(table[col], dtype=float)
        if values.shape != (n,):
            raise ValueError(f"{name}: column {col!r} has shape {values.shape}, expected ({n},)")
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise ValueError(f"{name}, data row {bad[0] + 1}, column {col!r}: not a finite number")
    for col in BINARY_COLUMNS:
        bad = np.flatnonzero(~np.isin(table[col], (0.0, 1.0)))
        if bad.size:
            raise ValueError(
                f"{name}, data row {bad[0] + 1}, column {col!r}: {table[col][bad[0]]!r} "
                "is not 0 or 1"
            )
    for col in NONNEG_COLUMNS:
        bad = np.flatnonzero(np.asarray(table[col]) < 0)
        if bad.size:
            raise ValueError(f"{name}, data row {bad[0] + 1}, column {col!r}: negative dose")
    for col in ("icustayid", "bloc"):
        bad = np.flatnonzero(~np.equal(np.mod(table[col], 1), 0))
        if bad.size:
            raise ValueError(
                f"{name}, data row {bad[0] + 1}, column {col!r}: {table[col][bad[0]]!r} "
                "is not an integer"
            )
    pairs = np.stack([table["icustayid"], table["bloc"]], 1)
    _, first, counts = np.unique(pairs, axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():
        k = int(first[np.flatnonzero(counts > 1)[0]])
        raise ValueError(
            f"{name}: duplicate (icustayid, bloc) = ({int(pairs[k, 0])}, {int(pairs[k, 1])}), "
            f"{int((counts > 1).sum())} duplicated pair(s)"
        )


# ---------------------------------------------------------------------------------------- sequences


@dataclass
class Sequences:
    """The first ``seq_len`` rows of every kept stay, raw (before preprocessing).

    ``values[col]`` has shape [S, seq_len]; ``note_text[i][t]`` is the note aligned to input row ``t``
    of stay ``i`` (``""`` when none); ``died`` is ``died_in_hosp`` of the target row.
    """

    stay_ids: np.ndarray
    values: dict[str, np.ndarray]
    note_text: list[list[str]]
    died: np.ndarray
    seq_len: int
    dropped_short: int = 0
    dropped_no_notes: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.stay_ids)


def _align(
    note_times: np.ndarray, note_texts: list[str], times: np.ndarray, mode: str
) -> list[str]:
    out = []
    for t in times:
        if not len(note_times):
            out.append("")
            continue
        if mode == "nearest":
            gap = np.abs(note_times - t)
            pick = np.flatnonzero(gap == gap.min())
        else:  # latest note at or before the bloc
            before = np.flatnonzero(note_times <= t)
            if not before.size:
                out.append("")
                continue
            latest = note_times[before].max()
            pick = before[note_times[before] == latest]
        out.append("; ".join(note_texts[k] for k in pick))
    return out


def build_sequences(
    table: dict[str, np.ndarray],
    notes: Sequence[tuple[int, int, str]] | None,
    *,
    seq_len: int = 8,
    note_alignment: str = "nearest",
    require_notes: bool | None = None,
    name: str = "table",
) -> Sequences:
    """Group ``table`` by stay, sort by charttime, keep stays with >= ``seq_len`` blocs (first
    ``seq_len`` rows) and align notes to the input rows.

    ``note_alignment``: ``"nearest"`` (minimal ``|Δt|``, ties joined with "; ", as in the paper; may look
    ahead) or ``"past"`` (the latest note at or before the bloc). ``require_notes`` (default: True when
    ``notes`` are given) drops stays without any note, as the official notebook does.
    """
    if seq_len < 2:
        raise ValueError(f"seq_len must be >= 2 (inputs + target), got {seq_len}")
    if note_alignment not in ("nearest", "past"):
        raise ValueError(f"note_alignment must be 'nearest' or 'past', got {note_alignment!r}")
    validate_table(table, name)
    if require_notes is None:
        require_notes = notes is not None
    ids = np.asarray(table["icustayid"], dtype=np.int64)
    order = np.lexsort((np.asarray(table["charttime"]), ids))
    ids_sorted = ids[order]
    starts = np.flatnonzero(np.r_[True, ids_sorted[1:] != ids_sorted[:-1]])
    lengths = np.diff(np.r_[starts, len(ids_sorted)])
    keep = lengths >= seq_len
    dropped_short = int((~keep).sum())
    rows = order[(starts[keep][:, None] + np.arange(seq_len)[None, :])]  # [S, seq_len]
    stay_ids = ids_sorted[starts[keep]]
    by_stay: dict[int, tuple[np.ndarray, list[str]]] = {}
    if notes:
        grouped: dict[int, list[tuple[int, str]]] = {}
        for stay, time, text in notes:
            grouped.setdefault(int(stay), []).append((int(time), text))
        by_stay = {
            k: (np.array([t for t, _ in v], dtype=np.int64), [x for _, x in v])
            for k, v in grouped.items()
        }
    dropped_no_notes = 0
    if require_notes:
        has = np.array([int(s) in by_stay for s in stay_ids], dtype=bool)
        dropped_no_notes = int((~has).sum())
        rows, stay_ids = rows[has], stay_ids[has]
    if len(stay_ids) == 0:
        raise ValueError(
            f"{name}: no stay left with at least {seq_len} blocs"
            + (" and at least one note" if require_notes else "")
            + f" ({dropped_short} stay(s) shorter than {seq_len} blocs, {dropped_no_notes} without "
            "notes)"
        )
    values = {c: np.asarray(table[c], dtype=float)[rows] for c in REQUIRED_COLUMNS}
    times = values["charttime"]
    note_text = []
    for i, stay in enumerate(stay_ids):
        nt, tx = by_stay.get(int(stay), (np.zeros(0, dtype=np.int64), []))
        note_text.append(_align(nt, tx, times[i, : seq_len - 1], note_alignment))
    died = values["died_in_hosp"][:, -1].astype(np.int64)
    return Sequences(
        stay_ids=stay_ids,
        values=values,
        note_text=note_text,
        died=died,
        seq_len=seq_len,
        dropped_short=dropped_short,
        dropped_no_notes=dropped_no_notes,
        info={"note_alignment": note_alignment, "stays_in_table": len(starts)},
    )


class AIClinicianCohort(Sequences):
    """Load an AI-Clinician ``mimictable.csv`` (+ optional ``notes.csv``) into :class:`Sequences`.

    Parameters
    ----------
    mimictable_csv : path
        The AI-Clinician table (``uribyul/py_ai_clinician`` ``mimictable.csv`` or the ``MIMICtable.csv``
        of ``microsoft/mimic_sepsis``); the columns in :data:`REQUIRED_COLUMNS` must be present.
    notes_csv : path, optional
        ``icustayid, charttime, text`` with charttime in Unix seconds, ids as in the table.
    seq_len, note_alignment, require_notes
        As in :func:`build_sequences` (defaults 8, ``"nearest"``, True when notes are given).
    """

    def __init__(
        self,
        mimictable_csv: str | Path,
        notes_csv: str | Path | None = None,
        *,
        seq_len: int = 8,
        note_alignment: str = "nearest",
        require_notes: bool | None = None,
    ) -> None:
        path = Path(mimictable_csv)
        table = read_table_csv(path, REQUIRED_COLUMNS)
        notes = read_notes_csv(notes_csv) if notes_csv is not None else None
        seq = build_sequences(
            table,
            notes,
            seq_len=seq_len,
            note_alignment=note_alignment,
            require_notes=require_notes,
            name=str(path),
        )
        super().__init__(**vars(seq))


# ---------------------------------------------------------------------------------- preprocessing


def action_class(vaso_bin: np.ndarray, fluid_bin: np.ndarray, layout: str = "safer") -> np.ndarray:
    """25-way class: ``vaso*5 + fluid`` (SAFER's layout) or ``fluid*5 + vaso`` (AI-Clinician's)."""
    if layout == "safer":
        return (np.asarray(vaso_bin) * 5 + np.asarray(fluid_bin)).astype(np.int64)
    if layout == "aiclinician":
        return (np.asarray(fluid_bin) * 5 + np.asarray(vaso_bin)).astype(np.int64)
    raise ValueError(f"action_layout must be 'safer' or 'aiclinician', got {layout!r}")


def _bins(dose: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """0 for a zero dose, else 1..4 by the quartile edges (3 inner cut-points) of non-zero doses."""
    level = np.searchsorted(edges, dose, side="right") + 1
    return np.where(dose > 0, np.clip(level, 1, 4), 0).astype(np.int64)


def _knn_impute(
    x: np.ndarray, ref: np.ndarray, scale: np.ndarray, k: int = 5, chunk: int = 512
) -> np.ndarray:
    """Fill NaNs of ``x`` [n, c] with the mean of the ``k`` nearest complete rows of ``ref`` [m, c]
    (Euclidean distance on the standardised columns observed in the row)."""
    x = x.copy()
    todo = np.flatnonzero(np.isnan(x).any(1))
    if not todo.size:
        return x
    refs = ref / scale
    k = min(k, len(ref))
    for start in range(0, len(todo), chunk):
        idx = todo[start : start + chunk]
        q = x[idx] / scale
        obs = ~np.isnan(q)
        qz = np.where(obs, q, 0.0)
        d = (
            (qz**2).sum(1, keepdims=True) - 2 * qz @ refs.T + obs.astype(float) @ (refs.T**2)
        )  # squared distance over the observed columns
        near = np.argpartition(d, k - 1, axis=1)[:, :k]
        fill = ref[near].mean(1)
        x[idx] = np.where(obs, x[idx], fill)
    return x


class Preprocessor:
    """AI-Clinician preprocessing with every statistic fitted on training stays (paper App. C.1).

    ``fit(seq, idx)`` learns outlier bounds, the kNN reference rows, the dose bin edges and the
    z-score statistics on stays ``idx``; ``transform(seq)`` returns model arrays. ``state_dict()``
    holds only lists and floats (safe for ``torch.load(weights_only=True)``).
    """

    def __init__(self, action_layout: str = "safer", knn_reference: int = 2000) -> None:
        if action_layout not in ("safer", "aiclinician"):
            raise ValueError(
                f"action_layout must be 'safer' or 'aiclinician', got {action_layout!r}"
            )
        self.action_layout = action_layout
        self.knn_reference = knn_reference
        self.state: dict[str, Any] | None = None

    def _clean(self, values: dict[str, np.ndarray], st: dict[str, Any]) -> dict[str, np.ndarray]:
        v = {k: np.array(a, dtype=float) for k, a in values.items()}
        for col, hi in CLIPS.items():
            v[col] = np.minimum(v[col], hi)
        shape = v["bloc"].shape
        block = np.stack([v[c].ravel() for c in KNN_COLUMNS], 1)
        lo_b, hi_b = np.array(st["iqr_lo"]), np.array(st["iqr_hi"])
        block = np.where((block < lo_b) | (block > hi_b), np.nan, block)
        if np.isnan(block).any():
            ref = np.array(st["knn_ref"], dtype=float)
            block = _knn_impute(block, ref, np.array(st["knn_scale"]))
        for j, c in enumerate(KNN_COLUMNS):
            v[c] = block[:, j].reshape(shape)
        # running totals recomputed from the per-bloc amounts (official code bug 11 fixed)
        for total, step in (("input_total", "input_4hourly"), ("output_total", "output_4hourly")):
            base = v[total][:, :1] - v[step][:, :1]
            v[total] = np.maximum(base + np.cumsum(v[step], 1), 0.0)
        v["cumulated_balance"] = v["input_total"] - v["output_total"]
        return v

    def fit(self, seq: Sequences, idx: np.ndarray) -> Preprocessor:
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size < 2:
            raise ValueError("the preprocessing needs at least 2 training stays")
        raw = {k: np.asarray(a)[idx] for k, a in seq.values.items()}
        for col, hi in CLIPS.items():
            raw[col] = np.minimum(raw[col], hi)
        block = np.stack([raw[c].ravel() for c in KNN_COLUMNS], 1)
        q1, q3 = np.percentile(block, 25, axis=0), np.percentile(block, 75, axis=0)
        iqr = q3 - q1
        lo, hi = q1 - 5 * iqr, q3 + 5 * iqr
        inside = ((block >= lo) & (block <= hi)).all(1)
        ref = block[inside]
        rng = np.random.default_rng(0)
        if len(ref) > self.knn_reference:
            ref = ref[np.sort(rng.choice(len(ref), self.knn_reference, replace=False))]
        scale = ref.std(0, ddof=1) if len(ref) > 1 else np.ones(len(KNN_COLUMNS))
        st: dict[str, Any] = {
            "iqr_lo": lo.tolist(),
            "iqr_hi": hi.tolist(),
            "knn_ref": ref.tolist(),
            "knn_scale": np.where(scale > 0, scale, 1.0).tolist(),
        }
        clean = self._clean(raw, st)
        edges = {}
        for col in ("max_dose_vaso", "input_4hourly"):
            nz = clean[col][clean[col] > 0]
            if nz.size < 4:
                raise ValueError(
                    f"column {col!r}: only {nz.size} non-zero dose(s) among the training stays; "
                    "the 4 quantile bins need more"
                )
            edges[col] = np.quantile(nz, [0.25, 0.5, 0.75]).tolist()
        st["bin_edges"] = edges
        st["bin_medians"] = {
            col: [
                float(np.median(clean[col][_bins(clean[col], np.array(e)) == b]))
                for b in range(1, 5)
            ]
            for col, e in edges.items()
        }
        feats = self._features(clean, None)
        st["mean"] = {k: float(a.mean()) for k, a in feats.items()}
        st["sd"] = {
            k: float(a.std(ddof=1)) if a.size > 1 and a.std(ddof=1) > 0 else 1.0
            for k, a in feats.items()
        }
        self.state = st
        return self

    @staticmethod
    def _features(v: dict[str, np.ndarray], st: dict[str, Any] | None) -> dict[str, np.ndarray]:
        """AI-Clinician transforms; z-scores applied when ``st`` is given (else the raw statistic
        inputs are returned, used by ``fit``)."""
        f: dict[str, np.ndarray] = {}
        for col in ("gender", "mechvent", "re_admission"):
            f[col] = v[col] - 0.5
        f["max_dose_vaso"] = np.log(0.1 + v["max_dose_vaso"])  # (x - 0.5) then log(0.6 + x)
        zcols = [*ZSCORE_COLUMNS, *EXTRA_ZSCORE_COLUMNS]
        for col in zcols:
            f[col] = v[col]
        for col in LOG_COLUMNS:
            f[col] = np.log(0.1 + v[col])
        if st is not None:
            for col in (*zcols, *LOG_COLUMNS):
                f[col] = (f[col] - st["mean"][col]) / st["sd"][col]
            f["input_4hourly"] = 2.0 * f["input_4hourly"]
        return f

    def transform(self, seq: Sequences) -> dict[str, np.ndarray]:
        """Model arrays: ``vitals`` [S, T, 45], ``prev_meds`` [S, T, 4], ``demo`` [S, 4] (row 0),
        ``y`` [S] (target class), ``prev_class`` [S] (class of the last input row), ``died`` [S]."""
        if self.state is None:
            raise RuntimeError("Preprocessor is not fitted: call fit(seq, train_idx) first")
        st = self.state
        clean = self._clean(seq.values, st)
        edges = st["bin_edges"]
        vb = _bins(clean["max_dose_vaso"], np.array(edges["max_dose_vaso"]))
        fb = _bins(clean["input_4hourly"], np.array(edges["input_4hourly"]))
        cls = action_class(vb, fb, self.action_layout)
        if cls.min() < 0 or cls.max() > 24:  # cannot happen with 5 bins; kept as a guard
            raise ValueError("action labels outside 0..24")
        feats = self._features(clean, st)
        inp = slice(0, seq.seq_len - 1)
        vitals = np.stack([feats.get(c, clean[c])[:, inp] for c in VITALS_COLUMNS], -1)
        meds = np.stack([feats[c][:, inp] for c in MEDS_COLUMNS], -1)
        demo = np.stack([feats[c][:, 0] for c in DEMO_COLUMNS], -1)
        out = {
            "vitals": vitals.astype(np.float32),
            "prev_meds": meds.astype(np.float32),
            "demo": demo.astype(np.float32),
            "y": cls[:, -1],
            "prev_class": cls[:, -2],
            "died": seq.died.astype(np.int64),
            "target_doses": np.stack(
                [clean["input_4hourly"][:, -1], clean["max_dose_vaso"][:, -1]], -1
            ),
        }
        bad = [k for k, a in out.items() if not np.isfinite(a).all()]
        if bad:
            raise ValueError(f"non-finite values after preprocessing in {', '.join(bad)}")
        return out

    def bin_doses(self, cls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Representative doses (median of the training doses in each bin) of action classes:
        (fluid mL per 4 h, vasopressor mcg/kg/min)."""
        if self.state is None:
            raise RuntimeError("Preprocessor is not fitted")
        cls = np.asarray(cls, dtype=np.int64)
        first, second = cls // 5, cls % 5
        vb, fb = (first, second) if self.action_layout == "safer" else (second, first)
        med = self.state["bin_medians"]
        fl = np.r_[0.0, med["input_4hourly"]][fb]
        va = np.r_[0.0, med["max_dose_vaso"]][vb]
        return fl, va

    def state_dict(self) -> dict[str, Any]:
        if self.state is None:
            raise RuntimeError("Preprocessor is not fitted")
        return {
            "action_layout": self.action_layout,
            "knn_reference": self.knn_reference,
            **self.state,
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> Preprocessor:
        state = dict(state)
        pre = cls(state.pop("action_layout"), int(state.pop("knn_reference")))
        need = (
            "iqr_lo",
            "iqr_hi",
            "knn_ref",
            "knn_scale",
            "bin_edges",
            "bin_medians",
            "mean",
            "sd",
        )
        missing = [k for k in need if k not in state]
        if missing:
            raise ValueError(f"preprocessor state lacks {', '.join(missing)}")
        pre.state = state
        return pre


# ------------------------------------------------------------------------------------------ tensors


@dataclass
class CohortTensors:
    """Model inputs of a cohort (numpy; ``batch(idx)`` gives torch tensors)."""

    vitals: np.ndarray  # [S, T, 45]
    prev_meds: np.ndarray  # [S, T, 4]
    notes: np.ndarray  # [S, T, D]
    demo: np.ndarray  # [S, 4]
    y: np.ndarray  # [S]
    died: np.ndarray  # [S]
    prev_class: np.ndarray  # [S]
    stay_ids: np.ndarray  # [S]
    target_doses: np.ndarray  # [S, 2]: fluid mL, vasopressor dose of the target row

    def __len__(self) -> int:
        return len(self.y)

    def batch(self, idx: np.ndarray | None = None, device: Any = "cpu") -> dict[str, Any]:
        import torch

        sel = slice(None) if idx is None else np.asarray(idx, dtype=np.int64)
        return {
            "vitals": torch.as_tensor(self.vitals[sel], device=device),
            "prev_meds": torch.as_tensor(self.prev_meds[sel], device=device),
            "notes": torch.as_tensor(self.notes[sel], device=device),
            "demo": torch.as_tensor(self.demo[sel], device=device),
            "y": torch.as_tensor(self.y[sel], device=device),
            "died": torch.as_tensor(self.died[sel], device=device).float(),
        }


def stratified_split(
    died: np.ndarray, seed: int, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
) -> dict[str, np.ndarray]:
    """Patient-level train/calibration/test split, stratified by death (paper Sec. 6.1: 80/10/10)."""
    died = np.asarray(died)
    if abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) <= 0:
        raise ValueError(f"fractions must be positive and sum to 1, got {fractions}")
    rng = np.random.default_rng(seed)
    parts: dict[str, list[np.ndarray]] = {"train": [], "calib": [], "test": []}
    for value in (0, 1):
        idx = rng.permutation(np.flatnonzero(died == value))
        n_tr = round(fractions[0] * len(idx))
        n_ca = round(fractions[1] * len(idx))
        parts["train"].append(idx[:n_tr])
        parts["calib"].append(idx[n_tr : n_tr + n_ca])
        parts["test"].append(idx[n_tr + n_ca :])
    split = {k: np.sort(np.concatenate(v)) for k, v in parts.items()}
    empty = [k for k, v in split.items() if not len(v)]
    if empty:
        raise ValueError(
            f"the {len(died)} stay(s) are too few for an 80/10/10 split: empty {', '.join(empty)}"
        )
    return split
