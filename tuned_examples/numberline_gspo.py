"""GSPO on NumberLine with the embedded SmolLM2-135M-Instruct: sequence-level importance ratios.

    rllib-llm train tuned_examples/numberline_gspo.py

GSPO clips the per-sequence ratio (geometric mean of the token ratios) to [1 - 3e-4, 1 + 4e-4], its
paper's ranges; with one epoch per batch the ratio stays ~1 and clipping only acts with num_epochs > 1.

The task, prompt, model and group rollouts are the main job's (``numberline_gigpo.py``); only the
algorithm and its training settings differ.
"""

from pathlib import Path

from rllib_llm.algorithms import GSPOConfig
from rllib_llm.run.cli import load_tuned_example

# The main job's task and rollouts (env, prompt, few-shot example, model, sampling, groups, eval seeds).
task, _ = load_tuned_example(Path(__file__).with_name("numberline_gigpo.py"))
# The groups this example was measured with (the main job moved to 6 groups x 2 for issue 48).
GROUPS = {"group_size": 4, "num_groups": 3}
config = GSPOConfig().rollouts_like(task).group_rollouts(**GROUPS).training(
    lr=task.lr, clip_ratio_low=3e-4, clip_ratio_high=4e-4, loss_agg_mode="seq-mean-token-mean",
    minibatch_size=16, num_epochs=2,
)

stop = {"training_iteration": 12}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
