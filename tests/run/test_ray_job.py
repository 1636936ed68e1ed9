"""The README's cluster recipe, run as written (ports, the example and its options aside) on Ray 2.60:
``ray get-auth-token --generate``, ``ray start --head``, ``ray job submit ... -- python <tuned example>`` and a
plain ``rllib-llm train`` that joins the running cluster.

The commands are read from the README's code block, so the test fails when the README's recipe does. Ray's
token authentication is on (the default for local clusters since Ray 2.59): the token lives in a
throwaway ``$HOME/.ray/auth_token``, not the user's. The head node (``--block``, free ports, its own temp
dir) runs in a new process session ended in a ``finally``: never ``ray stop``, which would stop every Ray
cluster of the user on the machine. The job's status is read through the dashboard's REST API
(``/api/jobs/<id>``, with the token), which is what ``ray job status`` reads.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.run.conftest import TINY_EXAMPLE

ROOT = Path(__file__).resolve().parents[2]
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def wait_for_dashboard(url: str, head: subprocess.Popen, token: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise RuntimeError(f"ray start exited with {head.returncode}")
        try:
            get_json(f"{url}/api/version", token)
            return
        except (OSError, ValueError) as e:
            last_error = e
        time.sleep(2)
    raise TimeoutError(f"Ray dashboard at {url} not up after {timeout} s: {last_error!r}")


def stop_session(process: subprocess.Popen) -> None:
    """SIGTERM to the head's process group (ours: started with start_new_session), then SIGKILL."""
    for sig, grace in ((signal.SIGTERM, 45), (signal.SIGKILL, 10)):  # Ray drains for up to 30 s
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        time.sleep(2)  # let the group's other members go too


def readme_cluster_commands() -> list[str]:
    """The bash block of the README's cluster section, one command per entry (continuations joined)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("**On a Ray cluster**"):]
    block = section[section.index("```bash") + len("```bash"): section.index("```", section.index("```bash") + 7)]
    commands, current = [], ""
    for line in block.splitlines():
        line = line.split("  #")[0].rstrip()
        if not line.strip():
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            commands.append(current.strip())
            current = ""
    return commands


def get_json(url: str, token: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read().decode())


@pytest.mark.slow
def test_readme_cluster_recipe_runs_as_written(tmp_path):
    commands = readme_cluster_commands()
    assert [c.split()[:2] for c in commands] == [
        ["export", "RAY_AUTH_MODE=token"], ["ray", "get-auth-token"], ["ray", "start"], ["ray", "job"]
    ]
    export_cmd, token_cmd, start_cmd, submit_cmd = commands
    gcs_port, dashboard_port, client_port, agent_port = free_ports(4)
    temp_dir = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # short: Ray's unix sockets live under it
    home = tmp_path / "home"
    home.mkdir()
    url = f"http://127.0.0.1:{dashboard_port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT))
    env.update([export_cmd.split()[1].split("=", 1)])  # the README's export, for every command after it
    generated = subprocess.run(shlex.split(token_cmd), env=env, capture_output=True, text=True, timeout=120)
    assert generated.returncode == 0, generated.stderr
    token = (home / ".ray" / "auth_token").read_text().strip()
    assert token
    log = open(tmp_path / "ray_start.log", "w")
    head = subprocess.Popen(
        [*shlex.split(start_cmd), "--block", f"--port={gcs_port}", "--node-ip-address=127.0.0.1",
         f"--dashboard-port={dashboard_port}", "--include-dashboard=true", f"--ray-client-server-port={client_port}",
         f"--dashboard-agent-listen-port={agent_port}", "--num-cpus=2", f"--temp-dir={temp_dir}",
         "--disable-usage-stats"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    try:
        wait_for_dashboard(url, head, token, timeout=240)
        job_id = f"rllib-llm-test-{uuid.uuid4().hex[:8]}"
        # The README's submit line on this test's port, with the tiny example and a short run instead.
        argv = shlex.split(submit_cmd.replace("http://127.0.0.1:8265", url))
        job_out = tmp_path / "job_run"
        argv = [*argv[: argv.index("--")], "--submission-id", job_id, "--no-wait", "--", "python", TINY_EXAMPLE,
                "--iterations", "1", "--no-eval", "--no-tracking", "--output", str(job_out)]
        submit = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert submit.returncode == 0, submit.stdout + submit.stderr
        deadline = time.monotonic() + 480
        status = None
        while time.monotonic() < deadline:
            status = get_json(f"{url}/api/jobs/{job_id}", token)["status"]
            if status in TERMINAL:
                break
            time.sleep(3)
        logs = get_json(f"{url}/api/jobs/{job_id}/logs", token)["logs"]
        assert status == "SUCCEEDED", f"job {status}:\n{logs[-4000:]}"
        assert "Checkpoint saved to" in logs
        rows = [json.loads(line) for line in (job_out / "progress.jsonl").read_text().splitlines()]
        assert [r["iter"] for r in rows] == [1.0] and (job_out / "checkpoint" / "rllib_checkpoint.json").is_file()

        # A plain `rllib-llm train` on this machine joins the running cluster instead of failing.
        local_out = tmp_path / "local_run"
        joined = subprocess.run(
            [sys.executable, "-m", "rllib_llm.run.cli", "train", TINY_EXAMPLE, "--iterations", "1", "--no-eval",
             "--no-tracking", "--output", str(local_out)],
            cwd=ROOT, env={**env, "RAY_ADDRESS": f"127.0.0.1:{gcs_port}"}, capture_output=True, text=True, timeout=480,
        )
        assert joined.returncode == 0, joined.stdout[-2000:] + joined.stderr[-4000:]
        assert (local_out / "checkpoint" / "rllib_checkpoint.json").is_file()
    finally:
        stop_session(head)
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)
