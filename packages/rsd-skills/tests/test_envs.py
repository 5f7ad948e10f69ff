import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rsd_skills.envs import (
    MAZES,
    PointEnv,
    PointMaze,
    load_maze,
    make_env,
    parse_maze,
    shortest_path_lengths,
)


def test_point_env_dynamics_and_truncation():
    env = PointEnv(horizon=5)
    obs, info = env.reset(seed=0, num_envs=2)
    np.testing.assert_array_equal(obs, np.zeros((2, 2), dtype=np.float32))
    p = np.zeros((2, 2))
    actions = np.array([[0.1, -0.05], [0.5, -0.7]])  # the second row is clipped to ±0.2
    for t in range(5):
        obs, reward, terminated, truncated, info = env.step(actions)
        p = p + np.clip(actions, -0.2, 0.2)
        np.testing.assert_allclose(info["xy"], p, atol=0)
        np.testing.assert_allclose(obs, p.astype(np.float32))
        assert not terminated.any()
        assert truncated.all() == (t == 4)
        assert (reward == 0).all()
    with pytest.raises(RuntimeError, match="reset"):
        env.step(actions)


@pytest.mark.parametrize(
    ("name", "free", "farthest"), [("u", 7, 6), ("medium", 26, 11), ("large", 46, 15)]
)
def test_maze_free_cells_reachability_and_longest_path(name, free, farthest):
    env = PointMaze(name)
    assert env.max_cells == free
    dist = shortest_path_lengths(env.grid, (1, 1))
    assert len(dist) == free  # every free cell is reachable from the start
    assert max(dist.values()) == farthest
    assert len(env.goals()) == free - 1


@settings(max_examples=10)
@given(st.integers(0, 2**31 - 1), st.sampled_from(["u", "medium", "large"]))
def test_random_actions_never_enter_a_wall(seed, maze):
    rng = np.random.default_rng(seed)  # 10k random actions per example
    env = PointMaze(maze, horizon=1000)
    env.reset(num_envs=10)
    for _ in range(1000):
        _, _, _, _, info = env.step(rng.uniform(-0.3, 0.3, size=(10, 2)))
        assert env.free(info["xy"]).all()


def test_no_corner_cutting_around_a_wall_corner():
    # a ring around the wall cell (2,2); from (1,2) a diagonal step down-left towards (2,1) would pass
    # the corner of the wall (2,2): the full move is refused and the point slides along x into (1,1)
    env = PointMaze(["11111", "10001", "10101", "10001", "11111"], horizon=10)
    env.reset(num_envs=1)
    env._p = np.array([[0.55, 0.45]])  # absolute (2.05, 1.95): cell (1,2), next to the corner
    _, _, _, _, info = env.step(np.array([[-0.1, 0.1]]))
    np.testing.assert_allclose(info["xy"], [[0.45, 0.45]])
    assert env.cells(info["xy"]).tolist() == [[1, 1]]


def test_sliding_along_a_wall_keeps_the_free_component():
    env = PointMaze(
        "medium", horizon=10
    )  # cell (0,1) above the start is wall; (1,2) to the right is free
    env.reset(num_envs=1)
    env._p = np.array([[0.0, -0.45]])
    _, _, _, _, info = env.step(np.array([[0.15, -0.2]]))  # y would enter the wall
    np.testing.assert_allclose(info["xy"], [[0.15, -0.45]])


def test_coverage_of_a_hand_made_trajectory():
    env = PointMaze("medium")
    # start cell (1,1), right to (1,2), down to (2,2) and back: 3 distinct free cells; a point in the wall
    # cell (0,1) does not count
    xy = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [1.0, 0.2], [0.0, -1.0]])
    assert env.coverage(xy) == 3
    assert PointEnv().coverage(np.array([[0.1, 0.1], [0.9, 0.2], [1.1, 0.0], [-0.1, 0.0]])) == 3


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["1111", "101", "1111"], "not rectangular"),
        (["1111", "1001", "1011"], "outer boundary"),
        (["11111", "10x01", "11111"], "row 2, column 3"),
        (["11111", "10nan", "11111"], "row 2"),
        ([], "empty maze"),
    ],
)
def test_bad_maps_are_rejected(rows, message):
    with pytest.raises(ValueError, match=message):
        parse_maze(rows)


def test_start_on_a_wall_unknown_maze_and_unreachable_cells():
    with pytest.raises(ValueError, match="start cell"):
        PointMaze("medium", start=(0, 0))
    with pytest.raises(ValueError, match="unknown maze 'huge'"):
        load_maze("huge")
    with pytest.raises(ValueError, match="unreachable"):
        PointMaze(["11111", "10101", "11111"])
    with pytest.raises(ValueError, match="unknown environment"):
        make_env("mars")


def test_maze_file_round_trip(tmp_path):
    path = tmp_path / "m.txt"
    path.write_text("\n".join(r.replace("1", "#").replace("0", ".") for r in MAZES["u"]) + "\n")
    env = PointMaze(path)
    assert env.max_cells == 7
    np.testing.assert_array_equal(env.grid, PointMaze("u").grid)


def test_bad_actions_are_rejected():
    env = PointMaze("u")
    env.reset(num_envs=2)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.array([[0.0, np.nan], [0.0, 0.0]]))
