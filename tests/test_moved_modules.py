"""Old import paths of moved modules: the module at its new place, with RLlib's deprecation warning."""

import importlib
import subprocess
import sys

import pytest

from rllib_llm.moved_modules import MOVED


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_import_path_gives_the_moved_module(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_a_tuned_example_of_the_old_layout_runs_its_imports_and_is_warned(tmp_path):
    """What an example written against the earlier layout does: ``from rllib_llm.cli import ...``."""
    code = ("import logging; logging.basicConfig(level=logging.WARNING)\n"
            "from rllib_llm.cli import load_tuned_example, run_example\n"
            "from rllib_llm.run.cli import load_tuned_example as new\n"
            "assert load_tuned_example is new\n"
            "print('ok')\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    assert "`import rllib_llm.cli` has been deprecated. Use `import rllib_llm.run.cli` instead." in done.stderr


def test_unknown_names_still_fail():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("rllib_llm.no_such_module")
