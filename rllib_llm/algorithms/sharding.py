"""Splitting a rollout between several Learners without splitting a group.

Group-relative advantages (GRPO, GiGPO, RLOO...) are computed by each Learner's connector over the episodes it
receives, so every Learner must get whole groups of whole episodes. RLlib's own sharding
(``ShardEpisodesIterator``) balances env steps by sorting episodes by length and slicing them, which would
compute baselines over partial groups and returns over partial episodes. :func:`group_shards` assigns whole
groups instead (largest first, each to the shard with the fewest steps so far), and :func:`learner_update_data`
hands the shards to ``LearnerGroup.update`` as one object-store reference per Learner, which RLlib passes on
unsplit, with the minibatch count every Learner must run (DDP needs the same number of steps everywhere).
"""

from __future__ import annotations

from typing import Any

from rllib_llm.algorithms.dynamic_sampling import group_episodes


class NotEnoughGroupsError(ValueError):
    """Fewer groups than Learners in one update (a Learner would get nothing to train on)."""


def _parts(episode: Any) -> list:
    """The single-agent episodes a Learner trains on: the episode itself, or each agent's of a multi-agent one."""
    agents = getattr(episode, "agent_episodes", None)
    return list(agents.values()) if agents is not None else [episode]


def episode_steps(episode: Any) -> int:
    """Env steps of a single-agent episode; agent steps of a multi-agent one (what the Learner trains on)."""
    return sum(len(part) for part in _parts(episode))


def group_shards(episodes: list, num_shards: int) -> list[list]:
    """``num_shards`` lists of episodes, each a set of whole groups, balanced by steps; a ValueError when
    there are fewer groups than shards (a Learner would get nothing to train on)."""
    groups = group_episodes(episodes)
    if len(groups) < num_shards:
        raise NotEnoughGroupsError(
            f"{len(groups)} group(s) for {num_shards} Learners: every Learner needs whole groups, so play at least "
            f"as many groups per iteration as there are Learners (num_groups x num_env_runners)"
        )
    shards: list[list] = [[] for _ in range(num_shards)]
    steps = [0] * num_shards
    sized = sorted(((sum(map(episode_steps, g)), g) for g in groups), key=lambda pair: -pair[0])
    for group_steps, group in sized:
        target = steps.index(min(steps))
        shards[target].extend(group)
        steps[target] += group_steps
    return shards


def learner_update_data(episodes: list, num_learners: int, minibatch_size: int | None, num_epochs: int) -> dict:
    """Keyword arguments for ``LearnerGroup.update``: ``episodes`` as they are for one (local or remote)
    Learner; for several, one ``episodes_refs`` entry per Learner holding whole groups, and
    ``num_total_minibatches`` as RLlib computes it for its own episode sharding."""
    if num_learners <= 1:
        return {"episodes": episodes}
    import ray

    shards = group_shards(episodes, num_learners)
    data: dict[str, Any] = {"episodes_refs": [ray.put(shard) for shard in shards]}
    if minibatch_size:
        steps = max_module_steps(episodes)
        data["num_total_minibatches"] = max(1, int(num_epochs * steps / (num_learners * minibatch_size)))
    return data


def max_module_steps(episodes: list) -> int:
    """The most steps any one module trains on (all steps for single-agent episodes): RLlib's basis for the
    number of minibatches (``TrainingData._compute_num_total_minibatches``)."""
    per_module: dict[Any, int] = {}
    for episode in episodes:
        for part in _parts(episode):
            module_id = getattr(part, "module_id", None)
            per_module[module_id] = per_module.get(module_id, 0) + len(part)
    return max(per_module.values(), default=0)
