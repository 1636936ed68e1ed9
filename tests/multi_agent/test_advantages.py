"""Agent-wise group advantages (Dr. MAS) on hand-built multi-agent episodes, against hand-computed numbers."""

from types import SimpleNamespace

import numpy as np
import pytest
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

from rllib_llm.algorithms.learner_connectors import ComputeAdvantages, StepsToTokenBatch
from rllib_llm.columns import ACTION_LOGP, ADVANTAGES, ANCHOR, GROUP_ID, PROMPT, RESPONSE
from rllib_llm.multi_agent import AgentToModule, MultiAgentGiGPOConfig, MultiAgentGRPOConfig
from rllib_llm.multi_agent.learner_connectors import FlattenAgentSteps

R = 0.5 / (np.sqrt(0.5) + 1e-6)  # a centred value of 0.5 over the unbiased std of {+0.5, -0.5}: ~0.70711


TWO_MODULES = AgentToModule({"a": "solver_llm", "b": "verifier_llm"})


def episode(group_id, steps, mapping=TWO_MODULES):
    """Both agents act every step; ``steps = {agent: [(reward, anchor), ...]}``."""
    ep = MultiAgentEpisode(agent_to_module_mapping_fn=mapping)
    ep.add_env_reset(observations=dict.fromkeys(steps, "start"), infos={a: {} for a in steps})
    length = len(next(iter(steps.values())))
    for t in range(length):
        ep.add_env_step(
            observations=dict.fromkeys(steps, f"obs {t + 1}"),
            actions=dict.fromkeys(steps, "go"),
            rewards={a: s[t][0] for a, s in steps.items()},
            terminateds={"__all__": t == length - 1},
            extra_model_outputs={
                a: {
                    PROMPT: [5, 6, 7],
                    RESPONSE: [8, 9][: 1 + (a == "b")],
                    ACTION_LOGP: [-1.0] * (1 + (a == "b")),
                    ANCHOR: s[t][1],
                }
                for a, s in steps.items()
            },
        )
    for agent_episode in ep.agent_episodes.values():
        agent_episode.custom_data[GROUP_ID] = group_id
    return ep


def advantages(config, episodes) -> dict:
    """{module id: step columns with advantages}: the pipeline's first pieces on ``episodes``."""
    batch: dict = {}
    for piece in (FlattenAgentSteps(grouping=config.advantage_grouping), ComputeAdvantages(config=config)):
        batch = piece(rl_module=None, batch=batch, episodes=episodes, shared_data={})
    return batch


ONE_STEP = [
    episode("g1", {"a": [(1.0, "s")], "b": [(3.0, "s")]}),
    episode("g1", {"a": [(0.0, "s")], "b": [(1.0, "s")]}),
    episode("g2", {"a": [(5.0, "s")], "b": [(5.0, "s")]}),
    episode("g2", {"a": [(5.0, "s")], "b": [(7.0, "s")]}),
]


def test_grpo_normalizes_within_group_and_agent():
    batch = advantages(MultiAgentGRPOConfig(), ONE_STEP)
    # agent a (solver_llm) per episode, then agent b (verifier_llm)
    np.testing.assert_allclose(batch["solver_llm"][ADVANTAGES], [R, -R, 0.0, 0.0], atol=1e-5)
    np.testing.assert_allclose(batch["verifier_llm"][ADVANTAGES], [R, -R, -R, R], atol=1e-5)


def test_grpo_group_pooling_mixes_the_agents_of_a_group():
    config = MultiAgentGRPOConfig().agents(advantage_grouping="group")
    batch = advantages(config, ONE_STEP[:2])
    # returns a1=1, b1=3, a2=0, b2=1: mean 1.25, unbiased std sqrt(4.75 / 3), across the two modules
    std = np.sqrt(4.75 / 3) + 1e-6
    np.testing.assert_allclose(batch["solver_llm"][ADVANTAGES], np.array([-0.25, -1.25]) / std, atol=1e-5)
    np.testing.assert_allclose(batch["verifier_llm"][ADVANTAGES], np.array([1.75, -0.25]) / std, atol=1e-5)


