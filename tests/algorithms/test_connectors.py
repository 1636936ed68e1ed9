"""The learner connector of each algorithm on hand-made episodes: the columns it writes and their values."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2

from rllib_llm.algorithms import DAPOConfig, GiGPOConfig, GRPOConfig, PPOConfig, ReinforcePlusPlusConfig
from rllib_llm.algorithms.advantages import (
    batch_normalize,
    discounted_returns,
    gae_advantages,
    reinforce_pp_advantages,
)
from rllib_llm.algorithms.learner_connectors import overlong_penalty
from rllib_llm.columns import ADVANTAGES, EPISODE_INDEX, GROUP_INDEX, OLD_VALUES, REF_LOGP, REWARDS, VALUE_TARGETS
from rllib_llm.multi_agent import MultiAgentGRPOConfig
from tests.algorithms.conftest import make_episode, run_learner_connector, tiny_module


def tiny(cls, **training):
    return cls().environment("NumberLine").llm(model="tiny-random-llama").generation(max_new_tokens=8).training(**training)


@pytest.fixture(scope="module")
def module():
    return tiny_module(value_head=True, use_reference=True)


def two_groups():
    return [
        make_episode("r-0", [0.0, 1.0], anchors=["A", "B"]),
        make_episode("r-0", [-0.1, 0.0, 0.0], anchors=["A", "A", "C"]),
        make_episode("r-1", [1.0], anchors=["A"], responses=[[70, 71, 72, 73]]),
    ]


def test_grpo_writes_one_advantage_per_step_next_to_the_token_batch(module):
    batch, steps = run_learner_connector(tiny(GRPOConfig, advantage_norm="mean"), module, two_groups())
    # Group r-0: returns 1 and -0.1 -> mean 0.45 -> +0.55 (2 steps), -0.55 (3 steps); group r-1 alone -> 0.
    np.testing.assert_allclose(batch["advantages"], [0.55, 0.55, -0.55, -0.55, -0.55, 0.0], rtol=1e-6)
    np.testing.assert_array_equal(steps[GROUP_INDEX], [0, 0, 0, 0, 0, 1])
    assert batch["input_ids"].shape[0] == batch["response_mask"].shape[0] == 6
    assert batch["response_mask"].shape[1] == 4  # the longest response
    assert OLD_VALUES not in batch


def test_gigpo_similarity_grouping_is_selected_by_the_config(module):
    # Two one-step episodes of one group, anchors 0.9-similar, returns 1 and 0 (mean mode, see
    # test_advantages.py::test_gigpo_with_similarity_groups_by_hand): similarity [1, -1], exact [0.5, -0.5].
    episodes = [make_episode("g", [1.0], anchors=["abcdefghij"]), make_episode("g", [0.0], anchors=["abcdefghiX"])]
    similar = tiny(GiGPOConfig, advantage_norm="mean", step_grouping="similarity", similarity_threshold=0.9)
    np.testing.assert_allclose(run_learner_connector(similar, module, episodes)[0]["advantages"], [1.0, -1.0])
    exact = tiny(GiGPOConfig, advantage_norm="mean")
    np.testing.assert_allclose(run_learner_connector(exact, module, episodes)[0]["advantages"], [0.5, -0.5])


def test_ppo_connector_computes_values_and_gae_targets(module):
    with torch.no_grad():
        module.value_head.weight.normal_(0.0, 0.5)
        module.value_head.bias.fill_(0.1)
    config = tiny(PPOConfig, gamma=0.9, lambda_=0.8)
    batch, steps = run_learner_connector(config, module, two_groups())
    tensors = {k: torch.as_tensor(v) for k, v in batch.items() if k in ("input_ids", "attention_mask", "response_mask", "action_logp")}
    values = module.values(tensors)[:, 0].double().numpy()
    assert np.ptp(values) > 0  # a real, input-dependent critic
    adv, targets = gae_advantages(steps[REWARDS], values, steps[EPISODE_INDEX], 0.9, 0.8)
    np.testing.assert_allclose(batch[OLD_VALUES], values, rtol=1e-5)
    np.testing.assert_allclose(batch[VALUE_TARGETS], targets, rtol=1e-5)
    np.testing.assert_allclose(batch["advantages"], batch_normalize(adv, "std"), rtol=1e-5, atol=1e-6)


def test_reinforce_pp_connector_folds_the_reference_kl_into_token_rewards(module):
    config = tiny(ReinforcePlusPlusConfig, kl_reward_coeff=0.1, gamma=0.9)
    batch, steps = run_learner_connector(config, module, two_groups())
    tensors = {k: torch.as_tensor(v) for k, v in batch.items() if k in ("input_ids", "attention_mask", "response_mask", "action_logp")}
    kl = (tensors["action_logp"].double() - module.reference_logprobs(tensors).double()).numpy()  # k1
    expected, _ = reinforce_pp_advantages(
        discounted_returns(steps[REWARDS], steps[EPISODE_INDEX], 0.9), kl, batch["response_mask"], 0.1
    )
    assert batch["advantages"].shape == batch["response_mask"].shape
    np.testing.assert_allclose(batch["advantages"], expected, rtol=1e-4, atol=1e-5)
    # Without the KL term every token of a step carries the same (whitened) return.
    plain, _ = run_learner_connector(tiny(ReinforcePlusPlusConfig, kl_reward_coeff=0.0), module, two_groups())
    row = plain["advantages"][0][plain["response_mask"][0] == 1]
    np.testing.assert_allclose(row, row[0])


def _counted(module, name):
    """Wraps ``module.<name>`` to count its calls (the instance attribute shadows the method)."""
    calls = []
    method = getattr(module, name)

    def counted(batch):
        calls.append(len(batch["input_ids"]))
        return method(batch)

    setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("rows, passes", [(None, [6]), (4, [4, 2])])
def test_the_kl_reference_logprobs_are_one_learner_column_computed_once_per_batch(rows, passes):
    """kl_coeff > 0: ReferenceLogProbs writes ``ref_logp`` (the frozen reference's log-probs of every response
    token) in passes of ``logprob_batch_size`` rows, before the minibatches: the loss reads the column."""
    module = tiny_module(use_reference=True)
    calls = _counted(module, "reference_logprobs")
    batch, _ = run_learner_connector(tiny(GRPOConfig, kl_coeff=0.1, logprob_batch_size=rows), module, two_groups())
    assert calls == passes
    del module.reference_logprobs
    tensors = {k: torch.as_tensor(v) for k, v in batch.items() if k in ("input_ids", "attention_mask", "response_mask")}
    assert batch[REF_LOGP].dtype == np.float32 and batch[REF_LOGP].shape == batch["response_mask"].shape
    np.testing.assert_allclose(batch[REF_LOGP], module.reference_logprobs(tensors).numpy(), rtol=1e-5, atol=1e-5)
    assert REF_LOGP not in run_learner_connector(tiny(GRPOConfig), module, two_groups())[0]


def test_reinforce_pp_with_a_kl_loss_takes_one_reference_pass_for_both_terms(module):
    calls = _counted(module, "reference_logprobs")
    try:
        batch, _ = run_learner_connector(tiny(ReinforcePlusPlusConfig, kl_reward_coeff=0.1, kl_coeff=0.1), module, two_groups())
    finally:
        del module.reference_logprobs
    assert len(calls) == 1 and batch[REF_LOGP].dtype == np.float32


def test_the_kl_loss_without_its_reference_column_is_one_clear_error(ray_session):
    config = tiny(GRPOConfig, kl_coeff=0.1, minibatch_size=64).group_rollouts(group_size=2, num_groups=1, max_episode_steps=2)
    algo = config.build_algo()
    try:
        episodes = algo.env_runner.sample()
        algo.learner_group._learner._learner_connector.remove("ReferenceLogProbs")
        with pytest.raises(KeyError, match="no 'ref_logp' column"):
            algo.learner_group.update(episodes=episodes, num_epochs=1, minibatch_size=64)
    finally:
        algo.stop()


def test_overlong_penalty_by_hand():
    # max 8 tokens, buffer 4: no penalty up to 4 tokens, then -(length - 4) / 4: 6 -> -0.5, 8 -> -1.
    np.testing.assert_allclose(overlong_penalty([3, 4, 6, 8], 8, 4), [0.0, 0.0, -0.5, -1.0])
    np.testing.assert_allclose(overlong_penalty([6], 8, 4, factor=2.0), [-1.0])


def test_overlong_penalty_changes_rewards_before_the_advantages(module):
    # Both episodes earn 1, but the second answers with 8 tokens (penalty -1) -> returns 1 and 0 -> +-0.5.
    episodes = [
        make_episode("g", [1.0], responses=[[50, 51, 52, 53]]),
        make_episode("g", [1.0], responses=[list(range(50, 58))]),
    ]
    config = tiny(DAPOConfig, overlong_buffer_len=4, advantage_norm="mean")
    batch, steps = run_learner_connector(config, module, episodes)
    np.testing.assert_allclose(steps[REWARDS], [1.0, 0.0])
    np.testing.assert_allclose(batch["advantages"], [0.5, -0.5])


def test_the_invalid_action_penalty_is_reward_shaping_in_the_learner_connector(module):
    # Episodes keep the env's rewards; in "reward" mode the Learner subtracts 0.1 per invalid step (2 here).
    episodes = [make_episode("g", [0.0, 1.0], valid=[False, False]), make_episode("g", [0.0, 1.0], valid=[True, True])]
    assert list(episodes[0].get_rewards()) == [0.0, 1.0]
    batch, steps = run_learner_connector(tiny(GRPOConfig, advantage_norm="mean"), module, episodes)
    np.testing.assert_allclose(steps[REWARDS], [-0.1, 0.9, 0.0, 1.0])
    np.testing.assert_allclose(batch["advantages"], [-0.1, -0.1, 0.1, 0.1], rtol=1e-6)
    # "row" mode leaves the rewards alone (the estimator offsets the invalid rows instead).
    row = tiny(GRPOConfig, advantage_norm="mean", group_stats_over_steps=True).group_rollouts(
        invalid_action_penalty_mode="row"
    )
    assert "InvalidActionPenalty" not in [type(c).__name__ for c in row.build_learner_connector(None, None).connectors]
    np.testing.assert_allclose(run_learner_connector(row, module, episodes)[1][REWARDS], [0.0, 1.0, 0.0, 1.0])


class _DoubleAdvantages(ConnectorV2):
    """A user's learner piece: it sees every module's advantages column before the token batch is built."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        for columns in batch.values():
            columns[ADVANTAGES] = 2.0 * columns[ADVANTAGES]
        return batch


