"""The run folder: what ``--overwrite`` may delete, an ``--output`` that is a file, an unwritable folder."""

from __future__ import annotations

import json
import os

import pytest

from rllib_llm.run.cli import RUN_MARKER, UserError, is_write_failure, prepare_run_folder


def test_overwrite_deletes_only_a_folder_an_rllib_llm_run_wrote(tmp_path):
    """Another tool's folder (its own summary.json and checkpoint/) was deleted by --overwrite: refused now,
    nothing touched; a folder with our marker is replaced."""
    other = tmp_path / "other"
    (other / "checkpoint").mkdir(parents=True)
    (other / "checkpoint" / "epoch=9.ckpt").write_text("weights")
    (other / "summary.json").write_text("{}")
    with pytest.raises(UserError, match="no rllib-llm run wrote it.*nothing deleted"):
        prepare_run_folder(other, resume=False, overwrite=True)
    assert (other / "checkpoint" / "epoch=9.ckpt").is_file() and (other / "summary.json").is_file()

    ours = tmp_path / "ours"
    prepare_run_folder(ours, resume=False, overwrite=False).close()
    assert (ours / RUN_MARKER).is_file()
    (ours / "summary.json").write_text("{}")
    prepare_run_folder(ours, resume=False, overwrite=True).close()
    assert not (ours / "summary.json").exists()


def test_a_run_folder_from_before_the_marker_is_recognised_by_its_progress_rows(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    (old / "progress.jsonl").write_text(json.dumps({"iter": 1.0, "success": 0.5, "wall_time": 1.0}) + "\n")
    prepare_run_folder(old, resume=False, overwrite=True).close()
    assert not (old / "progress.jsonl").exists()


def test_an_output_that_is_a_file_is_one_line(tmp_path):
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    with pytest.raises(UserError, match="is a file, not a folder"):
        prepare_run_folder(file, resume=False, overwrite=False)
    assert file.read_text() == "mine"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_run_folder_is_one_line(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(UserError, match="Cannot write the run folder"):
            prepare_run_folder(folder, resume=False, overwrite=False)
    finally:
        folder.chmod(0o700)


def test_write_failures_are_told_apart_from_other_os_errors():
    """pyarrow's errors (a checkpoint written into a folder made unwritable mid-run) carry the text only."""
    assert is_write_failure(OSError("[Errno 13] Permission denied: 'run/checkpoint.tmp'"))
    assert is_write_failure(PermissionError(13, "Permission denied"))
    assert is_write_failure(OSError(28, "No space left on device"))
    assert not is_write_failure(ConnectionRefusedError(111, "Connection refused"))


def test_a_folder_that_becomes_unwritable_mid_run_ends_the_run_in_one_line(tmp_path, monkeypatch, capsys):
    """The checkpoint save failing for lack of permission (pyarrow's 27-line traceback before): rc 2, one line."""
    from pathlib import Path

    from rllib_llm.run import cli

    example = Path(__file__).resolve().parents[1] / "fixtures" / "standin_example.py"
    monkeypatch.setattr(cli, "init_ray", lambda: None)

    def refuse(*args, **kwargs):
        raise OSError(f"[Errno 13] Permission denied: '{tmp_path}/run/checkpoint.tmp'")

    monkeypatch.setattr(cli, "save_checkpoint", refuse)
    code = cli.main(["train", str(example), "--output", str(tmp_path / "run"), "--iterations", "2", "--no-tracking",
                     "--eval-seeds", "2"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"rllib-llm: error: Cannot write the run in {tmp_path / 'run'}: [Errno 13] Permission denied")


def test_resume_of_a_folder_no_run_wrote_is_refused_and_an_empty_progress_file_blocks_nothing(tmp_path):
    """``--resume`` on a mistyped folder silently started from scratch; a run killed before its first row left
    an empty progress.jsonl that refused the plain rerun until --overwrite."""
    with pytest.raises(UserError, match="does not exist"):
        prepare_run_folder(tmp_path / "typo", resume=True, overwrite=False)
    assert not (tmp_path / "typo").exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("someone else's")
    with pytest.raises(UserError, match="holds no run to continue"):
        prepare_run_folder(tmp_path / "other", resume=True, overwrite=False)
    (tmp_path / "empty").mkdir()  # a run killed right after making its folder: nothing to lose
    prepare_run_folder(tmp_path / "empty", resume=True, overwrite=False).close()
    killed = tmp_path / "killed"
    prepare_run_folder(killed, resume=False, overwrite=False).close()  # started: marker written
    (killed / "progress.jsonl").write_text("")
    prepare_run_folder(killed, resume=True, overwrite=False).close()  # continues (from scratch)
    prepare_run_folder(killed, resume=False, overwrite=False).close()  # or starts anew: nothing to lose


def test_the_seed_must_not_be_negative():
    import argparse

    from rllib_llm.run.cli import add_train_options

    parser = argparse.ArgumentParser()
    add_train_options(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--seed", "-1"])
    assert parser.parse_args(["--seed", "0"]).seed == 0
