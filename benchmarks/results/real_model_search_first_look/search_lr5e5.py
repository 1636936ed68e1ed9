from pathlib import Path

from rllib_llm.run.cli import load_tuned_example

config, stop = load_tuned_example(Path("/root/head/tuned_examples/search_gigpo_qwen.py"))
config = config.copy(copy_frozen=False).training(lr=5e-5)
