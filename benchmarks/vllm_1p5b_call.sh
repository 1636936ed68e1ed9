#!/usr/bin/env bash
# Issue 23's 1.5B-shape measurements in one device call, after two staging calls (benchmarks/vllm_gpu.py's
# docstring has the re-split of vLLM's parts into .gpu/v1 and .gpu/v2):
#   call A  carry .whl .carry/ray.tar.xz .gpu/whl:
#           python3 benchmarks/gpu_jobs.py setup --skip-dry --out $OUT && mkdir -p /root/stage/whl && cp .gpu/whl/* /root/stage/whl/
#   call B  carry .gpu/v1 .carry/tokenizer (the embedded tokenizer, save_pretrained; no GGUF needed):
#           mkdir -p /root/stage && cp .gpu/v1/* /root/stage/ && cp -r .carry/tokenizer /root/stage/tokenizer
#   call C  carry .gpu/v2 .gpu/install.sh:  bash benchmarks/vllm_1p5b_call.sh
# Chain them (a warm machine goes back after ~30 s idle). Each step is bounded and writes under $OUT as it
# goes, so a call cut short by the device budget still returns what finished. Copy the results to
# benchmarks/results/vllm_h200_raw/ (rollout_{vllm,hf}_1p5b.json; vllm_measure.json as measure_lora.json) and
# run `python benchmarks/vllm_gpu.py summarize`.
set -u
cp .gpu/v2/* /root/stage/ && mkdir -p .gpu/whl && cp /root/stage/whl/* .gpu/whl/
source .gpu/install.sh  # in this shell, never through a pipe: its exports would be lost
export PYTHONPATH=$PYTHONPATH:$PWD TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp/vllm_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$OUT/card.txt"
step() {  # name, seconds, command...: one bounded step, its log under $OUT, its tail printed
  local name=$1 seconds=$2
  shift 2
  date -u +"%H:%M:%S $name" >> "$OUT/steps.txt"
  timeout "$seconds" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: rc=$?" >> "$OUT/steps.txt"
  tail -8 "$OUT/$name.log"
}
OPTS='{"gpu_memory_utilization": 0.3, "engine_kwargs": {"attention_backend": "FLASH_ATTN", "max_model_len": 2048, "dtype": "bfloat16"}}'
ROLLOUT=(python3 benchmarks/rollout_throughput.py --model /root/work/vllm/qwen15 --device cuda --dtype bfloat16
         --envs 64 256 1024 --modes batched --size large)
step qwen15 90 python3 benchmarks/vllm_gpu.py qwen15 --tokenizer /root/stage/tokenizer
step rollout_vllm_1p5b 240 "${ROLLOUT[@]}" --backend vllm --backend-options "$OPTS" --output "$OUT/rollout_vllm_1p5b.json"
step measure_lora 180 python3 benchmarks/vllm_gpu.py measure --sections lora_1p5b --tokenizer /root/stage/tokenizer --out "$OUT"
step rollout_hf_1p5b 300 "${ROLLOUT[@]}" --backend hf --output "$OUT/rollout_hf_1p5b.json"
cat "$OUT/steps.txt"
