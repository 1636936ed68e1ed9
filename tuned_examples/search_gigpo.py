"""GiGPO on Search (tool calling after Search-R1) with the embedded SmolLM2-135M-Instruct (2 CPU cores, the
shipped question set and corpus, an in-process BM25 retriever: no server, no download).

    rllib-llm train tuned_examples/search_gigpo.py [--seed S]

An episode is a question and up to 3 turns; each turn the model either searches (``<search>query</search>``:
the top 3 passages come back as the next observation) or answers (``<answer>text</answer>``: exact match is
success and ends it). The env reads the whole reply (``action_format="raw"``), so replies are not prefilled
with ``<action>`` and stop at ``</search>`` or ``</answer>``; the prompt is Search-R1's template with the
last 2 turns kept (sliding-window memory). Each iteration plays 2 groups x 4 episodes (a group asks the same
question); the rest of the recipe is the main job's (LoRA r16, KL 0.2, lr 2e-4). The observation after a
search is not the whole state (the question and earlier passages are not in it), so step groups stay within
an episode group (``step_grouping="exact"``). With a retrieval server over a real corpus:
``env_config={"retriever": "http://127.0.0.1:8000"}`` (rllib_llm/envs/search/server.py).

Measured (``python benchmarks/learning_seeds.py --example tuned_examples/search_gigpo.py --seeds 0``,
benchmarks/results/learning_seeds_search_gigpo.md), seed 0 on 2 CPU cores: exact-match success on 32 held-out
questions 0.000 untrained -> 0.000 after 4 iterations, 8.4 min a run (~95 s an iteration, peak memory 6.3 GB
with micro-batches of 4 rows; without them the first update was killed by the OOM killer at 24 GB). The 135M
model almost never writes a well-formed ``<search>`` or ``<answer>`` tag (valid-action rate 0.02 untrained,
0.04 in training): at this size the task needs a larger model or a format warm-up (supervised steps on the
tag format) before RL.

On a GPU (``rllib-llm train tuned_examples/search_gigpo.py --gpu``: 8 groups x 4 episodes; benchmarks/gpu_jobs.py examples, benchmarks/results/gpu_examples_search_webshop_alfworld.md; one H200 shared by 6 runs, 2026-12-06), seeds 0-1,
200 s of training (10 iterations, ~22 s each): 0.000 -> 0.000 on 32 held-out questions for both; valid-action
rate 0.021 untrained, 0.021 / 0.083 trained, training success 0.00 throughout. More samples do not help while
the model does not write the tags: the next step is the format warm-up above, not a longer run.
"""

from pathlib import Path

from rllib_llm.env_connectors import ChatPromptBuilder, SlidingWindowMemory
from rllib_llm.run.cli import load_tuned_example

SEARCH = {"max_turns": 3, "topk": 3}

# The main job's recipe (model, LoRA, sampling, training, evaluation), with this env, prompt and sizes.
main_job, _ = load_tuned_example(Path(__file__).resolve().parent / "numberline_gigpo.py")
config = (
    main_job.copy(copy_frozen=False)
    .environment("Search", env_config=SEARCH)
    .env_runners(env_to_module_connector=lambda env, spaces, device: [SlidingWindowMemory(window=2), ChatPromptBuilder()])
    .generation(max_new_tokens=48, stop=["</search>", "</answer>"])
    .group_rollouts(group_size=4, num_groups=2, max_episode_steps=SEARCH["max_turns"], few_shot=[], response_prefix="")
    .training(step_grouping="exact", micro_batch_size=4)  # long prompts: 4 rows a forward/backward pass on a CPU
    .evaluation(evaluation_num_seeds=32)
)

stop = {"training_iteration": 4}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
