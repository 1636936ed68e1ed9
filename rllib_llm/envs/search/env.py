"""Search (tool calling, after Search-R1): answer a question, calling a search engine as often as needed.

The env reads the whole response (``action_format = "raw"``): the first ``<search>query</search>`` or
``<answer>text</answer>`` tag in it is the action (as Search-R1 does). A search returns the top passages as
``<information>Doc 1(Title: ...) ...</information>``; an answer ends the episode with reward = exact match
(SQuAD normalisation) and ``info["f1"]``. A response with neither tag, an empty query or ``None`` is invalid.

The retriever is in-process (``"bm25"``, the default, or any object with ``retrieve(queries, topk)``) or a
server URL (``"http://127.0.0.1:8000"``, see :func:`~rllib_llm.envs.search.server.serve_retriever`).
Questions come from the shipped fixture (``question_type`` "single", "multi" or "all", chosen by the seed) or
per episode from ``reset(options={"question": ..., "answers": [...]})``, as verl-agent passes dataset rows. A
fifth of the fixture's questions (``held_out_fraction``) is kept for held-out seeds (``held_out_seeds_from``,
the config's ``evaluation_seed_offset``): evaluation asks questions that training never asked.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from rllib_llm.envs.base import HELD_OUT_SEED_OFFSET, HeldOutSplit, TextEnv
from rllib_llm.envs.search.client import RetrieverClient
from rllib_llm.envs.search.retrievers import BM25Retriever, Retriever, load_questions
from rllib_llm.envs.search.scoring import exact_match, f1_score

_TAG = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
INVALID_FEEDBACK = (
    "My previous action is invalid. If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again."
)


def make_retriever(retriever: str | Retriever | None) -> Retriever:
    if retriever is None or retriever == "bm25":
        return BM25Retriever()
    if isinstance(retriever, str):
        if retriever.startswith(("http://", "https://")):
            return RetrieverClient(retriever)
        raise ValueError(f"retriever must be 'bm25', a server URL or a Retriever object, got {retriever!r}")
    return retriever


class SearchEnv(TextEnv):
    action_format: ClassVar[str] = "raw"
    prompt_template: ClassVar[str] = (
        "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
        "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
        "by <search> query </search> and it will return the top searched results between <information> and "
        "</information>. You can search as many times as you want. If you find no further external knowledge "
        "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
        "illustrations. For example, <answer> Beijing </answer>.\nQuestion: {task_description}\n{memory}"
        "Current observation (turn {current_step} of {max_turns}):\n{current_observation}"
    )

    def __init__(
        self,
        retriever: str | Retriever | None = "bm25",
        topk: int = 3,
        max_turns: int = 4,
        question_type: str = "all",
        questions_path: str | None = None,
        held_out_fraction: float = 0.2,
        held_out_seeds_from: int = HELD_OUT_SEED_OFFSET,
    ) -> None:
        super().__init__()
        if question_type not in ("all", "single", "multi"):
            raise ValueError(f"question_type must be 'all', 'single' or 'multi', got {question_type!r}")
        self.retriever = make_retriever(retriever)
        self.topk, self.max_turns = topk, max_turns
        self.questions = [q for q in load_questions(questions_path) if question_type in ("all", q.get("type"))]
        self.split = HeldOutSplit([q["id"] for q in self.questions], held_out_fraction, held_out_seeds_from)
        self.question: str = ""
        self.answers: list[str] = []
        self.question_id: str = ""
        self.turns = 0
        self.queries: list[str] = []

    def _info(self, valid: bool, obs: str, **extra: Any) -> dict[str, Any]:
        return {
            "is_action_valid": valid,
            "won": extra.pop("won", False),
            "anchor_obs": (self.question, obs),
            "prompt_slots": {"max_turns": self.max_turns},
            "question_id": self.question_id,
            **extra,
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        options = options or {}
        if "question" in options:
            self.question, self.answers = options["question"], list(options.get("answers") or [])
            self.question_id = str(options.get("id", ""))
        else:
            if "question_id" in options:
                row = next(q for q in self.questions if q["id"] == options["question_id"])
            else:
                row = self.questions[self.split.index(seed, self.np_random)]
            self.question, self.answers, self.question_id = row["question"], list(row["answers"]), row["id"]
        self.turns, self.queries = 0, []
        self.task_description = self.question
        obs = f"Question: {self.question}"
        return obs, self._info(True, obs)

    def search(self, query: str) -> str:
        """The ``<information>`` block for ``query`` (Search-R1's passage format)."""
        hits = self.retriever.retrieve([query], self.topk)[0]
        docs = "\n".join(f"Doc {i + 1}(Title: {h['title']}) {h['text']}" for i, h in enumerate(hits))
        return f"<information>{docs or 'No results.'}</information>"

    def step(self, action: str | None) -> tuple[str, float, bool, bool, dict]:
        if not self.question:
            raise RuntimeError("Call reset() before step()")
        self.turns += 1
        match = _TAG.search(action) if isinstance(action, str) else None
        kind, content = (match.group(1), match.group(2).strip()) if match else ("", "")
        truncated = self.turns >= self.max_turns
        if kind == "answer":
            em, f1 = exact_match(content, self.answers), f1_score(content, self.answers)
            obs = f"Your answer: {content}"
            return obs, em, True, False, self._info(True, obs, won=em == 1.0, em=em, f1=f1, answer=content)
        if kind == "search" and content:
            self.queries.append(content)
            obs = self.search(content)
            return obs, 0.0, False, truncated, self._info(True, obs, query=content)
        obs = INVALID_FEEDBACK
        return obs, 0.0, False, truncated, self._info(False, obs)

    def render(self) -> str:
        return f"Q: {self.question} | searches: {self.queries}"
