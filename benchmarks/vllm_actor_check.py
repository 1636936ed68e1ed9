"""Does the ``vllm`` backend start inside a remote EnvRunner (a Ray actor)? A diagnostic for the GPU machine.

    python benchmarks/vllm_actor_check.py --out $OUT [--variants remote_kv remote_util remote_inproc local_kv]

On 2026-12-06 every run of ``benchmarks/async_gpu.py --backend vllm`` (one remote EnvRunner) failed while the
remote EnvRunner built its engine: ``RuntimeError: Engine core initialization failed. See root cause above``,
the root cause printed in the actor's stderr, which those runs did not forward. Each variant here builds the
main job's config (NumberLine) on a small random Llama saved to a folder (head size 32, which FlashAttention
takes; no GGUF needed), with the actor's output forwarded to the driver, trains one iteration and says whether
it worked; its output (the root cause included) lands in ``OUT/vllm_actor_<variant>.log`` and the verdicts in
``OUT/vllm_actor_check.json``. Variants: where the engine runs (``remote``: a Ray actor; ``local``: the driver)
x how it sizes its KV cache (``kv``: a fixed ``kv_cache_memory_bytes``; ``util``: a share of the card) x
``inproc`` (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the engine core in the actor's own process).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENGINE = {"attention_backend": "FLASH_ATTN", "max_model_len": 1024}
VARIANTS = {
    "remote_kv": (1, {"gpu_memory_utilization": 0.05, "engine_kwargs": {**ENGINE, "kv_cache_memory_bytes": 2**30}}, {}),
    "remote_util": (1, {"gpu_memory_utilization": 0.1, "engine_kwargs": ENGINE}, {}),
    "remote_inproc": (1, {"gpu_memory_utilization": 0.1, "engine_kwargs": ENGINE}, {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}),
    "local_kv": (0, {"gpu_memory_utilization": 0.05, "engine_kwargs": {**ENGINE, "kv_cache_memory_bytes": 2**30}}, {}),
}


def make_model(folder: Path) -> None:
    from rllib_llm.core.models import TINY_MODEL, build_tiny_model, load_tokenizer

    tokenizer = load_tokenizer(TINY_MODEL)
    model = build_tiny_model(tokenizer, hidden_size=128, intermediate_size=256, num_attention_heads=4, head_dim=32)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def one(variant: str, model: str) -> None:
    import ray

    from rllib_llm.run.cli import load_tuned_example

    runners, options, _ = VARIANTS[variant]
    config, _ = load_tuned_example(ROOT / "tuned_examples" / "numberline_gigpo.py")
    config = (config.copy(copy_frozen=False).llm(model={"name_or_path": model, "lora": None, "inference_dtype": "bfloat16"})
              .generation(backend="vllm", backend_options=options).group_rollouts(num_groups=2)
              .env_runners(num_env_runners=runners, num_cpus_per_env_runner=1)
              .evaluation(evaluation_num_seeds=2))
    if runners:
        config.learners(num_gpus_per_learner=0.5).env_runners(num_gpus_per_env_runner=0.5)
    else:
        config.learners(num_gpus_per_learner=1).env_runners(num_gpus_per_env_runner=1)
    ray.init(num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=True, _temp_dir=f"/tmp/ray_{variant}")
    algo = config.build_algo()
    algo.train()
    print("VERDICT ok", flush=True)
    algo.stop()
    ray.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/vllm_actor")))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="/root/work/vllm_actor_model")
    parser.add_argument("--timeout-s", type=float, default=150.0)
    args = parser.parse_args()
    if args.one:
        one(args.one, args.model)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if not (Path(args.model) / "config.json").is_file():
        make_model(Path(args.model))
    verdicts = {}
    for variant in args.variants:
        start = time.perf_counter()
        log = args.out / f"vllm_actor_{variant}.log"
        env = {**os.environ, **VARIANTS[variant][2]}
        try:
            proc = subprocess.run([sys.executable, __file__, "--one", variant, "--model", args.model], env=env,
                                  stdout=log.open("w"), stderr=subprocess.STDOUT, timeout=args.timeout_s)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        text = log.read_text(errors="replace")
        ok = "VERDICT ok" in text
        causes = [line for line in text.splitlines() if "Error" in line or "error:" in line][:12]
        verdicts[variant] = {"ok": ok, "rc": rc, "seconds": round(time.perf_counter() - start, 1), "errors": causes}
        print(variant, "OK" if ok else "FAILED", verdicts[variant]["seconds"], "s", *causes[:6], sep="\n  ", flush=True)
        (args.out / "vllm_actor_check.json").write_text(json.dumps(verdicts, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
