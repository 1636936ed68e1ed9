"""REINFORCE++ on NumberLine with the embedded SmolLM2-135M-Instruct: whitened discounted returns with a
KL-to-reference penalty in the token rewards (no critic, no group baseline).

    rllib-llm train tuned_examples/numberline_reinforce_pp.py

Without a group baseline the batch wants many distinct start states: 6 groups x 2 envs.

The task, prompt, model and group rollouts are the main job's (``numberline_gigpo.py``); only the
algorithm and its training settings differ.
"""

from pathlib import Path

from rllib_llm.algorithms import ReinforcePlusPlusConfig
from rllib_llm.run.cli import load_tuned_example

# The main job's task and rollouts (env, prompt, few-shot example, model, sampling, groups, eval seeds).
task, _ = load_tuned_example(Path(__file__).with_name("numberline_gigpo.py"))
# The groups this example was measured with (the main job moved to 6 groups x 2 for issue 48).
GROUPS = {"group_size": 4, "num_groups": 3}
config = (
    ReinforcePlusPlusConfig()
    .rollouts_like(task).group_rollouts(**GROUPS)
    .group_rollouts(group_size=2, num_groups=6)
    .training(lr=task.lr, gamma=0.95, kl_reward_coeff=0.001, kl_reward_estimator="k1", minibatch_size=32, num_epochs=1)
)

stop = {"training_iteration": 12}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
