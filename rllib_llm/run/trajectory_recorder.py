"""``trajectories.jsonl``: a few of each training iteration's episodes, as text, through an RLlib callback.

:class:`TrajectoryRecorder` is an ``on_train_result`` callback (``config.callbacks(on_train_result=...)``,
registered by :func:`record_trajectories`): after every iteration it writes the first episode of each group
the update trained on (:attr:`LLMAlgorithm.training_episodes <rllib_llm.algorithms.algorithm.LLMAlgorithm>`,
dynamic sampling's kept groups included), up to ``per_iteration``, with prompts decoded. It holds a path,
not an open file, so the config that carries it pickles to Tune trials and remote workers; it writes on the
driver only (``on_train_result`` runs there). ``rllib-llm show-trajectory`` reads the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ray.rllib.utils import force_list

from rllib_llm.columns import GROUP_ID
from rllib_llm.run.progress import episode_records


def pick_episodes(episodes: list, count: int) -> list:
    """The first episode of each group, then the rest, up to ``count`` (groups differ more than siblings)."""
    picked, groups = [], set()
    for episode in episodes:
        group = episode.custom_data.get(GROUP_ID)
        if group not in groups:
            groups.add(group)
            picked.append(episode)
    return (picked + [e for e in episodes if e not in picked])[:count]


class TrajectoryRecorder:
    """The ``on_train_result`` callback that appends ``per_iteration`` episodes an iteration to ``path``."""

    def __init__(self, path: str | Path, per_iteration: int) -> None:
        self.path = Path(path)
        self.per_iteration = per_iteration
        self._tokenizer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokenizer": None}  # loaded again where it is used

    def __call__(self, *, algorithm: Any, result: dict | None = None, **kwargs: Any) -> None:
        episodes = pick_episodes(list(getattr(algorithm, "training_episodes", None) or []), self.per_iteration)
        if not episodes:
            return
        # The few-shot turns open every prompt: recorded so a reader does not take them for an earlier step.
        few_shot = {"few_shot": [list(turn) for turn in getattr(algorithm.config, "few_shot", None) or []]}
        decode = self._decoder(algorithm)
        with open(self.path, "a") as file:
            for episode in episodes:
                for record in episode_records(episode, int(algorithm.iteration), decode):  # per agent if multi-agent
                    file.write(json.dumps({**record, **few_shot}, default=str) + "\n")

    def _decoder(self, algorithm: Any):
        if self._tokenizer is None:
            module = getattr(getattr(algorithm, "env_runner", None), "module", None)
            if getattr(module, "tokenizer", None) is not None:
                self._tokenizer = module.tokenizer
            else:  # remote env runners only: load the tokenizer here
                from rllib_llm.core.models import load_tokenizer

                self._tokenizer = load_tokenizer(algorithm.config.llm_model)
        return lambda ids: self._tokenizer.decode(list(ids))


def record_trajectories(config: Any, path: str | Path, per_iteration: int) -> None:
    """Adds a :class:`TrajectoryRecorder` to ``config``'s ``on_train_result`` callbacks (after any it has)."""
    if per_iteration <= 0:
        return
    config.callbacks(on_train_result=[*force_list(config.callbacks_on_train_result), TrajectoryRecorder(path, per_iteration)])
