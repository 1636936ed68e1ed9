"""GiGPO on Blackjack (Gym Cards) with the embedded SmolLM2-135M-Instruct: hit or stand against a dealer who
draws to 17 (2 CPU cores).

    rllib-llm train tuned_examples/blackjack_gigpo.py [--seed S]

Each iteration plays 4 groups x 4 hands (the envs of a group are dealt from the same shuffled deck, so their
first decision is the same); a hand is at most 5 decisions. Success is a won hand (+1; a push is 0, a loss
-1), so even perfect basic strategy wins only about 43% of hands: the number to read is the change from the
untrained policy. The recipe is the main job's (tuned_examples/numberline_gigpo.py): instructions in the
system prompt, the observation as the user turn, one in-context example, replies prefilled with
``<action>`` and stopped at ``</action>``, LoRA r16, KL 0.2 to the base model, step groups pooled across
episode groups (an anchor is the player's total, whether it is soft, and the dealer's up card: the state a
basic-strategy table is indexed by).

Measured on 2 CPU cores, seeds 0-2 (``python benchmarks/learning_seeds.py --example
tuned_examples/blackjack_gigpo.py --seeds 0 1 2``, benchmarks/results/learning_seeds_blackjack_gigpo.md): it does
**not** learn at this size. Greedy success on 64 held-out deals 0.312 untrained -> 0.312 / 0.312 / 0.312 after 40
iterations (8.6-11.6 min a run): the greedy policy is "always stand" before and after (0.312 is exactly that
policy's win rate on these deals). Sampled at temperature 1 the 135M model still writes many non-actions after
40 iterations (token entropy 1.8-2.2, about a fifth of the recorded steps unparseable or not hit/stand), so the
groups mostly compare noise; valid-action rate of the greedy policy is 1.0. What to try, untested: more groups
per iteration on a GPU (``.group_rollouts(num_groups=16)``), a larger model, the invalid-action penalty raised
to 0.5.

On a GPU (``rllib-llm train tuned_examples/blackjack_gigpo.py --gpu``: 8 groups x 4 hands; one H100 shared by 8
runs, benchmarks/results/gpu_examples.md), seeds 0-1, 270 s of training (49-51 iterations, ~5.4 s each): greedy
success on 32 held-out deals 0.250 -> 0.250 on both seeds (still "always stand"), although the sampled policy's
success rose on seed 1 (0.36 -> 0.54, first vs last 5 iterations; seed 0 0.38 -> 0.37) and its valid-action
rate on seed 0 (0.36 -> 0.54). More samples alone do not move the greedy policy in this time.
"""

from pathlib import Path

from rllib_llm.env_connectors import ChatPromptBuilder
from rllib_llm.run.cli import load_tuned_example

SYSTEM_PROMPT = (
    "You play Blackjack against a dealer. Get closer to 21 than the dealer without going over. Aces count 1 or "
    "11, face cards 10. 'hit' takes another card; 'stand' ends your turn and the dealer draws until 17. "
    "Reply with hit or stand inside <action></action>."
)

main_job, _ = load_tuned_example(Path(__file__).resolve().parent / "numberline_gigpo.py")
config = (
    main_job.copy(copy_frozen=False)
    .environment("Blackjack", env_config={"max_steps": 5})
    .env_runners(
        env_to_module_connector=lambda env, spaces, device: [
            ChatPromptBuilder(system_prompt=SYSTEM_PROMPT, template="{current_observation}", output_format="")
        ]
    )
    .generation(max_new_tokens=8)
    .group_rollouts(
        group_size=4,
        num_groups=4,
        max_episode_steps=5,
        few_shot=[("Dealer shows: 9. Your hand: 10, 6 (total 16).", "<action>hit</action>")],
    )
)

stop = {"training_iteration": 40}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example

    run_example(config, stop)
