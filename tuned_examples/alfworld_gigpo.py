"""GiGPO on ALFWorld's local mode (generated TextWorld games) with the embedded SmolLM2-135M-Instruct (2 CPU
cores, no ALFWorld data).

    rllib-llm train tuned_examples/alfworld_gigpo.py [--seed S]

Local mode generates a small set of TextWorld household games (3 rooms, 5 objects, a 3-step quest; made once
and cached) and plays them through TextWorld with ALFWorld's observation format and admissible-action list.
An episode is up to 6 actions; each iteration plays 2 groups x 4 episodes (a group plays the same game), the
prompt is the env's own template (task, the last 2 steps, the observation, the admissible actions) and the
rest of the recipe is the main job's (LoRA r16, KL 0.2, lr 2e-4). The room text is not the whole state (what
was taken or opened earlier is not always in it), so step groups stay within an episode group
(``step_grouping="exact"``). With ALFWorld's data: ``env_config={"mode": "alfworld", "data_path": ...}``
(notes/envs.md).

Measured (``python benchmarks/learning_seeds.py --example tuned_examples/alfworld_gigpo.py --seeds 0``,
benchmarks/results/learning_seeds_alfworld_gigpo.md), seed 0 on 2 CPU cores: success on 32 held-out games
0.000 untrained -> 0.000 after 4 iterations, 24.1 min a run (~200 s an iteration, peak memory 7.6 GB). The
untrained model writes no admissible action at all (valid-action rate 0.00; its replies continue the story
instead of naming a command), so there is no signal to learn from at this size: an in-context example of the
format (``few_shot``) or a larger model is the next thing to try.

On a GPU (``rllib-llm train tuned_examples/alfworld_gigpo.py --gpu``: 8 groups x 4 episodes; benchmarks/gpu_jobs.py examples, benchmarks/results/gpu_examples_search_webshop_alfworld.md; one H200 shared by 6 runs, 2026-12-06), seed 0,
200 s of training (6 iterations, ~37 s each): 0.000 -> 0.000 on 32 held-out games, valid-action rate 0.000
before and after (0.006 in training): no signal at all. Seed 1, started beside 5 other runs, ran out of memory.
TextWorld needs jericho, which PyPI ships only as an sdist (pip builds it; a C compiler is needed).
"""

from pathlib import Path

from rllib_llm.env_connectors import ChatPromptBuilder, SlidingWindowMemory
from rllib_llm.run.cli import load_tuned_example

GAMES = {"mode": "local", "max_steps": 6, "num_games": 8}

# The main job's recipe (model, LoRA, sampling, training, evaluation), with this env, prompt and sizes.
main_job, _ = load_tuned_example(Path(__file__).resolve().parent / "numberline_gigpo.py")
config = (
    main_job.copy(copy_frozen=False)
    .environment("ALFWorld", env_config=GAMES)
    .env_runners(env_to_module_connector=lambda env, spaces, device: [SlidingWindowMemory(window=2), ChatPromptBuilder()])
    .generation(max_new_tokens=24)
    .group_rollouts(group_size=4, num_groups=2, max_episode_steps=GAMES["max_steps"], few_shot=[])
    .training(step_grouping="exact", micro_batch_size=4)  # long prompts: 4 rows a forward/backward pass on a CPU
    .evaluation(evaluation_num_seeds=32)
)

stop = {"training_iteration": 4}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
