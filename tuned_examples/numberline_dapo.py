"""DAPO on NumberLine with the embedded SmolLM2-135M-Instruct: clip-higher, token-mean loss, dynamic sampling.

    rllib-llm train tuned_examples/numberline_dapo.py

Dynamic sampling drops groups whose episodes all got the same return and samples again (at most 3
rollouts per iteration) until 4 informative groups are collected.

The task, prompt, model and group rollouts are the main job's (``numberline_gigpo.py``); only the
algorithm and its training settings differ.
"""

from pathlib import Path

from rllib_llm.algorithms import DAPOConfig
from rllib_llm.run.cli import load_tuned_example

# The main job's task and rollouts (env, prompt, few-shot example, model, sampling, groups, eval seeds).
task, _ = load_tuned_example(Path(__file__).with_name("numberline_gigpo.py"))
# The groups this example was measured with (the main job moved to 6 groups x 2 for issue 48).
GROUPS = {"group_size": 4, "num_groups": 3}
config = DAPOConfig().rollouts_like(task).group_rollouts(**GROUPS).training(
    lr=task.lr, clip_ratio_low=0.2, clip_ratio_high=0.28, loss_agg_mode="token-mean", dynamic_sampling=True,
    max_sampling_rounds=3, minibatch_size=32, num_epochs=1,
)

stop = {"training_iteration": 12}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
