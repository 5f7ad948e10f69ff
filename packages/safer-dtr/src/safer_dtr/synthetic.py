"""Synthetic sepsis cohort in the AI-Clinician table format, with notes and an outcome oracle.

The generator writes the columns of the AI-Clinician ``mimictable.csv`` (Komorowski et al. 2018; the table
the paper's pipeline reads, paper Sec. 6.1 and App. C.1) plus a notes table, so one loader serves synthetic
and real data. Its causal structure makes the paper's modelling assumptions true, so the method's effects
are testable:

* deceased stays received worse care on average (a latent ``bad`` care flag raises both label noise and
  mortality), so clinicians' labels are noisier for them (the premise of paper Sec. 4.2 / Thm. 4.1);
* two patient factors are written only in the notes (``restrict``: CHF or ESRD, fluid restriction
  planned; ``cmo``: comfort measures only planned), and they change the optimal action from the
  *decision row* on (default row 7, 0-based: the target row of 8-row sequences). Before it they change
  nothing (no lab, no urine output, no dose), so no tabular input carries them and the notes stream
  holds information the tables do not (``tests/test_synthetic.py`` checks this with a logistic probe);
* the outcome depends on the deviation of the given from the optimal action, so counterfactual mortality
  has a ground truth (:meth:`SyntheticSepsisCohort.oracle_mortality`).

Every stay has its own child random streams (``numpy.random.SeedSequence(seed).spawn``): the dynamics
noise is drawn up front, so any stay can be re-simulated with a different action at one step and the same
noise afterwards.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .data import (
    DEMO_COLUMNS,
    MEDS_COLUMNS,
    MIMICTABLE_COLUMNS,
    VITALS_COLUMNS,
    build_sequences,
    write_notes_csv,
    write_table_csv,
)

__all__ = [
    "DEMO_COLUMNS",
    "MEDS_COLUMNS",
    "MIMICTABLE_COLUMNS",
    "PRESETS",
    "VITALS_COLUMNS",
    "SyntheticSepsisCohort",
    "dose_to_level",
]

PRESETS: dict[str, dict[str, float]] = {
    # paper Table 3: MIMIC-III 3,118 + 427 stays (12.0 % deceased), 11.75 blocs on average
    "mimic3": {"n_stays": 3545, "mortality": 0.12, "extra_len": 3.75},
    # MIMIC-IV 19,450 + 3,786 (16.3 %), 11.50 blocs
    "mimic4": {"n_stays": 23236, "mortality": 0.163, "extra_len": 3.5},
}

LMAX = 20
BLOC_SECONDS = 14_400
GENERATOR_VERSION = 2  # 2: note-only factors act from the decision row only
PILOT_SEED = 20250613
PILOT_BLOCS = 20_000

FLUID_EDGES = np.array([1.0, 50.0, 180.0, 530.0, 2000.0])  # mL per 4 h, level k in (e_{k-1}, e_k]
VASO_EDGES = np.array([0.01, 0.08, 0.22, 0.45, 1.0])  # mcg/kg/min norepinephrine-equivalent

# standard-normal noise columns per bloc
_Z = {
    name: i
    for i, name in enumerate(
        "s MeanBP SysBP HR RR SpO2 Temp FiO2 GCS paO2 paCO2 pH lactate HCO3 BE CO2 K Na Cl Glucose "
        "Mg Ca iCa BUN Creat SGOT SGPT bili Albumin Hb WBC Plt PTT PT INR output weight".split()
    )
}
# uniform noise columns per bloc
_U = {name: i for i, name in enumerate("lab vent Fa Fb Fc Va Vb Vc fdose vdose vmed".split())}
_SOURCES = ("pneumonia", "urinary", "abdominal", "unknown")
_SOURCE_P = np.array([0.40, 0.25, 0.20, 0.15])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def dose_to_level(dose: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The generator's ordinal level (0 for zero dose, else 1..4 by the fixed dose ranges) of a dose."""
    dose = np.asarray(dose, dtype=float)
    level = np.searchsorted(edges[1:-1], dose, side="left") + 1
    return np.where(dose > 0, np.clip(level, 1, 4), 0).astype(np.int64)


