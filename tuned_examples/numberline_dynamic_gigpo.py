"""Dynamic GiGPO on NumberLine with the embedded SmolLM2-135M-Instruct: GiGPO + DAPO's dynamic sampling
and clip-higher.

    rllib-llm train tuned_examples/numberline_dynamic_gigpo.py

Same rollouts as numberline_gigpo.py; groups whose episodes all got the same return are resampled (at
most 3 rollouts per iteration).

The task, prompt, model and group rollouts are the main job's (``numberline_gigpo.py``); only the
algorithm and its training settings differ.
"""

from pathlib import Path

from rllib_llm.algorithms import DynamicGiGPOConfig
from rllib_llm.run.cli import load_tuned_example

# The main job's task and rollouts (env, prompt, few-shot example, model, sampling, groups, eval seeds).
task, _ = load_tuned_example(Path(__file__).with_name("numberline_gigpo.py"))
# The groups this example was measured with (the main job moved to 6 groups x 2 for issue 48).
GROUPS = {"group_size": 4, "num_groups": 3}
config = DynamicGiGPOConfig().rollouts_like(task).group_rollouts(**GROUPS).training(
    lr=task.lr, gamma=task.gamma, step_advantage_weight=task.step_advantage_weight,
    advantage_norm=task.advantage_norm, clip_ratio_low=0.2, clip_ratio_high=0.28, dynamic_sampling=True,
    max_sampling_rounds=3, minibatch_size=32, num_epochs=1,
)

stop = {"training_iteration": 12}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
