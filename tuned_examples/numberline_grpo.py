"""GRPO on NumberLine with the embedded SmolLM2-135M-Instruct: episode return normalized within each group.

    rllib-llm train tuned_examples/numberline_grpo.py

Same rollouts as numberline_gigpo.py (4 groups x 4 envs, 2-step sliding-window memory), so the two
compare directly: GRPO has GiGPO's episode-level advantage only.

The task, prompt, model and group rollouts are the main job's (``numberline_gigpo.py``); only the
algorithm and its training settings differ.
"""

from pathlib import Path

from rllib_llm.algorithms import GRPOConfig
from rllib_llm.run.cli import load_tuned_example

# The main job's task and rollouts (env, prompt, few-shot example, model, sampling, groups, eval seeds).
task, _ = load_tuned_example(Path(__file__).with_name("numberline_gigpo.py"))
# The groups this example was measured with (the main job moved to 6 groups x 2 for issue 48).
GROUPS = {"group_size": 4, "num_groups": 3}
config = GRPOConfig().rollouts_like(task).group_rollouts(**GROUPS).training(
    lr=task.lr, advantage_norm="std", loss_agg_mode="seq-mean-token-mean", minibatch_size=32, num_epochs=1
)

stop = {"training_iteration": 12}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
