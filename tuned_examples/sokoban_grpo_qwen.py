"""GRPO beside ``tuned_examples/sokoban_gigpo_qwen.py``: the same env, prompt, model, sizes and sampling (equal
samples per iteration) and the same training settings, with episode-level advantages only (no step groups).

    rllib-llm train tuned_examples/sokoban_grpo_qwen.py --gpu [--model MODEL] [--seed S]
"""

from pathlib import Path

from rllib_llm.algorithms import GRPOConfig
from rllib_llm.run.cli import load_tuned_example

gigpo, stop = load_tuned_example(Path(__file__).with_name("sokoban_gigpo_qwen.py"))
config = GRPOConfig().rollouts_like(gigpo).training(
    lr=gigpo.lr, kl_coeff=gigpo.kl_coeff, kl_estimator=gigpo.kl_estimator, gamma=gigpo.gamma,
    advantage_norm=gigpo.advantage_norm, minibatch_size=gigpo.minibatch_size, micro_batch_size=gigpo.micro_batch_size,
)

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
