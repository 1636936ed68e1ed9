"""GiGPO on Sokoban from pixels with a vision-language policy: Qwen2.5-VL-3B-Instruct on one GPU.

    rllib-llm train tuned_examples/sokoban_gigpo_vl.py

verl-agent's visual Sokoban: 6x6 rooms with one box, at most 15 steps, the board shown only as an RGB image
(``text_obs=False``; 28 px tiles make 168 x 168 px, 36 image tokens after Qwen2-VL's 2x2 patch merge), the
last 2 steps in memory. 8 groups x 8 envs per iteration; GiGPO with a small KL to the frozen reference.

The EnvRunner samples through ``HFVisionBackend`` (eager ``model.generate``) in bf16; the Learner keeps
float32 weights (bf16 would round most Adam steps away) on the same GPU, with gradient checkpointing. Each
step records its prompt ids with the image tokens expanded; the Learner re-reads the image from the episode's
observation. Not yet run on a GPU; tests/core/test_vl_training.py trains it for one iteration on the CPU
with a tiny random Qwen2.5-VL swapped in.
"""

import torch

from rllib_llm.algorithms import GiGPOConfig
from rllib_llm.env_connectors import ChatPromptBuilder, SlidingWindowMemory

GPUS = 1 if torch.cuda.is_available() else 0

config = (
    GiGPOConfig()
    .environment(
        "Sokoban",
        env_config={
            "dim_room": (6, 6),
            "num_boxes": 1,
            "max_steps": 15,
            "image_obs": True,
            "text_obs": False,
            "tile_size": 28,
        },
    )  # fmt: skip
    .env_runners(
        num_gpus_per_env_runner=GPUS,
        env_to_module_connector=lambda env, spaces, device: [
            SlidingWindowMemory(window=2),
            ChatPromptBuilder(max_prompt_tokens=2048),
        ],
    )
    .learners(num_gpus_per_learner=GPUS)
    .llm(
        model={"name_or_path": "Qwen/Qwen2.5-VL-3B-Instruct", "inference_dtype": "bfloat16"},
        gradient_checkpointing=True,
    )
    .generation(temperature=1.0, max_new_tokens=256, stop=["</action>"])
    .group_rollouts(
        group_size=8, num_groups=8, max_episode_steps=15, invalid_action_penalty=0.1, prompt_template="Sokoban"
    )
    .training(
        lr=1e-6,
        gamma=0.95,
        step_advantage_weight=1.0,
        advantage_norm="std",
        kl_coeff=0.01,
        minibatch_size=32,
        num_epochs=1,
    )  # fmt: skip
    .evaluation(evaluation_num_seeds=64)
    .debugging(seed=0)
)

stop = {"training_iteration": 100}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example

    run_example(config, stop)
