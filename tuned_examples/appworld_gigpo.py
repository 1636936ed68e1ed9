"""GiGPO on AppWorld's offline stand-in with the embedded SmolLM2-135M-Instruct (2 CPU cores, no server to install).

    rllib-llm train tuned_examples/appworld_gigpo.py [--seed S]

A STAND-IN, not AppWorld: ``env_config={"server_url": "standin"}`` starts, for each env, a small server that
speaks AppWorld's environment-server protocol (rllib_llm/envs/appworld/standin.py) over 8 toy tasks on four
simulated apps ("How many songs are in my playlist 'Road Trip'?", "Add 'buy milk' to my to-do list."). The
action is Python code calling ``apis`` (run in the task's world, in a child process with CPU and memory
limits); the printed output is the next observation; ``apis.supervisor.complete_task(answer=...)`` ends the
episode and the task's tests score it. Each iteration plays 2 groups x 4 episodes of up to 3 steps; the rest
is the main job's recipe (LoRA r16, KL 0.2, lr 2e-4). Observations (printed outputs) are not the whole state
(the world changes unseen), so step groups stay within an episode group (``step_grouping="exact"``).

Measured (``rllib-llm train tuned_examples/appworld_gigpo.py``, seed 0, 2 CPU cores, 2026-12-08): it runs
offline end to end, 10 min in all (4 iterations of 85-96 s, two 16-seed evaluations); greedy success 0.000 ->
0.000, every held-out reply valid Python; training episodes 0.50-0.58 valid, no task solved: the 135M model
writes code-shaped lines that call APIs that do not exist (``apis.cookies.session.delete(...)``). Without the
demonstration turn no reply was code at all (valid 0.000 before and after). The stand-in is for seeing the env
and the pipeline work; learning it needs a real model on a GPU (``--gpu --model ...``).

With AppWorld itself (``pip install appworld; appworld install; appworld download data; appworld serve
environment --port 9000``, in an environment of its own): ``env_config={"server_url": "http://127.0.0.1:9000",
"split": "train"}`` (one server per concurrent env: ``num_groups * group_size`` ports).
"""

from pathlib import Path

from rllib_llm.env_connectors import ChatPromptBuilder, SlidingWindowMemory
from rllib_llm.run.cli import load_tuned_example

APPWORLD = {"server_url": "standin", "max_steps": 3}

#: One demonstration turn (a task of no stand-in's): without it the 135M model writes prose, never code.
DEMO = ("Task: What is my email address?\nNo code has been run yet.",
        "<action>apis.supervisor.complete_task(answer=apis.supervisor.show_profile()['email'])</action>")

# The main job's recipe (model, LoRA, sampling, training, evaluation), with this env, prompt and sizes.
main_job, _ = load_tuned_example(Path(__file__).resolve().parent / "numberline_gigpo.py")
config = (
    main_job.copy(copy_frozen=False)
    .environment("AppWorld", env_config=APPWORLD)
    .env_runners(env_to_module_connector=lambda env, spaces, device: [SlidingWindowMemory(window=2), ChatPromptBuilder()])
    .generation(max_new_tokens=64)
    .group_rollouts(group_size=4, num_groups=2, max_episode_steps=APPWORLD["max_steps"], few_shot=[DEMO])
    .training(step_grouping="exact", micro_batch_size=4)
    .evaluation(evaluation_num_seeds=16)
)

stop = {"training_iteration": 4}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
