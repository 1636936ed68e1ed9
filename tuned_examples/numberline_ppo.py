"""PPO on NumberLine with the embedded SmolLM2-135M-Instruct: turn-level GAE with a value head on the LM.

    rllib-llm train tuned_examples/numberline_ppo.py

The critic is a linear head on the policy's last hidden state at each step's last prompt token (zero
initialized); it needs a few iterations before its baseline helps, hence more iterations and 2 epochs.

The task, prompt, model and group rollouts are the main job's (``numberline_gigpo.py``); only the
algorithm and its training settings differ.
"""

from pathlib import Path

from rllib_llm.algorithms import PPOConfig
from rllib_llm.run.cli import load_tuned_example

# The main job's task and rollouts (env, prompt, few-shot example, model, sampling, groups, eval seeds).
task, _ = load_tuned_example(Path(__file__).with_name("numberline_gigpo.py"))
# The groups this example was measured with (the main job moved to 6 groups x 2 for issue 48).
GROUPS = {"group_size": 4, "num_groups": 3}
config = (
    PPOConfig()
    .rollouts_like(task).group_rollouts(**GROUPS)
    .group_rollouts(group_size=2, num_groups=6)
    .training(
        lr=task.lr, gamma=0.95, lambda_=0.95, vf_loss_coeff=0.5, vf_clip_param=0.5, minibatch_size=32, num_epochs=2
    )
)

stop = {"training_iteration": 16}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
