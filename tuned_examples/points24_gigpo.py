"""GiGPO on 24 Points (Gym Cards) with the embedded SmolLM2-135M-Instruct: write one formula over four cards
that makes 24 with + - * / (2 CPU cores).

    rllib-llm train tuned_examples/points24_gigpo.py [--seed S]

Each iteration plays 4 groups x 4 episodes (the envs of a group are dealt the same four cards; only solvable
hands are dealt); an episode is up to 3 tries, and the first correct formula ends it. The recipe is the main
job's and EZPoints' (tuned_examples/ezpoints_gigpo.py): instructions in the system prompt, the observation as
the user turn, one in-context example, replies prefilled with ``<action>`` and stopped at ``</action>``, LoRA
r16 on every projection, KL 0.2 to the base model, step groups pooled across episode groups (an anchor is the
four card values). A well-formed formula over other numbers than the cards is an invalid action; a wrong value
is valid and earns 0. The multi-agent version (a solver and a verifier) is
tuned_examples/multiagent_points24_gigpo.py.

Measured (``python benchmarks/learning_seeds.py --example tuned_examples/points24_gigpo.py --seeds 0``,
runs/ls_points24), seed 0 on 2 CPU cores: greedy success on 64 held-out deals 0.000 untrained (valid-action
rate 0.14); the run was stopped at iteration 33 of 40 (session time) with training success 0.00-0.04 and a
valid-action rate of 0.00-0.04 per iteration: the 135M model does not learn 24 Points at CPU size (EZPoints,
two cards and + *, it does). ~50 s an iteration.

On a GPU (``rllib-llm train tuned_examples/points24_gigpo.py --gpu``: 8 groups x 4; one H100 shared by 8 runs,
benchmarks/results/gpu_examples.md), seed 0, 270 s of training (42 iterations, ~6.4 s each): greedy success on
32 held-out deals 0.000 -> 0.031 (one deal), training success 0.00 -> 0.01 and valid-action rate 0.03-0.04 over
the run: no learning signal to speak of. Seed 1's run ran out of GPU memory in its first iteration (8 runs on
one card), so this is one seed.
"""

from pathlib import Path

from rllib_llm.env_connectors import ChatPromptBuilder
from rllib_llm.run.cli import load_tuned_example

SYSTEM_PROMPT = (
    "Make 24 from the four cards: use each card's number exactly once with + - * / and brackets. A is 1; J, Q "
    "and K are 10. Reply with the formula inside <action></action>."
)

# The main job's recipe (model, LoRA, sampling, training, evaluation), with this env, prompt and sizes.
main_job, _ = load_tuned_example(Path(__file__).resolve().parent / "numberline_gigpo.py")
config = (
    main_job.copy(copy_frozen=False)
    .environment("Points24", env_config={"max_steps": 3})
    .env_runners(
        env_to_module_connector=lambda env, spaces, device: [
            ChatPromptBuilder(system_prompt=SYSTEM_PROMPT, template="{current_observation}", output_format="")
        ]
    )
    .generation(max_new_tokens=20)
    .group_rollouts(group_size=4, num_groups=4, max_episode_steps=3, few_shot=[("Cards: 4, 8, 3, A.", "<action>(4+8)*(3-1)</action>")])
)

stop = {"training_iteration": 40}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
