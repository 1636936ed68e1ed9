"""Smoke tests: every benchmark at its very smallest size on the tiny model writes the rows it promises.

The benchmarks themselves are not part of the suite (they time things); these only check that each script
still runs end to end and that its JSON has the expected shape.
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks._common import format_table, resolve_size

TINY = "tiny-random-llama"


REPO = Path(__file__).resolve().parents[2]

def run_benchmark(name: str, tmp_path: Path, *argv: str) -> dict[str, Any]:
    """Runs ``benchmarks/<name>.py`` in-process, writing to ``tmp_path``; returns its JSON."""
    output = tmp_path / f"{name}.json"
    importlib.import_module(f"benchmarks.{name}").main([*argv, "--output", str(output)])
    results = json.loads(output.read_text())
    assert results["benchmark"] == name
    machine = results["machine"]
    assert {"date", "cores", "cpu", "torch", "load_avg"} <= set(machine)
    return results


def test_size_presets_and_numbers():
    presets = {"small": {"steps": 2, "tokens": 8}, "medium": {"steps": 4, "tokens": 16}}
    assert resolve_size("medium", presets, "steps") == {"steps": 4, "tokens": 16}
    assert resolve_size("7", presets, "steps") == {"steps": 7, "tokens": 8}
    for bad in ("huge", "0", "1.5"):
        with pytest.raises(SystemExit):
            resolve_size(bad, presets, "steps")


def test_table_formats_columns_and_missing_values():
    table = format_table([{"a": 1, "b": 0.12345}, {"a": 10, "b": None}], ["a", ("b", ".2f")])
    assert table.splitlines() == [" a     b", " 1  0.12", "10     -"]


def test_context_growth(tmp_path):
    results = run_benchmark("context_growth", tmp_path, "--model", TINY, "--size", "4", "--episodes", "2")
    rows = results["rows"]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert rows[0]["ratio"] == pytest.approx(1.0)
    assert all(r["full_history_tokens"] >= r["sliding_window_tokens"] for r in rows[1:])
    assert results["summary"]["ratio_at_last_step"] == rows[-1]["ratio"]
    assert (tmp_path / "context_growth.png").stat().st_size > 0


def test_rollout_throughput(tmp_path):
    results = run_benchmark("rollout_throughput", tmp_path, "--model", TINY, "--size", "1", "--envs", "1", "2")
    rows = results["rows"]
    assert [(r["envs"], r["mode"]) for r in rows] == [
        (1, "batched"),
        (1, "one_at_a_time"),
        (2, "batched"),
        (2, "one_at_a_time"),
    ]
    for row in rows:
        assert row["env_steps"] == row["envs"]  # one env step each
        assert row["generated_tokens"] == 8 * row["env_steps"]  # fixed-length responses
        assert row["generate_calls"] == (1 if row["mode"] == "batched" else row["envs"])
        assert row["env_steps_per_s"] > 0 and row["tokens_per_s"] > 0
        assert row["load_avg_1m"] is not None
        # The generate calls' share of the wall time, and raw generate throughput on the same prompts.
        assert 0 < row["runner_vs_generate"] <= 1
        assert row["generate_tokens_per_s"] == pytest.approx(row["tokens_per_s"] / row["runner_vs_generate"])
    assert set(results["summary"]["speedup_by_envs"]) == {"1", "2"}
    assert results["summary"]["backend"] == "hf"


def test_vllm_gpu_log_prob_agreement_by_hand():
    from benchmarks.vllm_gpu import agreement

    # sampler log-probs vs learner log-probs: diffs 0.1 and 0 -> ratios exp(-0.1) and 1
    row = agreement([[-1.0, -2.0]], [[-1.1, -2.0]])
    assert row["tokens"] == 2 and row["max_abs_diff"] == pytest.approx(0.1) and row["mean_abs_diff"] == pytest.approx(0.05)
    assert row["ratio_min"] == pytest.approx(0.904837, abs=1e-6) and row["ratio_max"] == 1.0
    assert row["ratio_mean"] == pytest.approx((0.904837 + 1) / 2, abs=1e-6)
    assert row["ratio_outside_clip_0.2"] == 0.0
    assert agreement([[0.0]], [[-0.3]])["ratio_outside_clip_0.2"] == 1.0  # exp(-0.3) = 0.74 < 0.8


def test_vllm_gpu_wrappers_are_valid_configs_for_every_run(tmp_path):
    from benchmarks.vllm_gpu import RUNS, wrapper_source
    from rllib_llm.run.cli import load_tuned_example

    for name in RUNS:
        path = tmp_path / f"{name}.py"
        path.write_text(wrapper_source(name, 3))
        config, _ = load_tuned_example(path)
        config.validate()
        assert config.seed == 3 and config.llm_model["inference_dtype"] == "bfloat16"
        assert config.generation_backend == ("hf" if name.startswith("hf") else "vllm")
        assert (config.llm_model.get("lora") is None) == (name in ("vllm_full", "vllm_tictactoe"))


def test_learning(tmp_path, ray_session):  # ~12 s on 2 idle cores, plus Ray's start if no test started it
    results = run_benchmark("learning", tmp_path, "--model", TINY, "--size", "1", "--seeds", "0")
    rows = results["rows"]
    assert [(r["algo"], r["seed"], r["iteration"]) for r in rows] == [("gigpo", 0, 1), ("grpo", 0, 1)]
    assert [r["estimator"] for r in results["summary"]["runs"]] == ["gigpo", "grpo"]
    curves = results["summary"]["curves"]
    assert set(curves) == {"gigpo", "grpo"} and curves["gigpo"]["iteration"] == [1]
    # Success over the iteration's 2 x 2 episodes: a multiple of 1/4 (a per-step or NaN rate is not).
    assert all(r["success_rate"] * 4 == round(r["success_rate"] * 4) and r["wall_s"] > 0 for r in rows)
    assert (tmp_path / "learning.png").stat().st_size > 0


def test_learning_on_sokoban_replaces_the_main_jobs_env_config():
    from benchmarks.learning import SOKOBAN, sokoban
    from rllib_llm.run.cli import load_tuned_example

    config, _ = load_tuned_example("tuned_examples/numberline_gigpo.py")
    moved = sokoban(config)
    assert moved.env == "Sokoban" and moved.env_config == SOKOBAN  # no NumberLine keys left (max_position)
    moved.validate()


@pytest.mark.slow  # ~27 s on 2 idle cores: a fresh process imports torch and Ray and starts Ray
def test_memory_rss(tmp_path):
    results = run_benchmark("memory_rss", tmp_path, "--size", "1", "--group-sizes", "2")
    (row,) = results["rows"]
    assert row["group_size"] == 2 and row["episodes"] == 2 and row["env_steps"] > 0
    assert row["peak_mb"] >= row["after_build_mb"] >= row["after_imports_mb"] > 0


def test_async_gpu_runs_take_the_weights_dtype_and_the_async_mode():
    from benchmarks.async_gpu import build, main

    with pytest.raises(SystemExit):
        main(["run", "--mode", "asyncx"])
    args = argparse.Namespace(model="tiny-random-llama", num_groups=2, group_size=2, runners=1, eval_seeds=4, seed=0,
                              backend="hf", mode="async2", max_staleness=1, dtype="bfloat16", inference_dtype=None,
                              logprob_batch_size=None, compile_learner=False, env="NumberLine")
    config = build(args, on_gpu=False)
    assert config.llm_model["dtype"] == "bfloat16" and config.llm_model["inference_dtype"] is None
    assert config.async_rollouts and config.updates_per_rollout == 2 and config.max_staleness == 3


def test_async_gpu_runs_take_the_no_grad_pass_rows_the_compile_flag_and_the_env():
    from benchmarks.async_gpu import build

    args = argparse.Namespace(model="tiny-random-llama", num_groups=2, group_size=2, runners=1, eval_seeds=4, seed=0,
                              backend="hf", mode="sync", max_staleness=1, dtype="float32", inference_dtype=None,
                              logprob_batch_size=256, compile_learner=True, env="NumberLine")
    config = build(args, on_gpu=False)
    assert config.logprob_rows == 256 and config.torch_compile_learner and config.env == "NumberLine"
    sokoban = build(argparse.Namespace(**{**vars(args), "env": "Sokoban"}), on_gpu=False)
    assert sokoban.env == "Sokoban" and sokoban.env_config["max_steps"] == sokoban.max_episode_steps
    assert sokoban.logprob_rows == 256 and sokoban.group_size == 2


def test_learner_update_times_each_setting_and_reports_it_against_shipped(tmp_path, ray_session):
    from benchmarks.learner_update import main

    main(["--out", str(tmp_path), "--model", TINY, "--num-groups", "2", "--group-size", "2", "--repeats", "1",
          "--settings", "shipped", "rllib_steps", "--no-profile"])
    results = json.loads((tmp_path / "learner_update.json").read_text())
    assert set(results["settings"]) == {"shipped", "rllib_steps"} and results["rows"] > 0
    assert all(len(times) == 1 and times[0] > 0 for times in results["settings"].values())
    main(["--report", str(tmp_path / "learner_update.json"), "--results-dir", str(tmp_path), "--stem", "r"])
    assert "| rllib_steps |" in (tmp_path / "r.md").read_text()


def test_learner_update_puts_rllibs_gradient_step_back_and_takes_it_off(ray_session):
    from benchmarks.learner_update import use_rllib_steps
    from tests.conftest import tiny_config

    algo = tiny_config().build_algo()
    try:
        learner = algo.learner_group._learner
        use_rllib_steps(learner, True)
        assert "apply_gradients" in vars(learner) and learner.config.torch_skip_nan_gradients is False
        use_rllib_steps(learner, False)
        assert "apply_gradients" not in vars(learner) and learner.config.torch_skip_nan_gradients is True
    finally:
        algo.stop()


def test_async_gpu_report_compares_every_async_mode_with_sync_seed_by_seed(tmp_path):
    from benchmarks.async_gpu import report, summarize, updates_per_rollout

    def run(mode: str, seed: int, seconds: list[float], success: list[float]) -> None:
        rows = [{"run": f"{mode}_s{seed}", "kind": "setup", "mode": mode, "seed": seed, "backend": "vllm"}]
        elapsed = 0.0
        for i, (t, v) in enumerate(zip(seconds, success, strict=True)):
            elapsed += t
            rows.append({"kind": "iteration", "iteration": i + 1, "elapsed": elapsed, "train_success": v, "timers": {}})
        rows.append({"kind": "eval", "success": success[-1]})
        (tmp_path / f"{mode}_s{seed}.jsonl").write_text("\n".join(map(json.dumps, rows)))

    # Moving means (window 5) of constant curves are the curve; sync reaches 1.0 at iteration 1.
    run("sync", 0, [4.0] * 5, [1.0] * 5)   # level 1.0 reached at 4 s; 4 s/iter
    run("sync", 1, [4.0] * 5, [1.0] * 5)
    run("async", 0, [2.0] * 5, [1.0] * 5)  # 2 s -> 2x both ways
    run("async", 1, [2.0] * 5, [0.5] * 5)  # never reaches the level: no total
    run("async2", 0, [1.0] * 5, [1.0] * 5)
    run("async2", 1, [1.0] * 5, [1.0] * 5)
    s = summarize(tmp_path)["summary"]
    assert s["level"] == 1.0
    assert s["async"]["time_to_level_ratio_by_seed"] == [2.0, None]
    assert s["async"]["iterations_per_s_ratio_by_seed"] == [2.0, 2.0]
    assert "speedup_time_to_level" not in s["async"] and "speedup_time_to_level" not in s
    assert s["async2"]["speedup_time_to_level"] == pytest.approx(8.0 / 2.0)
    report(tmp_path, stem="async_test", results=tmp_path / "out")
    text = (tmp_path / "out" / "async_test.md").read_text()
    assert "**async2 vs sync**: time to the level, sum over seeds (sync / async2): 4.00" in text
    assert s["level_is_informative"] is False  # sync was at 1.0 from its first iteration on
    assert "**The synchronous runs did not improve**" in text
    assert "Trained success at equal samples" in text and "async 1.000, 0.500; sync 1.000, 1.000." in text
    assert [updates_per_rollout(m) for m in ("async", "async1", "async2")] == [1, 1, 2]


def test_async_gpu_report_compares_success_at_the_iterations_both_runs_of_a_seed_reached(tmp_path):
    from benchmarks.async_gpu import summarize

    def run(mode: str, seed: int, success: list[float]) -> None:
        rows = [{"kind": "setup", "mode": mode, "seed": seed}]
        rows += [{"kind": "iteration", "elapsed": i + 1.0, "train_success": v, "timers": {}} for i, v in enumerate(success)]
        (tmp_path / f"{mode}_s{seed}.jsonl").write_text("\n".join(map(json.dumps, rows)))

    run("sync", 0, [0.0] * 5 + [0.5] * 5)          # 10 iterations, improving
    run("async", 0, [0.0] * 5 + [0.2] * 5 + [1.0] * 5)  # 15 in the same time: compared at iteration 10
    data = summarize(tmp_path)
    assert data["runs"]["async_s0"]["equal_samples_iteration"] == 10
    assert data["runs"]["async_s0"]["success_at_equal_samples"] == pytest.approx(0.2)
    assert data["runs"]["sync_s0"]["success_at_equal_samples"] == pytest.approx(0.5)
    assert data["summary"]["level_is_informative"] and data["summary"]["sync_start"] == 0.0


def test_vllm_gpu_summary_lists_the_lora_swaps(tmp_path):
    from benchmarks.vllm_gpu import summarize

    raw = tmp_path / "raw"
    raw.mkdir()
    row = {"sync_s": 0.02, "first_generate_s": 0.5, "steady_generate_s": 0.4, "swap_s": 0.12}
    (raw / "measure_lora.json").write_text(json.dumps({
        "meta": {"gpu": "G", "date": "D"},
        "smollm2_135m": {"adapter_parameters": 4_884_480, "lora_swaps": [row, row]},
    }))
    summary = summarize(raw, tmp_path / "out")
    assert summary["lora_swaps"]["smollm2_135m"]["lora_swaps"] == [row, row]
    assert "| SmolLM2-135M-Instruct | 4.9M | 0.020, 0.020 | 0.120, 0.120 |" in (tmp_path / "out.md").read_text()


def test_runner_overhead_times_each_tree_in_its_own_process(tmp_path):
    from benchmarks.runner_overhead import main

    result = main(["--envs", "2", "--repeats", "1", "--trees", str(REPO), str(REPO), "--results-dir", str(tmp_path),
                   "--stem", "r"])
    assert [len(t["rows"]) for t in result["trees"]] == [1, 1]
    assert all(t["rows"][0]["ms_per_env_step"] > 0 for t in result["trees"])
    assert "| 2 |" in (tmp_path / "r.md").read_text() and "first / last" in (tmp_path / "r.md").read_text()


def test_rollout_throughput_replays_the_same_prompts_through_the_bare_engine(monkeypatch, tmp_path):
    from benchmarks.rollout_throughput import raw_vllm_seconds
    from rllib_llm.core.models import apply_lora, build_tiny_model, load_tokenizer
    from rllib_llm.generation import SamplingParams, make_backend
    from tests.fake_backends import install_fake_vllm

    install_fake_vllm(monkeypatch)
    tokenizer = load_tokenizer(TINY)
    model = apply_lora(build_tiny_model(tokenizer), {"r": 4, "lora_alpha": 8})
    backend = make_backend("vllm", model=model, tokenizer=tokenizer, adapter_dir=str(tmp_path))
    backend.update_weights({})  # the first LoRA sync: the engine now generates with an adapter
    params = SamplingParams(max_new_tokens=3, seed=7, stop=["</action>"], ignore_eos=True)
    requests = [([[1, 2, 3], [4, 5]], params), ([[6]], params)]
    assert raw_vllm_seconds(backend, requests) >= 0
    replayed = backend.llm.calls[-2:]
    assert [c["prompts"] for c in replayed] == [[{"prompt_token_ids": [1, 2, 3]}, {"prompt_token_ids": [4, 5]}],
                                                [{"prompt_token_ids": [6]}]]
    # One SamplingParams a batch, the backend's settings less what only the EnvRunner needs.
    assert replayed[0]["sampling"] == {"temperature": 1.0, "top_p": 1.0, "max_tokens": 3, "stop": ["</action>"],
                                       "include_stop_str_in_output": True, "ignore_eos": True,
                                       "skip_special_tokens": True}
    assert replayed[0]["lora"] is backend.lora_request is not None
    assert raw_vllm_seconds(make_backend("hf", model=model, tokenizer=tokenizer), requests) is None


def test_vllm_gpu_summary_tables_each_models_rollouts_against_the_bare_engine(tmp_path):
    from benchmarks.vllm_gpu import summarize

    raw = tmp_path / "raw"
    raw.mkdir()
    machine = {"gpu": "G", "date": "2026-12-07T00:00:00"}
    size = {"steps": 6, "new_tokens": 32}

    def write(name: str, row: dict) -> None:
        row = {"envs": 64, "mode": "batched", "env_steps_per_s": 100.0, "tokens_per_s": 3200.0, **row}
        (raw / name).write_text(json.dumps({"machine": machine, "summary": size, "rows": [row]}))

    write("rollout_hf_1p5b.json", {"generate_tokens_per_s": 4000.0, "runner_vs_generate": 0.9})
    write("rollout_vllm_1p5b.json", {"env_steps_per_s": 200.0, "generate_tokens_per_s": 8000.0,
                                     "runner_vs_generate": 0.8, "raw_vllm_tokens_per_s": 10000.0,
                                     "runner_vs_raw_vllm": 0.64})
    summary = summarize(raw, tmp_path / "out")
    row = summary["rollout_throughput"]["qwen2_5_1_5b_shape"][0]
    assert row["vllm_over_hf"] == pytest.approx(2.0) and row["hf_generate_over_raw_vllm"] == pytest.approx(0.4)
    assert "smollm2_135m" not in summary["rollout_throughput"]
    text = (tmp_path / "out.md").read_text()
    assert "### Qwen2.5-1.5B shape" in text
    assert "| 64 | 100 | 200 | 2.00 | 4,000 | 8,000 | 10,000 | 0.90 | 0.80 | 0.64 | 0.40 |" in text


def test_vllm_gpu_summary_plots_the_main_jobs_hf_and_vllm_curves_per_seed(tmp_path):
    from benchmarks.vllm_gpu import moving_mean, summarize

    assert moving_mean([0.0, 1.0, 1.0], window=2) == [0.0, 0.5, 1.0]
    raw = tmp_path / "raw"
    raw.mkdir()
    run = {"progress": [{"success": 0.5, "time_s": 1.0}, {"success": 1.0, "time_s": 1.0}], "summary": {}, "log_tail": []}
    (raw / "train_b.json").write_text(json.dumps({"runs": {"hf_lora_s3": run, "vllm_lora_s3": run, "vllm_sokoban_s3": run}}))
    summarize(raw, tmp_path / "out")
    assert (tmp_path / "out.png").stat().st_size > 0 and "Curves: `out.png`" in (tmp_path / "out.md").read_text()
    (raw / "train_b.json").write_text(json.dumps({"runs": {"vllm_sokoban_s3": run}}))  # no main-job run: no plot
    (tmp_path / "out.png").unlink()
    summarize(raw, tmp_path / "out")
    assert not (tmp_path / "out.png").exists()


@pytest.mark.parametrize("sections, keys", [(["lora"], ("smollm2_135m", "qwen2_5_1_5b_shape")),
                                            (["lora_1p5b"], ("qwen2_5_1_5b_shape",)),
                                            (["lora_135m"], ("smollm2_135m",)), (["big"], None)])
def test_vllm_gpu_measure_runs_the_lora_halves_it_is_asked_for(monkeypatch, tmp_path, sections, keys):
    import sys
    import types

    import torch

    from benchmarks import vllm_gpu

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0"))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "G")
    monkeypatch.setattr(vllm_gpu, "WORK", tmp_path / "work")
    calls = []
    monkeypatch.setattr(vllm_gpu, "measure_lora", lambda out, results, keys, tok: calls.append((keys, tok)))
    monkeypatch.setattr(vllm_gpu, "measure_big", lambda out, results: None)
    vllm_gpu.measure(tmp_path, sections, "/some/tokenizer")
    assert calls == ([(keys, "/some/tokenizer")] if keys else [])


def test_real_model_report_counts_tool_use_and_spreads_a_variant_over_its_seeds(tmp_path):
    """A variant's trained success is the mean of the runs that finished; a run without summary.json (its
    final evaluation lost) keeps its curve and counts as unfinished, never as 0."""
    from benchmarks import real_model_report as report

    def run(name: str, after: float | None, successes: list[float]) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "progress.jsonl").write_text("".join(
            json.dumps({"iter": i + 1, "success": s, "time_s": 6.0}) + "\n" for i, s in enumerate(successes)))
        if after is not None:
            (folder / "summary.json").write_text(json.dumps({"before": {"success_rate": 0.2},
                                                             "after": {"success_rate": after}}))
        steps = [[{"action": "<answer>x</answer>"}], [{"action": "<search>q</search>"}, {"action": "<answer>y</answer>"}]]
        (folder / "trajectories.jsonl").write_text("".join(
            json.dumps({"iteration": it, "steps": steps[it > 10]}) + "\n" for it in range(1, 25)))
        return folder

    rows = [report.run_row("A", run("s0", 0.9, [0.1, 0.5]), "<search>"),
            report.run_row("A", run("s1", None, [0.3, 0.7, 0.9]), "<search>"),
            report.run_row("B", run("s2", 0.5, [0.2, 0.2]), "<search>")]
    assert rows[0]["tool_first10"] == "0/10" and rows[0]["tool_last10"] == "10/10"
    a, b = report.variants(rows)
    assert (a["runs"], a["finished"], a["after_mean"], a["after_std"]) == (2, 1, 0.9, 0.0)
    assert a["curve_mean"] == pytest.approx([0.2, 0.4]) and a["curve_low"] == pytest.approx([0.1, 0.3])
    assert b["after_mean"] == 0.5


@pytest.mark.slow
def test_main_job_sweep_reports_held_out_success_per_trial_from_tune_and_mlflow(tmp_path):
    """The sweep benchmark on the tiny example: every trial's held-out success, in Tune's results and as its
    MLflow run logged it (the same number), and the selected trial."""
    import subprocess
    import sys

    output = tmp_path / "main_job_sweep.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "main_job_sweep.py"), "--iterations", "1", "--grid", "lr=1e-3,1e-4",
         "--base", str(REPO / "tests" / "fixtures" / "tiny_numberline.py"), "--work", str(tmp_path / "work"),
         "--output", str(output)],  # fmt: skip
        capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(output.read_text())["rows"]
    assert sorted(r["lr"] for r in rows) == [1e-4, 1e-3]
    for row in rows:
        assert 0.0 <= row["held_out_success"] <= 1.0
        assert row["mlflow_held_out_success"] == pytest.approx(row["held_out_success"])
    assert output.with_suffix(".md").read_text().count("\n") > 5
