"""A real Flower deployment on loopback: one SuperLink, two SuperNodes, ``flwr run`` of this
package's app for 2 rounds; the result equals the reference loop. Time-bounded (~1-3 min on 2
cores, mostly process start-up); set FEDGMT_SKIP_DEPLOY_TEST=1 to skip it."""

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bin(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} not found next to {sys.executable}")
    return str(path)


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("FEDGMT_SKIP_DEPLOY_TEST") == "1", reason="FEDGMT_SKIP_DEPLOY_TEST=1"
)
def test_superlink_two_supernodes_two_rounds(tmp_path):
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
        fh = open(tmp_path / log, "w")
        procs.append(subprocess.Popen(args, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                      start_new_session=True))  # fmt: skip

    try:
        start([_bin("flower-superlink"), "--insecure", "--port", str(link), "--database",
               str(tmp_path / "state.db"), "--disable-runtime-dependency-installation"],
              "superlink.log")  # fmt: skip
        time.sleep(3)
        for pid, port in ((0, n0), (1, n1)):
            start([_bin("flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{link}",
                   "--port", str(port), "--node-config", f"partition-id={pid} num-partitions=2"],
                  f"supernode{pid}.log")  # fmt: skip
        run_config = f"num-clients=2 num-server-rounds=2 beta=100.0 local-epochs=1 out-dir='{out}'"
        res = subprocess.run(
            [_bin("flwr"), "run", str(APP_DIR), "local-deploy", "--stream", "--run-config", run_config],
            env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
        )  # fmt: skip
        deadline = time.time() + 30
        while not (out / "results.json").exists() and time.time() < deadline:
            time.sleep(1)
        assert (out / "results.json").exists(), res.stdout[-3000:] + res.stderr[-3000:]
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
    got = json.loads((out / "results.json").read_text())["history"]
    ref = run_reference(FedConfig(num_clients=2, num_rounds=2, beta=100.0, local_epochs=1))
    assert got["accuracy"] == pytest.approx(ref.accuracy, abs=1e-9)