def _level_dose(level: np.ndarray, u: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """A log-uniform dose inside the range of ``level`` (0 for level 0)."""
    lo = np.log(edges[np.clip(level - 1, 0, 3)])
    hi = np.log(edges[np.clip(level, 1, 4)])
    return np.where(level > 0, np.exp(lo + u * (hi - lo)), 0.0)


@dataclass
class _Static:
    """Per-stay draws that do not change along the stay."""

    gender: np.ndarray
    age_years: np.ndarray
    readm: np.ndarray
    elix: np.ndarray
    weight0: np.ndarray
    mu: np.ndarray
    bad: np.ndarray
    restrict: np.ndarray
    esrd: np.ndarray
    cmo: np.ndarray
    source: np.ndarray
    length: np.ndarray
    t0: np.ndarray
    death_u: np.ndarray
    aux_u: np.ndarray  # [N, 2]: mortality_90d, died_within_48h
    delay_h: np.ndarray
    start_in: np.ndarray
    start_out: np.ndarray

    def subset(self, idx: np.ndarray) -> _Static:
        return _Static(**{k: v[idx] for k, v in vars(self).items()})


def _draw_static(rng: np.random.Generator, extra_len: float) -> dict[str, Any]:
    length = int(min(8 + rng.poisson(extra_len), LMAX))
    return {
        "gender": float(rng.random() < 0.45),
        "age_years": float(np.clip(rng.normal(65, 16), 18, 91)),
        "readm": float(rng.random() < 0.1),
        "elix": float(np.clip(rng.poisson(4), 0, 20)),
        "weight0": float(np.clip(rng.normal(80, 20), 35, 200)),
        "mu": float(rng.normal()),
        "bad": float(rng.random() < 0.25),
        "restrict": float(rng.random() < 0.2),
        "esrd": float(rng.random() < 0.5),
        "cmo": float(rng.random() < 0.1),
        "source": int(rng.choice(4, p=_SOURCE_P)),
        "length": length,
        "t0": float(np.floor(rng.uniform(4.1e9, 7.6e9))),
        "death_u": float(rng.random()),
        "aux_u": rng.random(2),
        "delay_h": float(rng.exponential(48.0)),
        "start_in": float(np.exp(np.log(2000.0) + 0.3 * rng.normal())),
        "start_out": float(np.exp(np.log(1000.0) + 0.3 * rng.normal())),
    }


def _draw(seed: int, n: int, extra_len: float) -> tuple[_Static, np.ndarray, np.ndarray, list[int]]:
    """Static draws and per-bloc noise for ``n`` stays, one child stream per stay."""
    children = np.random.SeedSequence(seed).spawn(n)
    rows = []
    zs = np.empty((n, LMAX, len(_Z)))
    us = np.empty((n, LMAX, len(_U)))
    note_seeds = []
    for i, child in enumerate(children):
        dyn, notes = child.spawn(2)
        rng = np.random.default_rng(dyn)
        rows.append(_draw_static(rng, extra_len))
        zs[i] = rng.standard_normal((LMAX, len(_Z)))
        us[i] = rng.random((LMAX, len(_U)))
        note_seeds.append(int(notes.generate_state(1)[0]))
    static = _Static(**{k: np.array([r[k] for r in rows]) for k in rows[0]})
    return static, zs, us, note_seeds


@dataclass
class _Pilot:
    """Standardisation constants and cut-points fixed from a pilot under optimal care."""

    lactate_mean: float
    lactate_sd: float
    map_mean: float
    map_sd: float
    fluid_cuts: np.ndarray  # 4 cut-points on u^F: level = #(u > cut)
    vaso_cuts: np.ndarray


def _simulate(
    st: _Static,
    zs: np.ndarray,
    us: np.ndarray,
    pilot: _Pilot | None,
    *,
    decision_row: int = 7,
    override_row: int | None = None,
    override_f: np.ndarray | None = None,
    override_v: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Vectorised simulation of all stays, all ``LMAX`` rows (rows past a stay's length are unused).

    ``pilot=None`` simulates optimal care with z-scores and cut-points left undefined (the pilot run).
    ``override_*`` replace the given fluid/vasopressor levels at one row (the oracle's counterfactual).
    The note-only factors (``restrict``, ``cmo``) enter the optimal action at rows >= ``decision_row``
    only and nothing else in the simulation, so the rows before it do not depend on them.
    """
    n = len(st.mu)
    out: dict[str, np.ndarray] = {}

    def col(name: str) -> np.ndarray:
        if name not in out:
            out[name] = np.zeros((n, LMAX))
        return out[name]

    labs_prev: dict[str, np.ndarray] = {}
    s = st.mu + 0.3 * zs[:, 0, _Z["s"]] + 0.3 * (st.source == 2)
    weight = st.weight0.copy()
    vent = np.zeros(n, dtype=bool)
    in_tot = st.start_in.copy()
    out_tot = st.start_out.copy()
    mu = st.mu + 0.3 * (st.source == 2)  # abdominal source adds +0.3 to the baseline severity
    dev = np.zeros(n)  # the previous row's deviation from the optimal action
    for t in range(LMAX):
        z = zs[:, t]
        u = us[:, t]
        if t > 0:
            s = 0.8 * s + 0.2 * mu + 0.15 * dev + 0.25 * z[:, _Z["s"]]
        col("s")[:, t] = s
        sp = np.maximum(s, 0.0)
        mbp = np.clip(78 - 7 * s + 5 * z[:, _Z["MeanBP"]], 30, 150)
        sbp = np.clip(mbp + 35 + 6 * z[:, _Z["SysBP"]], 40, 250)
        dbp = np.clip((3 * mbp - sbp) / 2, 10, 150)
        hr = np.clip(88 + 10 * s + 8 * z[:, _Z["HR"]], 30, 200)
        rr = np.clip(19 + 3 * s + 3 * z[:, _Z["RR"]], 5, 50)
        spo2 = np.clip(97 - 1.5 * sp + 1.5 * z[:, _Z["SpO2"]], 70, 100)
        temp = np.clip(37.3 + 0.4 * s + 0.5 * z[:, _Z["Temp"]], 33, 42)
        fio2 = np.clip(0.21 + 0.15 * sp + 0.05 * z[:, _Z["FiO2"]], 0.21, 1.0)
        gcs = np.clip(np.round(14 - 1.5 * sp + z[:, _Z["GCS"]]), 3, 15)
        p_vent = _sigmoid(-1 + 1.5 * s)
        vent = np.where(vent, u[:, _U["vent"]] < 0.9, u[:, _U["vent"]] < p_vent)
        weight = np.clip(weight * (1 + 0.005 * z[:, _Z["weight"]]), 35, 200)

        def ln(median: Any, name: str, sigma: float = 0.3, z: np.ndarray = z) -> np.ndarray:
            return np.exp(np.log(median) + sigma * z[:, _Z[name]])

        hco3 = np.clip(24 - 2 * s + 2 * z[:, _Z["HCO3"]], 5, 50)
        fresh = {
            "paO2": np.clip(90 - 10 * s + 15 * z[:, _Z["paO2"]], 30, 500),
            "paCO2": np.clip(40 + 3 * s + 5 * z[:, _Z["paCO2"]], 10, 150),
            "Arterial_pH": np.clip(7.38 - 0.04 * s + 0.03 * z[:, _Z["pH"]], 6.7, 7.8),
            "Arterial_lactate": np.clip(ln(1.8 * np.exp(0.35 * s), "lactate", 0.2), 0.3, 30),
            "HCO3": hco3,
            "Arterial_BE": np.clip(hco3 - 24 + z[:, _Z["BE"]], -30, 30),
            "CO2_mEqL": np.clip(hco3 + z[:, _Z["CO2"]], 5, 50),
            "Potassium": np.clip(4.1 + 0.5 * z[:, _Z["K"]], 2, 8),
            "Sodium": np.clip(139 + 4 * z[:, _Z["Na"]], 115, 165),
            "Chloride": np.clip(104 + 5 * z[:, _Z["Cl"]], 80, 135),
            "Glucose": np.clip(ln(140.0, "Glucose"), 30, 800),
            "Magnesium": np.clip(2.0 + 0.3 * z[:, _Z["Mg"]], 0.8, 5),
            "Calcium": np.clip(8.4 + 0.6 * z[:, _Z["Ca"]], 5, 13),
            "Ionised_Ca": np.clip(1.12 + 0.08 * z[:, _Z["iCa"]], 0.6, 1.6),
            "BUN": np.clip(ln(25 * np.exp(0.3 * s), "BUN"), 2, 200),
            "Creatinine": np.clip(ln(1.3 * np.exp(0.3 * s), "Creat"), 0.2, 15),
            "SGOT": np.clip(ln(40 * np.exp(0.4 * s), "SGOT"), 5, 10_000),
            "SGPT": np.clip(ln(35 * np.exp(0.4 * s), "SGPT"), 5, 10_000),
            "Total_bili": np.clip(ln(0.9 * np.exp(0.3 * s), "bili"), 0.1, 50),
            "Albumin": np.clip(2.9 + 0.5 * z[:, _Z["Albumin"]], 1, 5.5),
            "Hb": np.clip(10 + 1.8 * z[:, _Z["Hb"]], 4, 18),
            "WBC_count": np.clip(ln(12 * np.exp(0.2 * s), "WBC"), 0.1, 100),
            "Platelets_count": np.clip(ln(190 * np.exp(-0.25 * s), "Plt"), 5, 1000),
            "PTT": np.clip(35 + 8 * z[:, _Z["PTT"]], 15, 150),
            "PT": np.clip(15 + 3 * z[:, _Z["PT"]], 9, 60),
        }
        fresh["INR"] = np.clip(fresh["PT"] / 11 + 0.1 * z[:, _Z["INR"]], 0.8, 8)
        remeasure = (u[:, _U["lab"]] < 0.35) | (t == 0)
        for name, value in fresh.items():
            held = labs_prev.get(name, value)
            labs_prev[name] = np.where(remeasure, value, held)
            col(name)[:, t] = labs_prev[name]
        lact = labs_prev["Arterial_lactate"]
        # the note-only factors act from the decision row on, on the optimal action only
        acting = t >= decision_row
        cmo_t = (st.cmo > 0) & acting
        restrict_t = st.restrict * acting

        # optimal levels (0..4) from the latent state and what a clinician sees
        if pilot is None:
            f_star = np.zeros(n, dtype=np.int64)
            v_star = np.zeros(n, dtype=np.int64)
            col("uF")[:, t] = 0.9 * s - 2.0 * restrict_t - 2.5 * cmo_t
            col("uV")[:, t] = 1.2 * s + 1.0 * restrict_t - 2.0 * cmo_t
            f_obs, v_obs = f_star, v_star
        else:
            zl = (lact - pilot.lactate_mean) / pilot.lactate_sd
            zm = (mbp - pilot.map_mean) / pilot.map_sd
            # fluid restriction: fewer fluids, vasopressors earlier; comfort care: neither
            u_f = 0.9 * s + 0.6 * zl - 2.0 * restrict_t - 2.5 * cmo_t
            u_v = 1.2 * s - 0.8 * zm + 1.0 * restrict_t - 2.0 * cmo_t
            f_star = (u_f[:, None] > pilot.fluid_cuts[None]).sum(1)
            v_star = (u_v[:, None] > pilot.vaso_cuts[None]).sum(1)
            f_obs = _clinician(f_star, st.bad, u[:, _U["Fa"]], u[:, _U["Fb"]], u[:, _U["Fc"]])
            v_obs = _clinician(v_star, st.bad, u[:, _U["Va"]], u[:, _U["Vb"]], u[:, _U["Vc"]])
            v_obs = np.where(v_star == 0, 0, v_obs)  # noise never starts a vasopressor
        if override_row is not None and t == override_row:
            assert override_f is not None and override_v is not None
            f_obs, v_obs = override_f.astype(np.int64), override_v.astype(np.int64)
        dev = np.abs(f_obs - f_star) + 1.5 * np.abs(v_obs - v_star)
        fluid = _level_dose(f_obs, u[:, _U["fdose"]], FLUID_EDGES)
        vaso = _level_dose(v_obs, u[:, _U["vdose"]], VASO_EDGES)
        vaso_med = vaso * (0.5 + 0.5 * u[:, _U["vmed"]])
        urine = ln(300 * np.exp(-0.3 * s), "output")
        in_tot = in_tot + fluid
        out_tot = out_tot + urine
        pf = labs_prev["paO2"] / fio2
        plt_ = labs_prev["Platelets_count"]
        bili = labs_prev["Total_bili"]
        creat = labs_prev["Creatinine"]
        sofa = (
            np.select([pf < 100, pf < 200, pf < 300, pf < 400], [4, 3, 2, 1], 0)
            + np.select([plt_ < 20, plt_ < 50, plt_ < 100, plt_ < 150], [4, 3, 2, 1], 0)
            + np.select([bili >= 12, bili >= 6, bili >= 2, bili >= 1.2], [4, 3, 2, 1], 0)
            + np.select([vaso > 0.1, vaso > 0, mbp < 70], [4, 3, 1], 0)
            + np.select([gcs < 6, gcs < 10, gcs < 13, gcs < 15], [4, 3, 2, 1], 0)
            + np.maximum(
                np.select([creat >= 5, creat >= 3.5, creat >= 2, creat >= 1.2], [4, 3, 2, 1], 0),
                np.select([urine * 6 < 200, urine * 6 < 500], [4, 3], 0),
            )
        )
        wbc = labs_prev["WBC_count"]
        sirs = (
            ((temp > 38) | (temp < 36)).astype(int)
            + (hr > 90)
            + ((rr > 20) | (labs_prev["paCO2"] < 32))
            + ((wbc > 12) | (wbc < 4))
        )
        for name, value in {
            "MeanBP": mbp, "SysBP": sbp, "DiaBP": dbp, "HR": hr, "RR": rr, "SpO2": spo2,
            "Temp_C": temp, "FiO2_1": fio2, "GCS": gcs, "mechvent": vent.astype(float),
            "Weight_kg": weight, "Shock_Index": hr / sbp, "PaO2_FiO2": pf,
            "median_dose_vaso": vaso_med, "max_dose_vaso": vaso, "input_4hourly": fluid,
            "input_total": in_tot, "output_4hourly": urine, "output_total": out_tot,
            "cumulated_balance": in_tot - out_tot, "SOFA": sofa, "SIRS": sirs,
            "F": f_obs, "V": v_obs, "F_star": f_star, "V_star": v_star, "dev": dev,
            "cmo_t": cmo_t.astype(float),
        }.items():  # fmt: skip
            col(name)[:, t] = value
    return out


def _clinician(
    star: np.ndarray, bad: np.ndarray, ua: np.ndarray, ub: np.ndarray, uc: np.ndarray
) -> np.ndarray:
    """Observed level from the optimal one: good care 85 % exact else +-1; bad care 50 % exact,
    30 % under-treatment (level - 1 - Bern(0.5), floor 0), 20 % a uniformly random level."""
    step = np.where(ub < 0.5, -1, 1)
    good = np.where(ua < 0.85, star, np.clip(star + step, 0, 4))
    under = np.maximum(star - 1 - (uc < 0.5), 0)
    rand = np.minimum((ub * 5).astype(np.int64), 4)
    poor = np.where(ua < 0.5, star, np.where(ua < 0.8, under, rand))
    return np.where(bad > 0, poor, good).astype(np.int64)


def _death_linear(sim: dict[str, np.ndarray], st: _Static) -> np.ndarray:
    """logit P(death) without the intercept: severity at the end, deviation along the stay, cmo, age."""
    rows = np.arange(LMAX)[None, :]
    valid = rows < st.length[:, None]
    last3 = (rows >= st.length[:, None] - 3) & valid
    s_end = (sim["s"] * last3).sum(1) / 3.0
    dev = (sim["dev"] * valid).sum(1) / np.sqrt(st.length)
    return 1.2 * s_end + 0.25 * dev + 2.5 * st.cmo + 0.01 * (st.age_years - 65)


def _solve_intercept(lin: np.ndarray, target: float) -> float:
    lo, hi = -30.0, 30.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _sigmoid(mid + lin).mean() < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@functools.lru_cache(maxsize=1)
def _pilot() -> _Pilot:
    """Standardisation and cut-points from 20,000 blocs simulated under optimal care (fixed seed)."""
    n = PILOT_BLOCS // 8
    st, zs, us, _ = _draw(PILOT_SEED, n, PRESETS["mimic3"]["extra_len"])
    sim = _simulate(st, zs, us, None)
    valid = np.arange(LMAX)[None, :] < st.length[:, None]
    take = np.flatnonzero(valid.ravel())[:PILOT_BLOCS]
    lact = sim["Arterial_lactate"].ravel()[take]
    mbp = sim["MeanBP"].ravel()[take]
    lm, ls = float(lact.mean()), float(lact.std(ddof=1))
    mm, ms = float(mbp.mean()), float(mbp.std(ddof=1))
    u_f = sim["uF"].ravel()[take] + 0.6 * (lact - lm) / ls
    u_v = sim["uV"].ravel()[take] - 0.8 * (mbp - mm) / ms
    f_cuts = np.quantile(u_f, 0.55 + 0.45 * np.arange(4) / 4)
    v_cuts = np.quantile(u_v, 0.935 + 0.065 * np.arange(4) / 4)
    return _Pilot(lm, ls, mm, ms, f_cuts, v_cuts)


@dataclass
class SyntheticSepsisCohort:
    """A simulated sepsis cohort: the AI-Clinician table, a notes table, and an outcome oracle.

    Parameters
    ----------
    n_stays : int, optional
        Number of ICU stays (default: the preset's, 3,545 for ``mimic3``).
    preset : {"mimic3", "mimic4"}
        Size, target mortality and stay-length distribution of paper Table 3 (default ``"mimic3"``).
    mortality : float, optional
        Target in-hospital mortality (default: the preset's). The outcome intercept is solved so that the
        expected cohort mortality equals it.
    note_only_prob : float
        Probability that a written note states the note-only factors (default 0.8; 0.0 gives the
        notes-ablated variant whose notes carry no information beyond the tables). The tables, the
        actions and the outcomes do not depend on it (same seed, same table).
    decision_row : int
        0-based row from which the note-only factors change the optimal action (default 7, the target
        row of the default 8-row sequences; 1..19). The notes state the factors from the first bloc on,
        as a plan; nothing in the table depends on them before this row.
    seed : int
        Seed of the cohort (default 0).

    Attributes
    ----------
    table : dict[str, numpy.ndarray]
        The ``mimictable.csv`` columns (:data:`MIMICTABLE_COLUMNS`), one row per (stay, bloc).
    notes : list[tuple[int, int, str]]
        ``(icustayid, charttime, text)`` per written note.
    death_prob : numpy.ndarray
        Per-stay probability of in-hospital death (the oracle's value of the observed actions).
    """

    n_stays: int | None = None
    preset: str = "mimic3"
    mortality: float | None = None
    note_only_prob: float = 0.8
    seed: int = 0
    decision_row: int = 7
    table: dict[str, np.ndarray] = field(init=False, repr=False)
    notes: list[tuple[int, int, str]] = field(init=False, repr=False)
    death_prob: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {self.preset!r}")
        cfg = PRESETS[self.preset]
        n = int(cfg["n_stays"] if self.n_stays is None else self.n_stays)
        if n < 1:
            raise ValueError(f"n_stays must be >= 1, got {n}")
        target = float(cfg["mortality"] if self.mortality is None else self.mortality)
        if not 0.0 < target < 1.0:
            raise ValueError(f"mortality must be in (0, 1), got {target}")
        if not 0.0 <= self.note_only_prob <= 1.0:
            raise ValueError(f"note_only_prob must be in [0, 1], got {self.note_only_prob}")
        if not (isinstance(self.decision_row, int | np.integer) and 1 <= self.decision_row < LMAX):
            raise ValueError(
                f"decision_row must be an integer in 1..{LMAX - 1}, got {self.decision_row!r}"
            )
        self.n_stays, self.mortality = n, target
        self._static, self._zs, self._us, self._note_seeds = _draw(self.seed, n, cfg["extra_len"])
        self._sim = _simulate(
            self._static, self._zs, self._us, _pilot(), decision_row=int(self.decision_row)
        )
        lin = _death_linear(self._sim, self._static)
        self.intercept = _solve_intercept(lin, target)
        self.death_prob = _sigmoid(self.intercept + lin)
        self.died = (self._static.death_u < self.death_prob).astype(np.int64)
        self.table = self._build_table()
        self.notes = self._build_notes()

    # ----------------------------------------------------------------------------------- table

    def _build_table(self) -> dict[str, np.ndarray]:
        st, sim = self._static, self._sim
        rows = np.arange(LMAX)[None, :]
        valid = rows < st.length[:, None]
        stay_idx, row_idx = np.nonzero(valid)

        def per_stay(values: np.ndarray) -> np.ndarray:
            return np.asarray(values, dtype=float)[stay_idx]

        died = self.died.astype(float)
        table: dict[str, np.ndarray] = {
            "bloc": row_idx + 1.0,
            "icustayid": stay_idx + 1.0,
            "charttime": per_stay(st.t0) + BLOC_SECONDS * row_idx,
            "gender": per_stay(st.gender),
            "age": per_stay(365.25 * st.age_years),
            "elixhauser": per_stay(st.elix),
            "re_admission": per_stay(st.readm),
            "died_in_hosp": per_stay(died),
            "died_within_48h_of_out_time": per_stay(died * (st.aux_u[:, 1] < 0.5)),
            "mortality_90d": per_stay(np.maximum(died, st.aux_u[:, 0] < 0.08)),
            "delay_end_of_record_and_discharge_or_death": per_stay(st.delay_h),
        }
        for name in MIMICTABLE_COLUMNS:
            if name not in table:
                table[name] = sim[name][stay_idx, row_idx].astype(float)
        return {name: table[name] for name in MIMICTABLE_COLUMNS}

    # ----------------------------------------------------------------------------------- notes

    def _build_notes(self) -> list[tuple[int, int, str]]:
        st, sim = self._static, self._sim
        notes = []
        for i in range(self.n_stays or 0):
            rng = np.random.default_rng(self._note_seeds[i])
            for t in range(int(st.length[i])):
                if t > 0 and rng.random() >= 0.6:
                    continue
                text = _note_text(rng, sim, st, i, t, self.note_only_prob)
                notes.append((i + 1, int(st.t0[i] + BLOC_SECONDS * t), text))
        return notes

    def sequences(self, seq_len: int = 8, note_alignment: str = "past") -> Any:
        """The cohort as :class:`~safer_dtr.data.Sequences` (the same code path as the CSV loader).

        Notes are written at their bloc's charttime, so ``"past"`` (default here) aligns each input row
        with its own or the latest earlier note; ``"nearest"`` would tie a note-less bloc with the next
        bloc's note and leak the future."""

        return build_sequences(
            self.table,
            self.notes,
            seq_len=seq_len,
            note_alignment=note_alignment,
            name=f"synthetic cohort (seed {self.seed})",
        )

    # ------------------------------------------------------------------------------------- I/O

    def write(self, folder: str | Path) -> dict[str, Path]:
        """Write ``mimictable.csv``, ``notes.csv`` and ``oracle.npz`` into ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)

        paths = {
            "table": write_table_csv(folder / "mimictable.csv", self.table),
            "notes": write_notes_csv(folder / "notes.csv", self.notes),
            "oracle": folder / "oracle.npz",
        }
        st = self._static
        np.savez(
            paths["oracle"],
            generator_version=GENERATOR_VERSION,
            seed=self.seed,
            icustayid=np.arange(1, (self.n_stays or 0) + 1),
            severity=self._sim["s"],
            optimal_fluid=self._sim["F_star"],
            optimal_vaso=self._sim["V_star"],
            bad_care=st.bad,
            restrict=st.restrict,
            esrd=st.esrd,
            cmo=st.cmo,
            decision_bloc=int(self.decision_row) + 1,
            length=st.length,
            death_prob=self.death_prob,
            intercept=self.intercept,
        )
        return paths

    # ---------------------------------------------------------------------------------- oracle

    @property
    def deviation(self) -> np.ndarray:
        """Mean deviation ``dev_t = |F - F*| + 1.5 |V - V*|`` per stay, over its blocs."""
        valid = np.arange(LMAX)[None, :] < self._static.length[:, None]
        return (self._sim["dev"] * valid).sum(1) / self._static.length

    def optimal_levels(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """The optimal (fluid, vasopressor) levels of every stay at 0-based ``row``."""
        return self._sim["F_star"][:, row].astype(np.int64), self._sim["V_star"][:, row].astype(
            np.int64
        )

    def observed_levels(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """The clinicians' (fluid, vasopressor) levels of every stay at 0-based ``row``."""
        return self._sim["F"][:, row].astype(np.int64), self._sim["V"][:, row].astype(np.int64)

    def oracle_mortality(
        self,
        stays: np.ndarray,
        row: int,
        fluid_level: np.ndarray,
        vaso_level: np.ndarray,
    ) -> np.ndarray:
        """Death probability of ``stays`` (0-based indices) when the levels at 0-based ``row`` are
        replaced by ``fluid_level``/``vaso_level`` (0..4): the stay is re-simulated with the same noise
        and the same clinician policy at later rows; the intercept stays that of the cohort."""
        stays = np.asarray(stays, dtype=np.int64)
        fl = np.broadcast_to(np.asarray(fluid_level, dtype=np.int64), stays.shape)
        vl = np.broadcast_to(np.asarray(vaso_level, dtype=np.int64), stays.shape)
        if (fl < 0).any() or (fl > 4).any() or (vl < 0).any() or (vl > 4).any():
            raise ValueError("oracle levels must be integers in 0..4")
        st = self._static.subset(stays)
        sim = _simulate(
            st,
            self._zs[stays],
            self._us[stays],
            _pilot(),
            decision_row=int(self.decision_row),
            override_row=row,
            override_f=fl,
            override_v=vl,
        )
        return _sigmoid(self.intercept + _death_linear(sim, st))


_HEADERS = ("Nursing progress note", "MICU attending note", "Resident progress note")
_SOURCE_TEXT = {
    0: ("Source: pneumonia, on vanc/zosyn", "RLL pneumonia, on broad-spectrum abx"),
    1: ("Source: urinary, on ceftriaxone", "Urosepsis, urine cx pending, on abx"),
    2: ("Source: abdominal, s/p washout, on pip-tazo", "Intra-abdominal sepsis, surgery following"),
    3: ("Source unclear, cultures pending, empiric abx", "Unknown source, pan-cultured"),
}


def _note_text(
    rng: np.random.Generator,
    sim: dict[str, np.ndarray],
    st: _Static,
    i: int,
    t: int,
    note_only_prob: float,
) -> str:
    """A templated note for stay ``i`` at row ``t``: a shuffled subset of sentences (each kept w.p.
    0.7) with rounded, noise-perturbed numbers, plus the note-only factors w.p. ``note_only_prob``.
    It describes the current bloc and never states the next action."""

    def pick(*options: str) -> str:
        return options[int(rng.integers(len(options)))]

    mbp = round(sim["MeanBP"][i, t] + rng.normal(0, 2))
    vaso = sim["max_dose_vaso"][i, t]
    fluid = sim["input_4hourly"][i, t]
    sentences = [pick(*_HEADERS) + "."]
    if mbp < 65:
        sentences.append(pick(f"Pt remains hypotensive, MAP {mbp}.", f"Soft pressures, MAP {mbp}."))
    else:
        sentences.append(pick(f"BP stable, MAP {mbp}.", f"Hemodynamically stable, MAP {mbp}."))
    if vaso > 0:
        drug = pick("Levophed", "norepinephrine", "Norepi")
        sentences.append(f"{drug} at {vaso * np.exp(rng.normal(0, 0.05)):.2f} mcg/kg/min.")
    else:
        sentences.append(pick("Off pressors.", "No pressor requirement."))
    if fluid > 0:
        ml = int(max(10, round(fluid * np.exp(rng.normal(0, 0.05)), -1)))
        sentences.append(
            pick(f"Received {ml} mL {pick('LR', 'NS')} bolus.", f"Given {ml} mL IVF this shift.")
        )
    else:
        sentences.append(pick("No boluses this shift.", "No additional fluids."))
    lact = sim["Arterial_lactate"][i, t] * np.exp(rng.normal(0, 0.05))
    creat = sim["Creatinine"][i, t] * np.exp(rng.normal(0, 0.05))
    wbc = sim["WBC_count"][i, t] * np.exp(rng.normal(0, 0.05))
    sentences.append(f"Lactate {lact:.1f}, creatinine {creat:.1f}, WBC {wbc:.0f}.")
    if sim["mechvent"][i, t] > 0:
        sentences.append(f"Intubated, FiO2 {100 * sim['FiO2_1'][i, t]:.0f}%.")
    else:
        sentences.append(
            f"On {int(rng.integers(1, 5))}L NC, sats {sim['SpO2'][i, t] + rng.normal(0, 1):.0f}%."
        )
    gcs = int(sim["GCS"][i, t])
    if gcs >= 14:
        sentences.append(pick("Alert and oriented.", "A&Ox3, following commands."))
    elif gcs >= 9:
        sentences.append(f"Drowsy but arousable, GCS {gcs}.")
    else:
        sentences.append(f"Unresponsive, GCS {gcs}.")
    sentences.append(pick(*_SOURCE_TEXT[int(st.source[i])]) + ".")
    sentences.append(pick("Skin intact.", "Foley in place.", "Lines c/d/i."))
    kept = [s for s in sentences if rng.random() < 0.7]
    if st.restrict[i] > 0 and rng.random() < note_only_prob:
        kept.append(
            "ESRD on HD, avoid aggressive fluids."
            if st.esrd[i] > 0
            else "Hx CHF, EF 20%, fluid restricted."
        )
    if st.cmo[i] > 0 and rng.random() < note_only_prob:
        kept.append("Family meeting held; DNR/DNI, focus on comfort, no escalation.")
    if not kept:
        kept = [sentences[0]]
    order = rng.permutation(len(kept))
    return " ".join(kept[k] for k in order)
