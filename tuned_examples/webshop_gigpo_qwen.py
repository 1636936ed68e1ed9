"""GiGPO on WebShop (the local shop) with a real instruct model on one GPU: verl-agent's recipe, scaled.

    rllib-llm train tuned_examples/webshop_gigpo_qwen.py --gpu [--model MODEL] [--seed S]

The training recipe, model and Learner settings are ``tuned_examples/sokoban_gigpo_qwen.py``'s; what is
WebShop's: verl-agent's WebShop prompt (the registered ``"WebShop"`` template: the task, the last 2 steps, the
admissible actions quoted one per line, no example action to copy: the 0.5B searched for the old prompt's
example "red t-shirt"), episodes of up to 15 steps (verl-agent's), page observations of up to 2,048 prompt
tokens. Untrained (issue 43, Qwen2.5-Coder-1.5B-Instruct, the older prompt, H100): 0.00 on 32 goals, valid
0.98 (it searched the task, then clicked one option again and again).
"""

from pathlib import Path

from rllib_llm.env_connectors import ChatPromptBuilder, SlidingWindowMemory
from rllib_llm.run.cli import load_tuned_example

SHOP = {"max_steps": 15}

recipe, stop = load_tuned_example(Path(__file__).with_name("sokoban_gigpo_qwen.py"))
config = (
    recipe.copy(copy_frozen=False)
    .environment("WebShop", env_config=SHOP)
    .env_runners(env_to_module_connector=lambda env, spaces, device: [SlidingWindowMemory(window=2),
                                                                      ChatPromptBuilder(max_prompt_tokens=2048)])
    .group_rollouts(max_episode_steps=SHOP["max_steps"], prompt_template="WebShop")
)

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
