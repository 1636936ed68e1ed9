"""The Docker images install what the README installs (Docker cannot run here: the files are read)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = (ROOT / "docker" / dockerfile).read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^(\w+)\s+(.*)$", joined, re.MULTILINE)]


def runs(dockerfile: str) -> list[str]:
    return [args for instruction, args in instructions(dockerfile) if instruction == "RUN"]


def shell_commands(script: str) -> list[list[str]]:
    """The commands of a bash script (comments and `set` lines dropped), each split like the shell does."""
    lines = (ROOT / script).read_text().splitlines()
    return [shlex.split(line) for line in lines if line.strip() and not line.lstrip().startswith(("#", "set "))]


def test_cpu_image_runs_the_readme_install_script_before_copying_the_code():
    """Dependencies are installed from the package metadata before the code is copied (an edit does not
    reinstall them), from torch's CPU index, and the embedded model is converted into the image."""
    steps = runs("Dockerfile.cpu")
    install = [i for i, step in enumerate(steps) if step.split() == ["bash", "scripts/install_cpu.sh"]]
    assert install, steps
    items = instructions("Dockerfile.cpu")
    copies = [(i, args) for i, (instruction, args) in enumerate(items) if instruction == "COPY"]
    run_install = next(i for i, (instruction, args) in enumerate(items) if args.split() == ["bash", "scripts/install_cpu.sh"])
    whole = [i for i, args in copies if args == ". ."]
    assert whole and whole[0] > run_install  # the code comes after the dependency layer
    early = " ".join(args for i, args in copies if i < run_install).split()
    for needed in ("setup.cfg", "pyproject.toml", "README.md", "requirements-cpu.txt", "scripts/install_cpu.sh",
                   "rllib_llm/__init__.py"):
        assert needed in early and (ROOT / needed).is_file(), needed
    env = " ".join(args for instruction, args in items if instruction == "ENV")
    assert "PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu" in env and "RLLIB_LLM_CACHE=" in env
    assert any("load_causal_lm(EMBEDDED_MODEL)" in step for step in steps[install[0] + 1 :])
    assert any(instruction == "VOLUME" and "runs" in args and "mlruns" in args for instruction, args in items)
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/install_cpu.sh && rllib-llm train tuned_examples/numberline_gigpo.py" in readme


def test_install_script_installs_requirements_cpu_and_they_install_the_package():
    commands = shell_commands("scripts/install_cpu.sh")
    pip = [c for c in commands if c[:4] == ["python3", "-m", "pip", "install"]]
    assert any(c[c.index("-r") + 1] == "requirements-cpu.txt" for c in pip if "-r" in c), pip
    requirements = [line.split("#")[0].strip() for line in (ROOT / "requirements-cpu.txt").read_text().splitlines()]
    [package] = [r for r in requirements if r.startswith("-e .[")]
    assert {"cpu", "test"} <= set(package.removeprefix("-e .[").rstrip("]").split(","))


@pytest.mark.parametrize("dockerfile", ["Dockerfile.cpu", "Dockerfile.cuda"])
def test_images_default_to_the_readme_main_job(dockerfile):
    [cmd] = [args for instruction, args in instructions(dockerfile) if instruction == "CMD"]
    assert cmd == '["rllib-llm", "train", "tuned_examples/numberline_gigpo.py"]'
    assert (ROOT / "tuned_examples" / "numberline_gigpo.py").is_file()


def test_cuda_image_installs_the_gpu_extra_on_a_cuda_base():
    [base] = [args for instruction, args in instructions("Dockerfile.cuda") if instruction == "FROM"]
    assert base.startswith("nvidia/cuda:") and "-devel-" in base  # flash-attn compiles against CUDA headers
    steps = runs("Dockerfile.cuda")
    editable = [s for s in steps if re.search(r'pip install .*-e "\.\[[^\]]*\bgpu\b', s)]
    assert editable, steps
    flash = [i for i, s in enumerate(steps) if "flash-attn" in s]
    torch_first = [i for i, s in enumerate(steps) if re.search(r"pip install vllm\b", s)]
    assert flash and torch_first and torch_first[0] < flash[0] and "--no-build-isolation" in steps[flash[0]]
    gpu_extra = re.search(r"^gpu =\n((?:    .*\n)+)", (ROOT / "setup.cfg").read_text(), re.MULTILINE)
    assert gpu_extra and {"vllm", "flash-attn"} <= {line.split()[0] for line in gpu_extra.group(1).splitlines()}
