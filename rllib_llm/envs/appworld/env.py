"""AppWorld (experimental): code-as-action tasks over simulated apps, through AppWorld's environment server.

The agent's action is Python code (inside ``<action>``; a ```` ```python ```` fence is stripped). The server
runs it in the task's world (with ``apis`` for the apps) and the printed output is the next observation.
Code that does not parse is an invalid no-op (not sent). The episode ends when the agent calls
``apis.supervisor.complete_task(...)`` (the server's ``task_completed``) or after ``max_steps``; the server then
evaluates the task: reward 1 and ``won`` on success, with ``info["pass_fraction"]`` of its tests passed.

Setup (separate environment, as AppWorld pins its own dependencies): ``pip install appworld``,
``appworld install``, ``appworld download data``, ``appworld serve environment --port 9000``. Task ids come from
``task_ids=[...]`` or, with the appworld package installed here, from ``split`` ("train", "dev",
"test_normal", "test_challenge") via ``appworld.task.load_task_ids``.

Offline, ``server_url="standin"`` starts a small stand-in of that server for this env
(:mod:`rllib_llm.envs.appworld.standin`: the same protocol, a handful of toy tasks, not AppWorld's benchmark).
"""

from __future__ import annotations

import ast
import re
from typing import Any, ClassVar

from rllib_llm.envs.appworld.client import AppWorldClient
from rllib_llm.envs.base import TextEnv

#: ``server_url`` that starts :class:`~rllib_llm.envs.appworld.standin.StandInServer` for the env.
STANDIN = "standin"
_FENCE = re.compile(r"^\s*```(?:python|py)?\s*\n(.*?)\n?```\s*$", re.DOTALL)


def extract_code(action: Any) -> str | None:
    """The code of an action (fence stripped), or None if it is empty or not valid Python."""
    if not isinstance(action, str):
        return None
    match = _FENCE.match(action)
    code = (match.group(1) if match else action).strip()
    if not code:
        return None
    try:
        ast.parse(code)
    except SyntaxError:
        return None
    return code


def load_split_task_ids(split: str) -> list[str]:
    try:
        from appworld.task import load_task_ids
    except ImportError as e:
        raise ImportError(f"Pass task_ids=[...] or install appworld to load split {split!r} ({e})") from e
    return list(load_task_ids(split))


class AppWorldEnv(TextEnv):
    max_text_length: ClassVar[int] = 32768
    prompt_template: ClassVar[str] = (
        "I am your supervisor and you are an AI assistant whose job is to complete my day-to-day tasks fully "
        "autonomously. To do this, you write Python code that the environment executes; use the `apis` object "
        "to call the apps' APIs (e.g. apis.api_docs.show_app_descriptions()) and print what you need to see. "
        "My name is {supervisor_name}, email {supervisor_email}, phone {supervisor_phone}. When the task is "
        "done, call apis.supervisor.complete_task() (with answer=... if the task asks a question).\n"
        "Task: {task_description}\n{memory}Current observation (step {current_step}):\n{current_observation}\n"
        "Write the code for the next step inside <action> </action> tags."
    )

    def __init__(
        self,
        server_url: str = "http://127.0.0.1:9000",
        task_ids: list[str] | None = None,
        split: str = "train",
        experiment_name: str = "rllib_llm",
        max_steps: int = 30,
        max_output_chars: int = 6000,
        init_kwargs: dict[str, Any] | None = None,
        timeout: float = 120.0,
    ) -> None:
        super().__init__()
        self.standin = None
        if server_url == STANDIN:  # one stand-in per env, as AppWorld serves one task world at a time
            from rllib_llm.envs.appworld.standin import TASKS, StandInServer

            self.standin = StandInServer().start()
            server_url, task_ids = self.standin.url, list(task_ids or TASKS)
        self.client = AppWorldClient(server_url, timeout=timeout)
        self.task_ids = list(task_ids) if task_ids else load_split_task_ids(split)
        if not self.task_ids:
            raise ValueError("AppWorldEnv needs at least one task id")
        self.experiment_name = experiment_name
        self.max_steps, self.max_output_chars = max_steps, max_output_chars
        self.init_kwargs = dict(init_kwargs or {})
        self.task_id = ""
        self.task: dict[str, Any] = {}
        self.obs = ""
        self.steps = 0
        self.finished = False

    def _slots(self) -> dict[str, Any]:
        sup = self.task.get("supervisor") or {}
        return {
            "supervisor_name": f"{sup.get('first_name', '')} {sup.get('last_name', '')}".strip(),
            "supervisor_email": sup.get("email", ""),
            "supervisor_phone": sup.get("phone_number", ""),
            "datetime": str(self.task.get("datetime", "")),
        }

    def _info(self, valid: bool, won: bool = False, **extra: Any) -> dict[str, Any]:
        return {
            "is_action_valid": valid,
            "won": won,
            "anchor_obs": f"{self.task_id}\n{self.obs}",  # GiGPO's state: the task and what the last code printed
            "prompt_slots": self._slots(),
            "task_id": self.task_id,
            **extra,
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Initializes ``options["task_id"]`` or a task drawn from the seed on the server."""
        super().reset(seed=seed)
        options = options or {}
        if self.task_id and not self.finished:
            self.client.close(self.task_id)
        self.task_id = str(options.get("task_id") or self.task_ids[int(self.np_random.integers(len(self.task_ids)))])
        self.task = self.client.initialize(self.task_id, experiment_name=self.experiment_name, **self.init_kwargs)
        self.task_description = self.task.get("instruction", "")
        # The task reaches the prompt through ``task_description`` (both templates print it): not repeated here.
        self.obs = "No code has been run yet."
        self.steps, self.finished = 0, False
        return self.obs, self._info(True)

    def _truncate(self, text: str) -> str:
        if len(text) <= self.max_output_chars:
            return text
        half = self.max_output_chars // 2
        return f"{text[:half]}\n...[{len(text) - self.max_output_chars} characters cut]...\n{text[-half:]}"

    def step(self, action: str | None) -> tuple[str, float, bool, bool, dict]:
        if not self.task_id or self.finished:
            raise RuntimeError("Call reset() before step()")
        self.steps += 1
        code = extract_code(action)
        if code is not None:
            self.obs = self._truncate(self.client.execute(self.task_id, code)) or "(no output)"
        completed = code is not None and self.client.task_completed(self.task_id)
        truncated = not completed and self.steps >= self.max_steps
        if not (completed or truncated):
            return self.obs, 0.0, False, False, self._info(code is not None)
        result = self.client.evaluate(self.task_id)
        self.client.close(self.task_id)
        self.finished = True
        success = bool(result.get("success"))
        num_tests = int(result.get("num_tests") or 0)
        passes = len(result.get("passes") or [])
        info = self._info(
            code is not None, won=success, pass_fraction=passes / num_tests if num_tests else 0.0, evaluation=result
        )
        return self.obs, float(success), completed, truncated, info

    def close(self) -> None:
        try:
            if self.task_id and not self.finished:
                try:
                    self.client.close(self.task_id)
                finally:
                    self.finished = True
        finally:
            if self.standin is not None:
                self.standin.stop()
                self.standin = None
        super().close()