def test_gigpo_step_groups_stay_within_each_agent():
    config = MultiAgentGiGPOConfig().training(gamma=0.5, step_advantage_weight=1.0)
    episodes = [
        episode("g", {"a": [(0.0, "s0"), (1.0, "s1")], "b": [(1.0, "s0"), (2.0, "s1")]}),
        episode("g", {"a": [(0.0, "s0"), (0.0, "s2")], "b": [(1.0, "s0"), (0.0, "s1")]}),
    ]
    batch = advantages(config, episodes)
    # a: episode part +-R (returns 1 vs 0); step part: s0 discounted returns 0.5 vs 0 -> +-R, s1/s2 alone -> 0.
    # b: episode part +-R (3 vs 1); s0: 2 vs 1 -> +-R; s1: 2 vs 0 -> +-R. Same anchor names, separate groups.
    np.testing.assert_allclose(batch["solver_llm"][ADVANTAGES], [2 * R, R, -2 * R, -R], atol=1e-4)
    np.testing.assert_allclose(batch["verifier_llm"][ADVANTAGES], [2 * R, 2 * R, -2 * R, -2 * R], atol=1e-4)
    pooled = advantages(config.agents(advantage_grouping="group"), episodes)
    assert not np.allclose(pooled["solver_llm"][ADVANTAGES], [2 * R, R, -2 * R, -R], atol=1e-3)


def test_module_batches_take_their_agents_rows():
    steps = advantages(MultiAgentGRPOConfig(), ONE_STEP)
    tokenizer = SimpleNamespace(pad_token_id=0)
    module = SimpleNamespace(unwrapped=lambda: SimpleNamespace(tokenizer=tokenizer))
    batch = StepsToTokenBatch()(
        rl_module={"solver_llm": module, "verifier_llm": module}, batch=dict(steps), episodes=ONE_STEP
    )
    assert set(batch) == {"solver_llm", "verifier_llm"}
    np.testing.assert_allclose(batch["solver_llm"]["advantages"], [R, -R, 0.0, 0.0], atol=1e-5)
    np.testing.assert_allclose(batch["verifier_llm"]["advantages"], [R, -R, -R, R], atol=1e-5)
    assert batch["solver_llm"]["response_mask"].shape == (4, 1) and batch["verifier_llm"]["response_mask"].shape == (
        4,
        2,
    )
    with pytest.raises(ValueError, match="does not have"):
        StepsToTokenBatch()(rl_module={"solver_llm": module}, batch=advantages(MultiAgentGRPOConfig(), ONE_STEP), episodes=[])


def test_one_shared_module_trains_on_all_agents_with_agent_wise_advantages():
    shared_mapping = AgentToModule(default="shared")
    episodes = [
        episode("g1", {"a": [(1.0, "s")], "b": [(3.0, "s")]}, shared_mapping),
        episode("g1", {"a": [(0.0, "s")], "b": [(1.0, "s")]}, shared_mapping),
    ]
    steps = advantages(MultiAgentGRPOConfig(), episodes)
    module = SimpleNamespace(unwrapped=lambda: SimpleNamespace(tokenizer=SimpleNamespace(pad_token_id=0)))
    batch = StepsToTokenBatch()(rl_module={"shared": module}, batch=steps, episodes=episodes)
    np.testing.assert_allclose(batch["shared"]["advantages"], [R, R, -R, -R], atol=1e-5)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"advantage_estimator": "gae"}, "needs"),
        ({"dynamic_sampling": True}, "dynamic_sampling"),
    ],
)
def test_config_refuses_what_multi_agent_training_cannot_do(change, message):
    config = MultiAgentGRPOConfig().environment("TicTacToe").training(**change)
    with pytest.raises(ValueError, match=message):
        config.validate()


def test_config_refuses_unknown_advantage_grouping():
    with pytest.raises(ValueError, match="advantage_grouping"):
        MultiAgentGRPOConfig().environment("TicTacToe").agents(advantage_grouping="team").validate()


def test_row_mode_invalid_action_penalty_reaches_each_agents_rows():
    """verl-agent's row mode works for multi-agent too now that the penalty is the Learner's: an invalid
    step's own row is offset by -penalty after the group statistics (over steps)."""
    from rllib_llm.algorithms.advantages import grpo_advantages
    from rllib_llm.columns import EPISODE_INDEX, GROUP_INDEX, REWARDS, VALID

    config = MultiAgentGRPOConfig().environment("TicTacToe").training(advantage_norm="mean", group_stats_over_steps=True)
    config.group_rollouts(invalid_action_penalty_mode="row")
    config.validate()
    batch = FlattenAgentSteps(grouping=config.advantage_grouping)(rl_module=None, batch={}, episodes=ONE_STEP)
    batch["solver_llm"][VALID] = np.array([False, True, True, True])
    batch = ComputeAdvantages(config=config)(rl_module=None, batch=batch, episodes=ONE_STEP)
    solver = batch["solver_llm"]
    expected = grpo_advantages(solver[REWARDS], solver[EPISODE_INDEX], solver[GROUP_INDEX], "mean", over_steps=True,
                               row_offset=np.array([-0.1, 0.0, 0.0, 0.0]))
    np.testing.assert_allclose(solver[ADVANTAGES], expected, atol=1e-6)
    assert solver[ADVANTAGES][0] < batch["verifier_llm"][ADVANTAGES][0]  # a: 1 vs 0 -> +0.5 - 0.1; b: +1
