"""Ecosystem fixtures: one tracked CLI training run of the tiny example, shared by the tracking,
trajectory and plot tests (a run costs about a minute on 2 shared cores)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

TINY_EXAMPLE = "tests/fixtures/tiny_numberline.py"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="session")
def tracked_run(tmp_path_factory, ray_session):
    """``rllib-llm train`` of the tiny example, tracked to a fresh local MLflow store."""
    from rllib_llm.run.cli import main

    root = tmp_path_factory.mktemp("tracked")
    run_dir, mlruns = root / "run", root / "mlruns"
    argv = ["train", TINY_EXAMPLE, "--output", str(run_dir), "--tracking-uri", str(mlruns), "--experiment", "eco"]
    assert main(argv) == 0
    return {"run_dir": run_dir, "mlruns": mlruns, "summary": json.loads((run_dir / "summary.json").read_text())}


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG file, checking its signature and IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])
