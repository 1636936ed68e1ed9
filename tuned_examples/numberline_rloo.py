"""RLOO on NumberLine with the embedded SmolLM2-135M-Instruct: leave-one-out group baseline, PPO clipping.

    rllib-llm train tuned_examples/numberline_rloo.py

RLOO's advantage is unnormalized: the return minus the mean of the other episodes of the group.

The task, prompt, model and group rollouts are the main job's (``numberline_gigpo.py``); only the
algorithm and its training settings differ.
"""

from pathlib import Path

from rllib_llm.algorithms import RLOOConfig
from rllib_llm.run.cli import load_tuned_example

# The main job's task and rollouts (env, prompt, few-shot example, model, sampling, groups, eval seeds).
task, _ = load_tuned_example(Path(__file__).with_name("numberline_gigpo.py"))
# The groups this example was measured with (the main job moved to 6 groups x 2 for issue 48).
GROUPS = {"group_size": 4, "num_groups": 3}
config = RLOOConfig().rollouts_like(task).group_rollouts(**GROUPS).training(lr=task.lr, clip_param=0.2, minibatch_size=32, num_epochs=1)

stop = {"training_iteration": 12}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
