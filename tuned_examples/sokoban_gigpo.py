"""GiGPO on text Sokoban (6x6 room, one box) with the embedded SmolLM2-135M-Instruct, sized for 2 CPU cores.

    rllib-llm train tuned_examples/sokoban_gigpo.py [--seed S]

Each iteration plays 2 groups x 4 episodes of up to 6 moves (the envs of a group start in the same room);
the observation is the text grid with its legend, the prompt keeps the last 2 steps (sliding-window memory)
and one in-context example shows the action format (``<action>up</action>``, ``down``, ``left``, ``right``).
Levels are generated (random-walk room, reverse play) with solutions of at least 2 moves; rewards are
gym-sokoban's (-0.1 a step, +1 / -1 a box on / off a target, +10 solved). The rest of the recipe is the main
job's (tuned_examples/numberline_gigpo.py): LoRA r16 on every projection, KL 0.2 to the base model, lr 2e-4,
GiGPO step groups pooled across episode groups (a Sokoban anchor, the grid, is the whole state).

Measured (``python benchmarks/learning_seeds.py --example tuned_examples/sokoban_gigpo.py --seeds 0``,
benchmarks/results/learning_seeds_sokoban_gigpo.md), seed 0 on 2 CPU cores: greedy success on 32 held-out rooms
0.000 untrained -> 0.000 after 4 iterations (valid-action rate 1.000), 10.6 min a run (about 2 min an
iteration: 8 episodes of ~440-token prompts). The 135M model does not solve Sokoban in CPU time; on a GPU at 8 groups x 4 (benchmarks/results/learning_seeds_gpu_sokoban.md) 10 iterations
took greedy success on 64 held-out rooms from 0.031 to 0.089 (GiGPO, seeds 0-2) against GRPO's 0.057.
"""

from pathlib import Path

from rllib_llm.env_connectors import ChatPromptBuilder, SlidingWindowMemory
from rllib_llm.envs.sokoban import SokobanEnv
from rllib_llm.run.cli import load_tuned_example

ROOM = {"dim_room": (6, 6), "num_boxes": 1, "max_steps": 6, "min_solution_length": 2}

example_room, _ = SokobanEnv(**ROOM).reset(seed=0)

# The main job's recipe (model, LoRA, sampling, training, evaluation), with this env, prompt and sizes.
main_job, _ = load_tuned_example(Path(__file__).resolve().parent / "numberline_gigpo.py")
config = (
    main_job.copy(copy_frozen=False)
    .environment("Sokoban", env_config=ROOM)
    .env_runners(env_to_module_connector=lambda env, spaces, device: [SlidingWindowMemory(window=2), ChatPromptBuilder()])
    .generation(max_new_tokens=24)
    .group_rollouts(group_size=4, num_groups=2, max_episode_steps=ROOM["max_steps"], few_shot=[(example_room, "<action>down</action>")])
    .evaluation(evaluation_num_seeds=32)
)

stop = {"training_iteration": 4}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