def test_a_users_learner_connector_runs_between_the_advantages_and_the_token_batch(module):
    plain, _ = run_learner_connector(tiny(GRPOConfig, advantage_norm="mean"), module, two_groups())
    config = tiny(GRPOConfig, advantage_norm="mean", learner_connector=lambda obs, act: _DoubleAdvantages())
    doubled, _ = run_learner_connector(config, module, two_groups())
    np.testing.assert_allclose(doubled["advantages"], 2.0 * plain["advantages"])
    assert plain["advantages"].any()


def test_multi_agent_configs_take_a_list_of_user_learner_pieces():
    pieces = [_DoubleAdvantages(), _DoubleAdvantages()]
    config = MultiAgentGRPOConfig().training(learner_connector=lambda obs, act: pieces)
    names = [type(c).__name__ for c in config.build_learner_connector(None, None).connectors]
    assert names == [
        "FlattenAgentSteps", "InvalidActionPenalty", "ComputeAdvantages", "_DoubleAdvantages", "_DoubleAdvantages",
        "StepsToTokenBatch", "NumpyToTensor",
    ]


def test_no_grad_log_prob_passes_measure_the_policy_not_a_dropout_sample():
    """With LoRA dropout the Learner's module trains in train mode; the reference / proximal / value passes run
    in eval mode (two passes agree, and equal an eval-mode forward), and the module's mode is restored."""
    from rllib_llm.algorithms.learner_connectors import module_pass
    from rllib_llm.columns import ACTION_LOGP, PROMPT, RESPONSE
    from rllib_llm.core.rl_module import LLMRLModule

    lora = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.5}
    module = LLMRLModule(model_config={"model": {"name_or_path": "tiny-random-llama", "lora": lora}})
    with torch.no_grad():  # a trained adapter (peft starts lora_B at zero, where dropout changes nothing)
        for name, param in module.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.5)
    columns = {PROMPT: [[5, 6, 7], [8, 9]], RESPONSE: [[10, 11], [12, 13, 14]],
               ACTION_LOGP: [[-1.0, -1.0], [-1.0, -1.0, -1.0]], REWARDS: np.zeros(2)}
    module.train(True)
    first = module_pass(module, columns, lambda chunk: module.logprobs(chunk)[0])
    second = module_pass(module, columns, lambda chunk: module.logprobs(chunk)[0])
    assert module.training and module.model.training
    np.testing.assert_array_equal(first, second)
    module.train(False)
    np.testing.assert_allclose(first, module_pass(module, columns, lambda chunk: module.logprobs(chunk)[0]))
    assert not module.training


