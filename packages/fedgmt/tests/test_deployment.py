"""A real Flower deployment on loopback: one SuperLink, two SuperNodes, ``flwr run`` of this
package's app, with a fault and a resume:

1. run 1 (2 rounds, duals kept on the server): after round 1 SuperNode 1 is killed (SIGKILL); round
   2 aggregates SuperNode 0's update alone and the run log records the missing client;
2. SuperNode 1 is restarted (its memory is gone) and run 2 (``resume=true``) continues from the
   checkpoint to round 3 with both nodes;
3. the accuracies equal the reference loop's with partition 1 absent in round 2.

Time-bounded (~1-3 min on 2 cores, mostly process start-up and the round timeout); set
FEDGMT_SKIP_DEPLOY_TEST=1 to skip it."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fedgmt import FedConfig, run_reference

APP_DIR = Path(__file__).resolve().parents[1]
TIMEOUT_S = 300
ROUND_TIMEOUT = 45.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bin(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} not found next to {sys.executable}")
    return str(path)


def _kill(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("FEDGMT_SKIP_DEPLOY_TEST") == "1", reason="FEDGMT_SKIP_DEPLOY_TEST=1"
)
def test_killed_supernode_and_resume_on_a_real_deployment(tmp_path):
    if not (APP_DIR / "pyproject.toml").exists():
        pytest.skip(f"Flower app folder not found at {APP_DIR}")
    home, out = tmp_path / "flwr_home", tmp_path / "out"
    home.mkdir()
    link, n0, n1 = _free_port(), _free_port(), _free_port()
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "local-deploy"\n\n[superlink.local-deploy]\n'
        f'address = "127.0.0.1:{link}"\ninsecure = true\n'
    )
    env = {**os.environ, "FLWR_HOME": str(home), "FLWR_TELEMETRY_ENABLED": "0",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    procs: list[subprocess.Popen] = []

    def start(args, log):
        fh = open(tmp_path / log, "a")
        procs.append(subprocess.Popen(args, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                      start_new_session=True))  # fmt: skip
        return procs[-1]

    def supernode(pid, port):
        return start([_bin("flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{link}",
                      "--port", str(port), "--node-config", f"partition-id={pid} num-partitions=2"],
                     f"supernode{pid}.log")  # fmt: skip

    common = (f"num-clients=2 fraction-train=1.0 beta=100.0 local-epochs=1 dual-store='server' "
              f"round-timeout={ROUND_TIMEOUT} out-dir='{out}'")  # fmt: skip

    def flwr_run(extra, log):
        return start([_bin("flwr"), "run", str(APP_DIR), "local-deploy", "--stream",
                      "--run-config", f"{common} {extra}"], log)  # fmt: skip

    def wait_for(cond, what, proc=None):
        deadline = time.time() + TIMEOUT_S
        while not cond():
            if time.time() > deadline:
                logs = "".join(p.read_text()[-2000:] for p in sorted(tmp_path.glob("*.log")))
                raise AssertionError(f"timed out waiting for {what}\n{logs}")
            time.sleep(0.5)

    def rounds_logged():
        path = out / "rounds.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    try:
        start([_bin("flower-superlink"), "--insecure", "--port", str(link), "--database",
               str(tmp_path / "state.db"), "--disable-runtime-dependency-installation"],
              "superlink.log")  # fmt: skip
        time.sleep(3)
        supernode(0, n0)
        node1 = supernode(1, n1)
        run1 = flwr_run("num-server-rounds=2", "run1.log")
        wait_for(lambda: len(rounds_logged()) >= 1, "round 1 of run 1")
        _kill(node1, signal.SIGKILL)  # SuperNode 1 crashes: its context.state is gone
        wait_for(lambda: (out / "results.json").exists(), "the end of run 1")
        run1.wait(timeout=60)
        first = json.loads((out / "results.json").read_text())["history"]
        (out / "results.json").unlink()
        supernode(1, n1 + 0)  # restarted SuperNode 1 (a new node, empty memory)
        run2 = flwr_run("num-server-rounds=3 resume=true", "run2.log")
        wait_for(lambda: (out / "results.json").exists(), "the end of run 2 (resumed)")
        run2.wait(timeout=60)
    finally:
        for p in procs:
            _kill(p, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _kill(p, signal.SIGKILL)
    got = json.loads((out / "results.json").read_text())["history"]
    lines = rounds_logged()
    assert first["rounds"] == [1, 2] and got["rounds"] == [1, 2, 3]
    assert [x["replied"] for x in lines] == [[0, 1], [0], [0, 1]]
    assert [(f["round"], f["partition_id"]) for f in got["failures"]] == [(2, 1)]
    cfg = FedConfig(num_clients=2, num_rounds=3, beta=100.0, local_epochs=1, fraction_train=1.0,
                    dual_store="server", round_timeout=ROUND_TIMEOUT)  # fmt: skip
    ref = run_reference(cfg, absent={(2, 1)})
    assert got["accuracy"] == pytest.approx(ref.accuracy, abs=1e-9)
