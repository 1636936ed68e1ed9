"""GiGPO on NumberLine training the full weights of SmolLM2-135M-Instruct instead of LoRA adapters.

    rllib-llm train tuned_examples/numberline_gigpo_full.py

Rollouts, prompt, reward and schedule are tuned_examples/numberline_gigpo.py's (the main job, which trains
LoRA adapters). Here every weight trains, so the learning rate is ~30x smaller, each Learner step is ~1.5x
slower on a CPU (all 135M parameters in Adam) and a weight sync ships the whole model. For a CPU-sized run
keep backward short with ``trainable_layers`` (only the last N decoder layers train), but notes/foundation.md
shows that 6 last layers do not learn this task.
"""

from pathlib import Path

from rllib_llm.run.cli import load_tuned_example

base, stop = load_tuned_example(Path(__file__).with_name("numberline_gigpo.py"))
config = base.copy(copy_frozen=False).llm(model={"name_or_path": "smollm2-135m-instruct"}).training(lr=1e-5)

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
