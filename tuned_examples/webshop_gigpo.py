"""GiGPO on WebShop's local shop with the embedded SmolLM2-135M-Instruct (2 CPU cores, no server, no download).

    rllib-llm train tuned_examples/webshop_gigpo.py [--seed S]

The local shop (rllib_llm/envs/webshop) ships a product catalogue and its goals: an episode is an instruction
("i need throw pillow covers that are corduroy ... price lower than 20.00 dollars"), then up to 5 actions
among the admissible ones the observation lists (``search[<query>]``, ``click[<item>]``, ``click[buy now]``);
buying ends it with WebShop's attribute-match reward, and success is a full match. Each iteration plays 2
groups x 4 episodes (a group shares the goal), the prompt is the env's own template (task, the last 2 steps,
the page, the admissible actions) and the rest of the recipe is the main job's (LoRA r16, KL 0.2, lr 2e-4).
Pages are not the whole state (two equal pages can follow different searches), so step groups stay within an
episode group (``step_grouping="exact"``, the paper's GiGPO). With the real WebShop server: ``env_config=
{"server_url": "http://host:3000"}``.

Measured (``python benchmarks/learning_seeds.py --example tuned_examples/webshop_gigpo.py --seeds 0``, 2 CPU
cores, 2026-12-06): untrained success 0.000, valid-action rate 0.200 on 32 held-out goals (that evaluation
alone took ~12 min); the first training iteration took 915 s (prompts of 661 tokens on average, 16-19 GB
resident with micro-batches of 4) with training success 0.00, so the run (4 iterations + evaluation, ~1 h)
was stopped: the 135M model does not find WebShop's goals in CPU time. Its first CPU run (before
micro-batches) was killed by the OOM killer at 23 GB in the first update.

On a GPU (``rllib-llm train tuned_examples/webshop_gigpo.py --gpu``: 8 groups x 4 episodes, micro-batches of
8; benchmarks/gpu_jobs.py examples, benchmarks/results/gpu_examples_search_webshop_alfworld.md; one H200 shared by 6 runs, 2026-12-06), seed 0, 200 s of training (4 iterations, ~51 s each): 0.000 -> 0.000 on 32 held-out goals,
valid-action rate 0.200 before and after, training success 0.00. Seed 1, started beside it, ran out of memory
holding 38 GB (the card's largest process held 57 GB): long pages x micro-batches of 8 need a card of their
own, or ``micro_batch_size=4``.
"""

from pathlib import Path

from rllib_llm.env_connectors import ChatPromptBuilder, SlidingWindowMemory
from rllib_llm.run.cli import load_tuned_example

SHOP = {"max_steps": 5}

# The main job's recipe (model, LoRA, sampling, training, evaluation), with this env, prompt and sizes.
main_job, _ = load_tuned_example(Path(__file__).resolve().parent / "numberline_gigpo.py")
config = (
    main_job.copy(copy_frozen=False)
    .environment("WebShop", env_config=SHOP)
    .env_runners(env_to_module_connector=lambda env, spaces, device: [SlidingWindowMemory(window=2), ChatPromptBuilder()])
    .generation(max_new_tokens=32)
    .group_rollouts(group_size=4, num_groups=2, max_episode_steps=SHOP["max_steps"], few_shot=[])
    .training(step_grouping="exact", micro_batch_size=4)  # long prompts: 4 rows a forward/backward pass on a CPU
    .evaluation(evaluation_num_seeds=32)
)

stop = {"training_iteration": 4}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