def test_reinforce_pp_gives_every_row_its_episodes_return_as_verl_agent_does(module):
    """``row_returns="episode"`` (notes/parity.md): rows of an episode share its undiscounted return (episode 1:
    -0.1 on all three rows), where the default credits each step with its discounted reward-to-go (0.9 * 1.0 on
    episode 0's first step, not 1.0)."""
    episode_rows = [1.0, 1.0, -0.1, -0.1, -0.1, 1.0]
    theirs, _ = run_learner_connector(
        tiny(ReinforcePlusPlusConfig, kl_reward_coeff=0.0, gamma=0.9, row_returns="episode"), module, two_groups())
    mask = theirs["response_mask"]
    expected, _ = reinforce_pp_advantages(np.array(episode_rows), np.zeros(mask.shape), mask, 0.0)
    np.testing.assert_allclose(theirs["advantages"], expected, rtol=1e-5, atol=1e-6)
    ours, _ = run_learner_connector(tiny(ReinforcePlusPlusConfig, kl_reward_coeff=0.0, gamma=0.9), module, two_groups())
    assert not np.allclose(ours["advantages"], theirs["advantages"])
    with pytest.raises(ValueError, match="row_returns must be one of"):
        tiny(ReinforcePlusPlusConfig, row_returns="episodes").validate()


