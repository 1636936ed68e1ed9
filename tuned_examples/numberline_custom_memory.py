"""GiGPO on NumberLine with a custom memory: the positions the pointer has visited (CPU, ~10 minutes).

    rllib-llm train tuned_examples/numberline_custom_memory.py

Writing a memory = subclassing ``Memory`` with ``update`` (one call per completed step, per episode) and
``render`` (the history block of the next prompt). Its state lives in the episode, so it resets with it.
"""

from rllib_llm.algorithms import GiGPOConfig
from rllib_llm.env_connectors import ChatPromptBuilder, Memory


class VisitedPositionsMemory(Memory):
    """The distinct positions the pointer reached, in order (from the env's anchor ``(target, position)``)."""

    def update(self, state: list[int], observation, action, reward, info) -> list[int]:
        position = (info.get("anchor_obs") or (None, None))[1]
        return state if position is None or position in state else [*state, position]

    def render(self, state: list[int]) -> str:
        return f"Positions visited so far: {', '.join(map(str, state))}.\n" if state else ""


config = (
    GiGPOConfig()
    .environment("NumberLine", env_config={"max_position": 5, "max_steps": 6})
    .env_runners(env_to_module_connector=lambda env, spaces, device: [VisitedPositionsMemory(), ChatPromptBuilder()])
    .llm(model="smollm2-135m-instruct")
    .generation(temperature=1.0, max_new_tokens=12, stop=["</action>"])
    .group_rollouts(group_size=4, num_groups=4, max_episode_steps=6, invalid_action_penalty=0.1)
    .training(lr=2e-5, gamma=0.95, minibatch_size=16, num_epochs=1)
    .evaluation(evaluation_num_seeds=32)
    .debugging(seed=0)
)

stop = {"training_iteration": 12}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
