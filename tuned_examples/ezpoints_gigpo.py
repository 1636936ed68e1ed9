"""GiGPO on EZPoints (Gym Cards) with the embedded SmolLM2-135M-Instruct: write one formula over two cards that
makes 12, with + and * only (2 CPU cores).

    rllib-llm train tuned_examples/ezpoints_gigpo.py [--seed S]

Each iteration plays 4 groups x 4 episodes (the envs of a group are dealt the same two cards); an episode
is up to 3 tries, and the first correct formula ends it. The recipe is the main job's
(tuned_examples/numberline_gigpo.py): instructions in the system prompt, the observation as the user turn,
one in-context example, replies prefilled with ``<action>`` and stopped at ``</action>``, LoRA r16 on every
projection, KL 0.2 to the base model, step groups pooled across episode groups (an anchor is the two card
values; groups dealt the same values are compared). A well-formed formula over other numbers than the cards
is an invalid action (penalty 0.1); a wrong value is valid and earns 0.

Measured on 2 CPU cores, seeds 0-2 (``python benchmarks/learning_seeds.py --example
tuned_examples/ezpoints_gigpo.py --seeds 0 1 2``, benchmarks/results/learning_seeds_ezpoints_gigpo.md): greedy
success on 64 held-out deals 0.219 untrained -> 0.875 / 0.797 / 0.797 (mean 0.823), valid-action rate 0.60 ->
0.89-0.95, 14.8-16.6 min a run (model load and both evaluations included).
"""

from pathlib import Path

from rllib_llm.env_connectors import ChatPromptBuilder
from rllib_llm.run.cli import load_tuned_example

SYSTEM_PROMPT = (
    "Make 12 from the two cards: use each card's number exactly once with + or *. A is 1; J, Q and K are 10. "
    "Reply with the formula inside <action></action>."
)

# The main job's recipe (model, LoRA, sampling, training, evaluation), with this env, prompt and sizes.
main_job, _ = load_tuned_example(Path(__file__).resolve().parent / "numberline_gigpo.py")
config = (
    main_job.copy(copy_frozen=False)
    .environment("EZPoints", env_config={"max_steps": 3})
    .env_runners(
        env_to_module_connector=lambda env, spaces, device: [
            ChatPromptBuilder(system_prompt=SYSTEM_PROMPT, template="{current_observation}", output_format="")
        ]
    )
    .generation(max_new_tokens=12)
    .group_rollouts(group_size=4, num_groups=4, max_episode_steps=3, few_shot=[("Cards: 3, 4.", "<action>3*4</action>")])
)

stop = {"training_iteration": 40}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