#: A whole new algorithm, as notes/ARCHITECTURE.md's recipe writes one: its setting, its estimator and its
#: config, in one module that nothing else names.
NEW_ALGORITHM_MODULE = '''
from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig
from rllib_llm.algorithms.learner_connectors import register_estimator
from rllib_llm.algorithms.settings import Setting, declare, number
from rllib_llm.columns import EPISODE_INDEX, REWARDS

declare(__name__, Setting("return_scale", 1.0, "Advantages are the episode return times this.", number(0)))


def scaled_return(columns, config):
    returns = {}
    for episode, reward in zip(columns[EPISODE_INDEX], columns[REWARDS]):
        returns[episode] = returns.get(episode, 0.0) + reward
    return [config.return_scale * returns[e] for e in columns[EPISODE_INDEX]]


register_estimator("scaled_return", scaled_return)


class ScaledReturnConfig(LLMConfig):
    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or ScaledReturn)
        self.advantage_estimator = "scaled_return"


class ScaledReturn(LLMAlgorithm):
    config_class = ScaledReturnConfig
'''


def test_a_new_estimator_is_one_module(module, tmp_path, monkeypatch):
    """The recipe of notes/ARCHITECTURE.md ("Adding an estimator"): the module above, imported, gives a config
    whose builder takes the new setting, whose validation checks it, and whose learner pipeline uses the new
    estimator (episode returns 1.0 and -0.1, and 1.0 in group r-1, times 2)."""
    import importlib
    import inspect
    import sys

    from rllib_llm.algorithms import settings
    from rllib_llm.algorithms.learner_connectors import ADVANTAGE_ESTIMATORS, ESTIMATOR_NEEDS

    (tmp_path / "scaled_return_algo.py").write_text(NEW_ALGORITHM_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        new = importlib.import_module("scaled_return_algo")
        assert "return_scale" in inspect.signature(new.ScaledReturnConfig.training).parameters
        config = tiny(new.ScaledReturnConfig, return_scale=2.0)
        config.validate()
        batch, _ = run_learner_connector(config, module, two_groups())
        np.testing.assert_allclose(batch["advantages"], [2.0, 2.0, -0.2, -0.2, -0.2, 2.0], rtol=1e-6)
        with pytest.raises(ValueError, match=r"return_scale must be >= 0 \(a number\), got -1"):
            tiny(new.ScaledReturnConfig, return_scale=-1).validate()
    finally:
        sys.modules.pop("scaled_return_algo", None)
        settings.forget("scaled_return_algo")
        ADVANTAGE_ESTIMATORS.pop("scaled_return", None)
        ESTIMATOR_NEEDS.pop("scaled_return", None)
    assert "return_scale" not in inspect.signature(GiGPOConfig.training).parameters
