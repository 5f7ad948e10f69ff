"""Environments: a numpy open point environment, a numpy point maze, and gymnasium wrappers (Ant, PointMaze).

Every environment here is *vectorised*: ``reset(seed=..., num_envs=n)`` starts ``n`` copies that then step in
lockstep, and ``step(actions)`` takes an ``(n, act_dim)`` array in the environment's own action units. The
return values follow gymnasium's vector API: ``reset -> (obs, info)`` and ``step -> (obs, reward,
terminated, truncated, info)`` with arrays of length ``n``; rewards are 0 (skill discovery ignores them);
``info["xy"]`` holds the agent's position in the observation's frame. Episodes truncate at ``horizon``.

Beyond gymnasium, each environment knows what the skill-discovery metrics need: ``coverage(xy)`` (distinct
cells visited), ``goals()`` (zero-shot goal positions), ``goal_obs(goals)`` (the initial observation with its
position replaced by the goal) and ``success_radius``. ``spec()`` returns what :func:`make_env` needs to
rebuild the environment from a checkpoint.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# D4RL / gymnasium-robotics maze maps (1 = wall, 0 = free; rows top to bottom).
MAZES: dict[str, tuple[str, ...]] = {
    "u": ("11111", "10001", "11101", "10001", "11111"),
    "medium": (
        "11111111",
        "10011001",
        "10010001",
        "11000111",
        "10010001",
        "10100101",
        "10001001",
        "11111111",
    ),
    "large": (
        "111111111111",
        "100001000001",
        "101101010101",
        "100000010001",
        "101111011101",
        "100101000001",
        "110101010111",
        "100100010001",
        "111111111111",
    ),
}
ENV_NAMES = ("point", "point_maze", "ant", "gr_point_maze")


def _check_actions(action: Any, n: int, act_dim: int) -> np.ndarray:
    a = np.asarray(action, dtype=np.float64)
    if a.shape != (n, act_dim):
        raise ValueError(f"action must have shape ({n}, {act_dim}), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("action holds NaN or inf")
    return a


class _Steps:
    """Step counting and truncation shared by the numpy environments."""

    horizon: int
    num_envs: int

    def _start(self, num_envs: int | None) -> None:
        n = self.num_envs if num_envs is None else num_envs
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {n!r}")
        self.num_envs = int(n)
        self._t = 0

    def _tick(self) -> tuple[np.ndarray, np.ndarray]:
        if self._t >= self.horizon:
            raise RuntimeError("the episodes are over (truncated at the horizon): call reset()")
        self._t += 1
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.full(self.num_envs, self._t >= self.horizon)
        return terminated, truncated


class PointEnv(_Steps):
    """Open 2-D point environment (METRA/RSD's ``maze`` env): ``p ← p + clip(a, ±0.2)``, start (0, 0).

    Observation = position (float32). No termination; truncation at ``horizon`` (default 50).
    Coverage counts distinct ``(floor(x/c), floor(y/c))`` cells; zero-shot goals are 64 points drawn
    once, uniform in ``[−8, 8]²`` (seed 0); success radius 0.5.
    """

    name = "point"
    obs_dim = 2
    act_dim = 2

    def __init__(
        self,
        num_envs: int = 1,
        horizon: int = 50,
        max_action: float = 0.2,
        cell_size: float = 1.0,
        n_goals: int = 64,
        goal_range: float = 8.0,
        success_radius: float = 0.5,
    ) -> None:
        _positive_int("horizon", horizon)
        _positive_int("num_envs", num_envs)
        for name, value in (("max_action", max_action), ("cell_size", cell_size)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        self.num_envs = num_envs
        self.horizon = horizon
        self.max_action = float(max_action)
        self.cell_size = float(cell_size)
        self.n_goals = n_goals
        self.goal_range = float(goal_range)
        self.success_radius = float(success_radius)
        self.action_low = np.full(2, -self.max_action)
        self.action_high = np.full(2, self.max_action)
        self.max_cells: int | None = None
        self._p = np.zeros((num_envs, 2))
        self._t = 0

    def reset(
        self, *, seed: int | None = None, num_envs: int | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self._start(num_envs)
        self._p = np.zeros((self.num_envs, 2))
        return self._obs(), {"xy": self._p.copy()}

    def step(
        self, action: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        a = _check_actions(action, self.num_envs, 2)
        terminated, truncated = self._tick()
        self._p = self._p + np.clip(a, self.action_low, self.action_high)
        reward = np.zeros(self.num_envs)
        return self._obs(), reward, terminated, truncated, {"xy": self._p.copy()}

    def _obs(self) -> np.ndarray:
        return self._p.astype(np.float32)

    def cells(self, xy: np.ndarray, cell_size: float | None = None) -> np.ndarray:
        c = self.cell_size if cell_size is None else cell_size
        return np.floor(np.asarray(xy, dtype=np.float64).reshape(-1, 2) / c).astype(np.int64)

    def coverage(self, xy: np.ndarray, cell_size: float | None = None) -> int:
        """Distinct cells ``(floor(x/c), floor(y/c))`` visited by the positions ``xy`` (any shape ``(..., 2)``)."""
        cells = self.cells(xy, cell_size)
        return len(np.unique(cells, axis=0)) if len(cells) else 0

    def goals(self) -> np.ndarray:
        rng = np.random.default_rng(0)
        return rng.uniform(-self.goal_range, self.goal_range, size=(self.n_goals, 2))

    def goal_obs(self, goals: np.ndarray) -> np.ndarray:
        return np.asarray(goals, dtype=np.float32).reshape(-1, 2).copy()

    def xy_of_obs(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs, dtype=np.float64)[..., :2]

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "horizon": self.horizon}


class PointMaze(_Steps):
    """Point in a grid maze (D4RL/gymnasium-robotics maps), numpy, with wall sliding and no corner cutting.

    Cell ``(i, j)`` covers ``x ∈ [j, j+1)``, ``y ∈ [i, i+1)`` in absolute coordinates (unit cells, row
    ``i`` from the top). Observations are positions relative to the start cell's centre, so the first
    observation is (0, 0). A step ``p + clip(a, ±0.2)`` is accepted when it and both axis-aligned
    intermediate points lie in free cells; otherwise the point slides along x, else along y, else stays.
    Coverage counts distinct free cells; goals are the centres of all free cells except the start;
    success radius 0.25 cell.
    """

    name = "point_maze"
    obs_dim = 2
    act_dim = 2

    def __init__(
        self,
        maze: str | Path | Sequence[str] = "medium",
        num_envs: int = 1,
        horizon: int = 100,
        start: tuple[int, int] = (1, 1),
        max_action: float = 0.2,
        success_radius: float = 0.25,
    ) -> None:
        _positive_int("horizon", horizon)
        _positive_int("num_envs", num_envs)
        if not (math.isfinite(max_action) and 0 < max_action < 1):
            raise ValueError(f"max_action must be in (0, 1) cell, got {max_action!r}")
        self.maze_name, self.grid = load_maze(maze)
        self.start = (int(start[0]), int(start[1]))
        rows, cols = self.grid.shape
        i, j = self.start
        if not (0 <= i < rows and 0 <= j < cols) or self.grid[i, j] != 0:
            raise ValueError(
                f"start cell {self.start} is not a free cell of the {rows}x{cols} maze"
            )
        unreachable = sorted(
            set(map(tuple, np.argwhere(self.grid == 0))) - _reachable(self.grid, self.start)
        )
        if unreachable:
            raise ValueError(
                f"maze has free cells unreachable from the start {self.start}: {unreachable[:5]}"
            )
        self.num_envs = num_envs
        self.horizon = horizon
        self.max_action = float(max_action)
        self.success_radius = float(success_radius)
        self.action_low = np.full(2, -self.max_action)
        self.action_high = np.full(2, self.max_action)
        self.origin = np.array([j + 0.5, i + 0.5])  # absolute coordinates of observation (0, 0)
        self.max_cells = int((self.grid == 0).sum())
        self._p = np.zeros((num_envs, 2))
        self._t = 0

    def free(self, xy: np.ndarray) -> np.ndarray:
        """Whether each relative position ``(..., 2)`` lies in a free cell."""
        a = np.asarray(xy, dtype=np.float64) + self.origin
        col = np.floor(a[..., 0]).astype(np.int64)
        row = np.floor(a[..., 1]).astype(np.int64)
        rows, cols = self.grid.shape
        inside = (row >= 0) & (row < rows) & (col >= 0) & (col < cols)
        cell = self.grid[np.clip(row, 0, rows - 1), np.clip(col, 0, cols - 1)]
        return inside & (cell == 0)

    def reset(
        self, *, seed: int | None = None, num_envs: int | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self._start(num_envs)
        self._p = np.zeros((self.num_envs, 2))
        return self._obs(), {"xy": self._p.copy()}

    def step(
        self, action: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        a = np.clip(_check_actions(action, self.num_envs, 2), self.action_low, self.action_high)
        terminated, truncated = self._tick()
        p = self._p
        full = p + a
        only_x = np.stack([p[:, 0] + a[:, 0], p[:, 1]], axis=1)
        only_y = np.stack([p[:, 0], p[:, 1] + a[:, 1]], axis=1)
        ok_x, ok_y = self.free(only_x), self.free(only_y)
        ok_full = self.free(full) & ok_x & ok_y
        new = np.where(ok_full[:, None], full, np.where(ok_x[:, None], only_x, p))
        new = np.where((~ok_full & ~ok_x & ok_y)[:, None], only_y, new)
        self._p = new
        reward = np.zeros(self.num_envs)
        return self._obs(), reward, terminated, truncated, {"xy": self._p.copy()}

    def _obs(self) -> np.ndarray:
        return self._p.astype(np.float32)

    def cells(self, xy: np.ndarray) -> np.ndarray:
        """(row, col) maze cells of relative positions, indexed from absolute coordinates."""
        a = np.asarray(xy, dtype=np.float64).reshape(-1, 2) + self.origin
        return np.stack([np.floor(a[:, 1]), np.floor(a[:, 0])], axis=1).astype(np.int64)

    def coverage(self, xy: np.ndarray) -> int:
        """Distinct free maze cells visited by the positions ``xy`` (at most ``max_cells``)."""
        cells = self.cells(xy)
        if not len(cells):
            return 0
        uniq = np.unique(cells, axis=0)
        rows, cols = self.grid.shape
        ok = (uniq[:, 0] >= 0) & (uniq[:, 0] < rows) & (uniq[:, 1] >= 0) & (uniq[:, 1] < cols)
        uniq = uniq[ok]
        return int((self.grid[uniq[:, 0], uniq[:, 1]] == 0).sum())

    def goals(self) -> np.ndarray:
        free = [tuple(c) for c in np.argwhere(self.grid == 0) if tuple(c) != self.start]
        return np.array([[j + 0.5, i + 0.5] for i, j in free]) - self.origin

    def goal_obs(self, goals: np.ndarray) -> np.ndarray:
        return np.asarray(goals, dtype=np.float32).reshape(-1, 2).copy()

    def xy_of_obs(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs, dtype=np.float64)[..., :2]

    def spec(self) -> dict[str, Any]:
        rows = ["".join(str(int(v)) for v in row) for row in self.grid]
        return {
            "name": self.name,
            "horizon": self.horizon,
            "maze": self.maze_name,
            "maze_rows": rows,
            "start": list(self.start),
        }


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _reachable(grid: np.ndarray, start: tuple[int, int]) -> set[tuple[int, int]]:
    seen = {start}
    queue = deque([start])
    while queue:
        i, j = queue.popleft()
        for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            ni, nj = i + di, j + dj
            if (
                0 <= ni < grid.shape[0]
                and 0 <= nj < grid.shape[1]
                and grid[ni, nj] == 0
                and (ni, nj) not in seen
            ):
                seen.add((ni, nj))
                queue.append((ni, nj))
    return seen


def shortest_path_lengths(grid: np.ndarray, start: tuple[int, int]) -> dict[tuple[int, int], int]:
    """BFS distance (in cells, 4-connected) from ``start`` to every reachable free cell."""
    dist = {start: 0}
    queue = deque([start])
    while queue:
        i, j = queue.popleft()
        for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            ni, nj = i + di, j + dj
            if (
                0 <= ni < grid.shape[0]
                and 0 <= nj < grid.shape[1]
                and grid[ni, nj] == 0
                and (ni, nj) not in dist
            ):
                dist[(ni, nj)] = dist[(i, j)] + 1
                queue.append((ni, nj))
    return dist


def parse_maze(rows: Sequence[str], source: str = "maze") -> np.ndarray:
    """A maze grid from text rows of ``0``/``1`` (or ``.``/``#``), optionally comma- or space-separated.

    Raises ``ValueError`` naming ``source``, the row and the column of anything else (NaN cells, other
    symbols), ragged rows, or a missing outer wall.
    """
    symbols = {"0": 0, "1": 1, ".": 0, "#": 1}
    grid: list[list[int]] = []
    for number, raw in enumerate(rows, 1):
        line = raw.strip()
        if not line:
            continue
        tokens = line.replace(",", " ").split() if ("," in line or " " in line) else list(line)
        row = []
        for col, tok in enumerate(tokens, 1):
            if tok not in symbols:
                raise ValueError(
                    f"{source}: row {number}, column {col}: {tok!r} is not a maze cell "
                    "(expected 0/1 or ./#)"
                )
            row.append(symbols[tok])
        grid.append(row)
    if not grid:
        raise ValueError(f"{source}: empty maze (expected rows of 0/1)")
    widths = {len(r) for r in grid}
    if len(widths) != 1:
        raise ValueError(
            f"{source}: rows have different lengths {sorted(widths)} (not rectangular)"
        )
    arr = np.array(grid, dtype=np.int8)
    if arr.shape[0] < 3 or arr.shape[1] < 3:
        raise ValueError(f"{source}: a maze needs at least 3x3 cells, got {arr.shape}")
    border = np.concatenate([arr[0], arr[-1], arr[:, 0], arr[:, -1]])
    if not np.all(border == 1):
        raise ValueError(f"{source}: the outer boundary must be wall (1) everywhere")
    return arr


def load_maze(maze: str | Path | Sequence[str]) -> tuple[str, np.ndarray]:
    """(name, grid) from a built-in name (``u``, ``medium``, ``large``), a text file, or rows."""
    if isinstance(maze, Path) or (isinstance(maze, str) and maze not in MAZES):
        path = Path(maze)
        if isinstance(maze, str) and not path.exists() and "/" not in maze and "." not in maze:
            raise ValueError(f"unknown maze {maze!r}; choose one of {', '.join(MAZES)} or a file")
        if not path.is_file():
            raise ValueError(f"maze file {path} does not exist")
        text = path.read_text(encoding="utf-8")
        return path.stem, parse_maze(text.splitlines(), source=str(path))
    if isinstance(maze, str):
        return maze, parse_maze(MAZES[maze], source=maze)
    return "custom", parse_maze(list(maze), source="maze rows")


# ------------------------------------------------------------------------------------- gymnasium


class ObsNorm:
    """Fixed per-dimension observation normalisation ``(obs − mean) / std``."""

    def __init__(self, mean: np.ndarray, std: np.ndarray) -> None:
        self.mean = np.asarray(mean, dtype=np.float64)
        self.std = np.maximum(np.asarray(std, dtype=np.float64), 1e-6)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return ((np.asarray(obs, dtype=np.float64) - self.mean) / self.std).astype(np.float32)


class GymVecEnv:
    """Any gymnasium environment with a position in its observation, stepped as ``n`` copies in lockstep.

    ``make`` builds one gymnasium env; ``xy_dims`` are the observation indices of the (x, y) position
    (used for coverage and to build goal observations); ``obs_to_xy`` overrides how a position is read
    from a raw observation. ``obs_key`` picks a key of dict observations (``"observation"``).
    One index in ``xy_dims`` reads a 1-D position (y = 0).
    ``obs_norm`` normalises observations (the raw ones still give the positions). Episodes of
    ``horizon`` steps; an env that terminates early stays at its last observation (masked by the
    trainer through ``terminated``).
    """

    def __init__(
        self,
        make: Callable[[], Any],
        *,
        horizon: int,
        xy_dims: tuple[int, ...] = (0, 1),
        obs_to_xy: Callable[[np.ndarray], np.ndarray] | None = None,
        obs_key: str | None = None,
        num_envs: int = 1,
        cell_size: float = 1.0,
        goals: np.ndarray | None = None,
        success_radius: float = 1.0,
        obs_norm: ObsNorm | None = None,
        name: str = "gym",
        spec_extra: dict[str, Any] | None = None,
        cell_fn: Callable[[np.ndarray], np.ndarray] | None = None,
        max_cells: int | None = None,
    ) -> None:
        _positive_int("horizon", horizon)
        _positive_int("num_envs", num_envs)
        self._make = make
        self._envs: list[Any] = []
        self.horizon = horizon
        self.num_envs = num_envs
        self.xy_dims = tuple(xy_dims)
        self._obs_to_xy = obs_to_xy
        self.obs_key = obs_key
        self.cell_size = float(cell_size)
        self._goals = None if goals is None else np.asarray(goals, dtype=np.float64)
        self.success_radius = float(success_radius)
        self.obs_norm = obs_norm
        self.name = name
        self._spec_extra = dict(spec_extra or {})
        self._cell_fn = cell_fn
        self.max_cells = max_cells
        env = self._pool(1)[0]
        low = np.asarray(env.action_space.low, dtype=np.float64)
        high = np.asarray(env.action_space.high, dtype=np.float64)
        self.action_low, self.action_high = low, high
        self.act_dim = int(low.shape[0])
        raw, _ = env.reset(seed=0)
        self._raw0 = self._flat(raw)
        self.obs_dim = int(self._raw0.shape[0])
        self._raw = np.zeros((num_envs, self.obs_dim))
        self._t = 0

    def _pool(self, n: int) -> list[Any]:
        while len(self._envs) < n:
            self._envs.append(self._make())
        return self._envs[:n]

    def _flat(self, obs: Any) -> np.ndarray:
        if self.obs_key is not None:
            obs = obs[self.obs_key]
        return np.asarray(obs, dtype=np.float64).reshape(-1)

    def _obs(self, raw: np.ndarray) -> np.ndarray:
        return self.obs_norm(raw) if self.obs_norm is not None else raw.astype(np.float32)

    def xy_of_raw(self, raw: np.ndarray) -> np.ndarray:
        if self._obs_to_xy is not None:
            return np.asarray(self._obs_to_xy(raw), dtype=np.float64)
        xy = np.asarray(raw, dtype=np.float64)[..., list(self.xy_dims)]
        if xy.shape[-1] == 1:  # a 1-D position (HalfCheetah, Hopper): y reads as 0
            xy = np.concatenate([xy, np.zeros_like(xy)], axis=-1)
        return xy

    def reset(
        self, *, seed: int | None = None, num_envs: int | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if num_envs is not None:
            _positive_int("num_envs", num_envs)
            self.num_envs = int(num_envs)
        envs = self._pool(self.num_envs)
        raws = []
        for i, env in enumerate(envs):
            raw, _ = env.reset(seed=None if seed is None else int(seed) + i)
            raws.append(self._flat(raw))
        self._raw = np.stack(raws)
        self._done = np.zeros(self.num_envs, dtype=bool)
        self._t = 0
        return self._obs(self._raw), {"xy": self.xy_of_raw(self._raw)}

    def step(
        self, action: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        a = _check_actions(action, self.num_envs, self.act_dim)
        if self._t >= self.horizon:
            raise RuntimeError("the episodes are over (truncated at the horizon): call reset()")
        self._t += 1
        terminated = np.zeros(self.num_envs, dtype=bool)
        for i, env in enumerate(self._envs[: self.num_envs]):
            if self._done[i]:
                terminated[i] = True
                continue
            raw, _, term, _trunc, _ = env.step(np.clip(a[i], self.action_low, self.action_high))
            self._raw[i] = self._flat(raw)
            if term:
                self._done[i] = True
                terminated[i] = True
        truncated = np.full(self.num_envs, self._t >= self.horizon) & ~terminated
        reward = np.zeros(self.num_envs)
        return (
            self._obs(self._raw),
            reward,
            terminated,
            truncated,
            {"xy": self.xy_of_raw(self._raw)},
        )

    def cells(self, xy: np.ndarray) -> np.ndarray:
        pts = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
        if self._cell_fn is not None:
            return np.asarray(self._cell_fn(pts), dtype=np.int64)
        return np.floor(pts / self.cell_size).astype(np.int64)

    def coverage(self, xy: np.ndarray) -> int:
        cells = self.cells(xy)
        return len(np.unique(cells, axis=0)) if len(cells) else 0

    def goals(self) -> np.ndarray:
        if self._goals is None:
            raise ValueError(f"{self.name}: no zero-shot goals were given (pass goals=...)")
        return self._goals.copy()

    def goal_obs(self, goals: np.ndarray) -> np.ndarray:
        """The initial observation (of reset(seed=0)) with its position replaced by each goal."""
        g = np.asarray(goals, dtype=np.float64).reshape(-1, 2)
        raw = np.repeat(self._raw0[None], len(g), axis=0)
        raw[:, list(self.xy_dims)] = g[:, : len(self.xy_dims)]
        return self._obs(raw)

    def spec(self) -> dict[str, Any]:
        spec = {"name": self.name, "horizon": self.horizon, **self._spec_extra}
        if self.obs_norm is not None:
            spec["obs_mean"] = self.obs_norm.mean.tolist()
            spec["obs_std"] = self.obs_norm.std.tolist()
        return spec

    def close(self) -> None:
        for env in self._envs:
            env.close()


def _require_gymnasium(extra: str) -> Any:
    try:
        import gymnasium
    except ImportError as exc:
        raise ImportError(
            f"this environment needs gymnasium: pip install 'rsd-skills[{extra}]'"
        ) from exc
    return gymnasium


def _mujoco_kwargs(gym: Any, env_id: str) -> dict[str, Any]:
    """Keyword arguments that keep the position in the observation and disable unhealthy termination,
    for the gymnasium MuJoCo locomotion envs that accept them (others get none)."""
    try:
        spec = gym.spec(env_id)
    except Exception as exc:  # gymnasium raises its own NameNotFound / VersionNotFound / Error
        raise ValueError(f"unknown gymnasium environment id {env_id!r} ({exc})") from exc
    entry = str(spec.entry_point)
    if "mujoco" not in entry:
        return {}
    import inspect

    cls = gym.envs.registration.load_env_creator(spec.entry_point)
    accepted = set(inspect.signature(cls).parameters)
    wanted = {
        "exclude_current_positions_from_observation": False,
        "include_cfrc_ext_in_observation": False,
        "terminate_when_unhealthy": False,
    }
    return {k: v for k, v in wanted.items() if k in accepted}


def make_gym(
    env_id: str,
    num_envs: int = 1,
    horizon: int = 200,
    xy_dims: Sequence[int] = (0, 1),
    obs_norm: str = "auto",
    norm_steps: int = 10_000,
    seed: int = 0,
    obs_mean: Sequence[float] | None = None,
    obs_std: Sequence[float] | None = None,
    goal_range: float = 10.0,
    n_goals: int = 32,
    success_radius: float = 1.0,
    cell_size: float = 1.0,
    gym_kwargs: dict[str, Any] | None = None,
) -> GymVecEnv:
    """Any registered gymnasium environment id (``"HalfCheetah-v5"``, ``"Hopper-v5"``, ...).

    ``xy_dims``: one or two observation indices that hold the position used for coverage and zero-shot
    goals (one index: a 1-D position, e.g. HalfCheetah's x; y is read as 0). MuJoCo locomotion envs keep
    their root position in the observation (``exclude_current_positions_from_observation=False``) and do
    not terminate when unhealthy, as in METRA/RSD's Ant; index 0 is then the x position. Observations
    are normalised as for Ant (``obs_norm="auto"``: a per-dimension mean/std from ``norm_steps`` seeded
    random-action steps, frozen). Zero-shot goals: ``n_goals`` points uniform in a disc of radius
    ``goal_range`` (seed 0), or for a 1-D position evenly spaced in ``±[2, goal_range]`` (none at the start).
    """
    gym = _require_gymnasium("mujoco")
    if obs_norm not in ("auto", "none"):
        raise ValueError(f"obs_norm must be 'auto' or 'none', got {obs_norm!r}")
    dims = tuple(int(d) for d in xy_dims)
    if len(dims) not in (1, 2) or any(d < 0 for d in dims):
        raise ValueError(f"xy_dims must be one or two observation indices >= 0, got {xy_dims!r}")
    kwargs = {**_mujoco_kwargs(gym, env_id), **(gym_kwargs or {})}

    def make() -> Any:
        return gym.make(env_id, max_episode_steps=10**9, disable_env_checker=True, **kwargs)

    rng = np.random.default_rng(0)
    if len(dims) == 2:
        radius = goal_range * np.sqrt(rng.uniform(size=n_goals))
        angle = rng.uniform(0, 2 * np.pi, size=n_goals)
        goals = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    else:
        half = np.linspace(min(2.0, goal_range), goal_range, max(n_goals // 2, 1))
        line = np.concatenate([-half[::-1], half])  # none within reach of the start
        goals = np.stack([line, np.zeros(len(line))], axis=1)
    env = GymVecEnv(
        make,
        horizon=horizon,
        num_envs=num_envs,
        xy_dims=dims,
        goals=goals,
        success_radius=success_radius,
        cell_size=cell_size,
        name="gym",
        spec_extra={
            "env_id": env_id,
            "xy_dims": list(dims),
            "obs_norm": obs_norm,
            "gym_kwargs": dict(gym_kwargs or {}),
        },
    )
    if max(dims) >= env.obs_dim:
        raise ValueError(
            f"xy_dims {list(dims)} out of range for {env_id}'s {env.obs_dim}-D observation"
        )
    if obs_norm == "auto":
        if obs_mean is not None and obs_std is not None:
            env.obs_norm = ObsNorm(np.asarray(obs_mean), np.asarray(obs_std))
        else:
            env.obs_norm = estimate_obs_norm(env, norm_steps, seed)
    return env


def make_ant(
    num_envs: int = 1,
    horizon: int = 200,
    obs_norm: str = "auto",
    norm_steps: int = 10_000,
    seed: int = 0,
    obs_mean: Sequence[float] | None = None,
    obs_std: Sequence[float] | None = None,
) -> GymVecEnv:
    """gymnasium ``Ant-v5`` as in METRA/RSD: 29-D observation with the torso (x, y), never terminates.

    ``obs_norm="auto"`` estimates a per-dimension mean/std from ``norm_steps`` seeded random-action
    steps and freezes it (METRA uses preset constants instead); ``"none"`` keeps raw observations.
    Zero-shot goals: 32 points uniform in a disc of radius 10 (seed 0); success radius 1.0.
    """
    gym = _require_gymnasium("mujoco")
    try:
        import mujoco  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "the ant environment needs mujoco: pip install 'rsd-skills[mujoco]'"
        ) from exc
    if obs_norm not in ("auto", "none"):
        raise ValueError(f"obs_norm must be 'auto' or 'none', got {obs_norm!r}")

    def make() -> Any:
        return gym.make(
            "Ant-v5",
            exclude_current_positions_from_observation=False,
            include_cfrc_ext_in_observation=False,
            terminate_when_unhealthy=False,
            max_episode_steps=10**9,
            disable_env_checker=True,
        )

    rng = np.random.default_rng(0)
    radius = 10.0 * np.sqrt(rng.uniform(size=32))
    angle = rng.uniform(0, 2 * np.pi, size=32)
    goals = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    env = GymVecEnv(
        make,
        horizon=horizon,
        num_envs=num_envs,
        goals=goals,
        success_radius=1.0,
        name="ant",
        spec_extra={"obs_norm": obs_norm},
    )
    if obs_norm == "auto":
        if obs_mean is not None and obs_std is not None:
            env.obs_norm = ObsNorm(np.asarray(obs_mean), np.asarray(obs_std))
        else:
            env.obs_norm = estimate_obs_norm(env, norm_steps, seed)
    return env


def estimate_obs_norm(env: GymVecEnv, steps: int, seed: int) -> ObsNorm:
    """Mean/std of raw observations over ``steps`` uniform-random-action steps (seeded)."""
    rng = np.random.default_rng(seed)
    n = env.num_envs
    saved_norm, env.obs_norm = env.obs_norm, None
    samples: list[np.ndarray] = []
    episode = 0
    while sum(len(s) for s in samples) < steps:
        env.reset(seed=seed * 1000 + episode * n, num_envs=n)
        episode += 1
        for _ in range(env.horizon):
            a = rng.uniform(env.action_low, env.action_high, size=(n, env.act_dim))
            env.step(a)
            samples.append(env._raw.copy())
    env.obs_norm = saved_norm
    data = np.concatenate(samples)[:steps]
    return ObsNorm(data.mean(axis=0), data.std(axis=0))


def make_gr_point_maze(maze: str = "medium", num_envs: int = 1, horizon: int = 100) -> GymVecEnv:
    """gymnasium-robotics ``PointMaze_<Maze>-v3`` (force-controlled ball), if gymnasium-robotics is installed.

    The observation is the 4-D ``observation`` entry (x, y, vx, vy); episodes start in cell (1, 1)
    (``reset_cell``); coverage counts distinct free maze cells, goals are the other free cells' centres.
    """
    gym = _require_gymnasium("robotics")
    try:
        import gymnasium_robotics
    except ImportError as exc:
        raise ImportError(
            "gr_point_maze needs gymnasium-robotics: pip install 'rsd-skills[robotics]'"
        ) from exc
    gym.register_envs(gymnasium_robotics)
    names = {"u": "UMaze", "medium": "Medium", "large": "Large"}
    if maze not in names:
        raise ValueError(
            f"unknown maze {maze!r} for gr_point_maze; choose one of {', '.join(names)}"
        )
    _, grid = load_maze(maze)
    rows, cols = grid.shape
    start = np.array([1, 1])

    def to_xy(cell: np.ndarray) -> np.ndarray:  # (row, col) centre -> gymnasium-robotics (x, y)
        return np.stack([cell[:, 1] + 0.5 - cols / 2, rows / 2 - (cell[:, 0] + 0.5)], axis=1)

    def cell_fn(xy: np.ndarray) -> np.ndarray:
        return np.stack([np.floor(rows / 2 - xy[:, 1]), np.floor(xy[:, 0] + cols / 2)], axis=1)

    class _StartCell:
        def __init__(self) -> None:
            self.env = gym.make(
                f"PointMaze_{names[maze]}-v3",
                continuing_task=True,
                reset_target=False,
                max_episode_steps=10**9,
                disable_env_checker=True,
            )
            self.action_space = self.env.action_space

        def reset(self, seed: int | None = None) -> Any:
            return self.env.reset(seed=seed, options={"reset_cell": start})

        def step(self, action: np.ndarray) -> Any:
            return self.env.step(action)

        def close(self) -> None:
            self.env.close()

    free = np.argwhere(grid == 0)
    others = free[~np.all(free == start, axis=1)]
    return GymVecEnv(
        _StartCell,
        horizon=horizon,
        num_envs=num_envs,
        obs_key="observation",
        goals=to_xy(others),
        success_radius=0.25,
        name="gr_point_maze",
        spec_extra={"maze": maze},
        cell_fn=cell_fn,
        max_cells=len(free),
    )


def make_env(name: str, num_envs: int = 1, horizon: int | None = None, **kwargs: Any) -> Any:
    """Build an environment by name: ``point``, ``point_maze`` (``maze=``), ``ant``, ``gr_point_maze``, or
    any gymnasium id (``HalfCheetah-v5``; see :func:`make_gym` for ``xy_dims=`` and the rest)."""
    key = name.replace("-", "_")
    if key == "point":
        return PointEnv(num_envs=num_envs, horizon=50 if horizon is None else horizon, **kwargs)
    if key == "point_maze":
        return PointMaze(num_envs=num_envs, horizon=100 if horizon is None else horizon, **kwargs)
    if key == "ant":
        return make_ant(num_envs=num_envs, horizon=200 if horizon is None else horizon, **kwargs)
    if key == "gr_point_maze":
        return make_gr_point_maze(
            num_envs=num_envs, horizon=100 if horizon is None else horizon, **kwargs
        )
    if _looks_like_gym_id(name):
        return make_gym(
            name, num_envs=num_envs, horizon=200 if horizon is None else horizon, **kwargs
        )
    raise ValueError(
        f"unknown environment {name!r}; choose one of {', '.join(ENV_NAMES)} or a gymnasium id "
        "such as HalfCheetah-v5"
    )


def _looks_like_gym_id(name: str) -> bool:
    """A gymnasium id ends in ``-v<N>`` (``HalfCheetah-v5``, ``ALE/Pong-v5``)."""
    head, _, version = name.rpartition("-v")
    return bool(head) and version.isdigit()


def env_from_spec(spec: dict[str, Any]) -> Any:
    """Rebuild an environment from :meth:`spec` (as stored in checkpoints)."""
    spec = dict(spec)
    name = spec.pop("name")
    horizon = spec.pop("horizon")
    if name == "point":
        return PointEnv(horizon=horizon)
    if name == "point_maze":
        return PointMaze(maze=spec["maze_rows"], horizon=horizon, start=tuple(spec["start"]))
    if name == "ant":
        return make_ant(
            horizon=horizon,
            obs_norm=spec.get("obs_norm", "auto"),
            obs_mean=spec.get("obs_mean"),
            obs_std=spec.get("obs_std"),
        )
    if name == "gr_point_maze":
        return make_gr_point_maze(maze=spec["maze"], horizon=horizon)
    if name == "gym":
        return make_gym(
            spec["env_id"],
            horizon=horizon,
            xy_dims=tuple(spec["xy_dims"]),
            obs_norm=spec.get("obs_norm", "auto"),
            obs_mean=spec.get("obs_mean"),
            obs_std=spec.get("obs_std"),
            gym_kwargs=spec.get("gym_kwargs"),
        )
    raise ValueError(
        f"cannot rebuild environment {name!r} from a checkpoint; pass env= to SkillTrainer.load"
    )
