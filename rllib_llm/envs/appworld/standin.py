"""A small offline stand-in for AppWorld's environment server: the real protocol, a handful of toy tasks.

AppWorld itself (``appworld serve environment``) needs its own install, a data download and a separate Python
environment, so a user without them could not see the AppWorld env run at all. This stand-in speaks the same
HTTP API as :mod:`rllib_llm.envs.appworld.client` (POST ``/initialize``, ``/execute``, ``/task_completed``,
``/evaluate``, ``/close``, each answering ``{"output": ...}``) over a few simulated apps (a supervisor profile,
a music library, contacts, a to-do list) and :data:`TASKS` (questions answered through
``apis.supervisor.complete_task(answer=...)`` and state changes checked at evaluation). It is a stand-in, not
AppWorld: its tasks are few and easy, and its numbers say nothing about AppWorld's benchmark.

As AppWorld does, it runs the agent's code: each task's world lives in a child process (``python -m
rllib_llm.envs.appworld.standin worker``) with CPU-time and memory limits, builtins without ``open``,
``__import__``, ``eval`` or ``exec``, and a per-call timeout (a call that runs over it kills the world, which is
started again from the task's initial state; the output says so). That keeps a runaway loop or a
``while True: x += [0]`` from taking the trainer down; it is not a security sandbox, so run untrusted models
under an unprivileged user as with AppWorld.

    rllib-llm train tuned_examples/appworld_gigpo.py           # env_config={"server_url": "standin"}
    python -m rllib_llm.envs.appworld.standin serve --port 9000  # the stand-in as a server of its own
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The supervisor of every stand-in task (AppWorld's ``initialize`` returns one).
SUPERVISOR = {"first_name": "Joyce", "last_name": "Weaver", "email": "joyce.weaver@example.com",
              "phone_number": "5550100"}  # fmt: skip
#: The initial state of every task's world.
WORLD: dict[str, Any] = {
    "playlists": {"Road Trip": ["Hey Jude", "Africa", "Dreams"], "Focus": ["Clair de Lune", "Gymnopedie No.1"]},
    "contacts": {"Ana Lima": "5550111", "Ben Okafor": "5550122", "Chen Wei": "5550133"},
    "todos": ["pay rent", "call the dentist"],
}
#: task id -> instruction and what evaluation checks: ``answer`` (the string given to complete_task, compared
#: case-insensitively) or ``state`` (a test over the final world).
TASKS: dict[str, dict[str, Any]] = {
    "standin_first_name": {"instruction": "What is my first name?", "answer": "Joyce"},
    "standin_playlist_count": {"instruction": "How many songs are in my playlist 'Road Trip'?", "answer": "3"},
    "standin_ben_phone": {"instruction": "What is Ben Okafor's phone number?", "answer": "5550122"},
    "standin_count_contacts": {"instruction": "How many contacts do I have?", "answer": "3"},
    "standin_add_todo": {"instruction": "Add 'buy milk' to my to-do list.", "state": "todo_added"},
    "standin_remove_todo": {"instruction": "Remove 'pay rent' from my to-do list.", "state": "todo_removed"},
    "standin_add_song": {"instruction": "Add the song 'Yellow' to my playlist 'Focus'.", "state": "song_added"},
    "standin_longest_playlist": {"instruction": "Which of my playlists has the most songs?", "answer": "Road Trip"},
}
#: Seconds one /execute may run before its world is killed and started again.
EXECUTE_TIMEOUT_S = 10.0
#: Seconds a world's process may take to start (Python and this module's imports, on a busy machine).
START_TIMEOUT_S = 60.0
#: Limits of a world's process: CPU seconds in all, address space in bytes.
WORLD_CPU_S, WORLD_MEMORY_BYTES = 60, 1 << 30
#: Builtins the agent's code does not get.
BLOCKED_BUILTINS = ("open", "__import__", "eval", "exec", "compile", "input", "breakpoint", "exit", "quit", "help")


def state_checks(name: str, world: dict[str, Any]) -> list[tuple[str, bool]]:
    """The tests of a state task over the final ``world``: (test, passed) pairs, collateral damage included."""
    todos, playlists = world["todos"], world["playlists"]
    untouched_contacts = ("contacts unchanged", world["contacts"] == WORLD["contacts"])
    if name == "todo_added":
        return [("'buy milk' added", "buy milk" in todos),
                ("other to-dos kept", all(t in todos for t in WORLD["todos"])), untouched_contacts]  # fmt: skip
    if name == "todo_removed":
        return [("'pay rent' removed", "pay rent" not in todos),
                ("other to-dos kept", "call the dentist" in todos), untouched_contacts]  # fmt: skip
    if name == "song_added":
        return [("'Yellow' in Focus", "Yellow" in playlists.get("Focus", [])),
                ("Road Trip unchanged", playlists.get("Road Trip") == WORLD["playlists"]["Road Trip"])]  # fmt: skip
    raise ValueError(f"unknown state check {name!r}")


# --- one task's world (runs in the worker process) ---------------------------------------------------------


class _App:
    """An app's APIs as static-like methods over the world dict (``apis.todo.add_todo(text="x")``)."""

    def __init__(self, world: dict[str, Any]) -> None:
        self._world = world


class _Supervisor(_App):
    def show_profile(self) -> dict:
        return dict(SUPERVISOR)

    def complete_task(self, answer: Any = None) -> None:
        self._world["completed"] = True
        self._world["answer"] = None if answer is None else str(answer)


class _Music(_App):
    def show_playlists(self) -> list[str]:
        return list(self._world["playlists"])

    def show_playlist(self, name: str) -> dict:
        if name not in self._world["playlists"]:
            raise KeyError(f"no playlist named {name!r}")
        return {"name": name, "songs": list(self._world["playlists"][name])}

    def add_song_to_playlist(self, playlist: str, song: str) -> None:
        self.show_playlist(playlist)
        self._world["playlists"][playlist].append(str(song))


class _Contacts(_App):
    def search_contacts(self, query: str = "") -> list[dict]:
        return [{"name": n, "phone_number": p} for n, p in self._world["contacts"].items() if query.lower() in n.lower()]


class _Todo(_App):
    def show_todos(self) -> list[str]:
        return list(self._world["todos"])

    def add_todo(self, text: str) -> None:
        self._world["todos"].append(str(text))

    def remove_todo(self, text: str) -> None:
        if text not in self._world["todos"]:
            raise KeyError(f"no to-do {text!r}")
        self._world["todos"].remove(text)


class _ApiDocs(_App):
    def show_app_descriptions(self) -> dict:
        return {"supervisor": "your profile; complete_task(answer=None) ends the task",
                "music": "show_playlists(), show_playlist(name), add_song_to_playlist(playlist, song)",
                "contacts": "search_contacts(query='')", "todo": "show_todos(), add_todo(text), remove_todo(text)"}  # fmt: skip


class _Apis:
    def __init__(self, world: dict[str, Any]) -> None:
        self.supervisor, self.music, self.contacts = _Supervisor(world), _Music(world), _Contacts(world)
        self.todo, self.api_docs = _Todo(world), _ApiDocs(world)


class World:
    """One task's world: its state, the ``apis`` the agent's code calls, and the namespace its code shares
    between calls (variables persist, as in AppWorld's shell)."""

    def __init__(self, task_id: str) -> None:
        self.task_id, self.task = task_id, TASKS[task_id]
        self.state: dict[str, Any] = {**copy.deepcopy(WORLD), "completed": False, "answer": None}
        builtins = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
        safe = {k: v for k, v in builtins.items() if k not in BLOCKED_BUILTINS}
        self.namespace: dict[str, Any] = {"__builtins__": safe, "apis": _Apis(self.state)}

    def execute(self, code: str) -> str:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, "<agent>", "exec"), self.namespace)  # noqa: S102 - AppWorld runs the agent's code
        except Exception as e:  # noqa: BLE001 - AppWorld reports any failure as text
            return f"{out.getvalue()}Execution failed. Traceback:\n{type(e).__name__}: {e}"
        return out.getvalue()

    def evaluate(self) -> dict[str, Any]:
        task = self.task
        if "answer" in task:
            given = (self.state["answer"] or "").strip().strip("'\".").lower()
            tests = [("answer", given == task["answer"].lower())]
        else:
            tests = state_checks(task["state"], self.state)
        passes = [name for name, ok in tests if ok]
        failures = [name for name, ok in tests if not ok]
        return {"success": not failures, "difficulty": 1, "num_tests": len(tests), "passes": passes,
                "failures": failures}  # fmt: skip


def worker_main() -> None:
    """The world's process: JSON lines in (``{"op": "init"|"execute"|"completed"|"evaluate", ...}``), one JSON
    line out per request (``{"output": ...}``)."""
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (WORLD_CPU_S, WORLD_CPU_S))
    resource.setrlimit(resource.RLIMIT_AS, (WORLD_MEMORY_BYTES, WORLD_MEMORY_BYTES))
    world: World | None = None
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "init":
            world, output = World(request["task_id"]), None
        elif world is None:
            output = None
        elif op == "execute":
            output = world.execute(request["code"])
        elif op == "completed":
            output = bool(world.state["completed"])
        else:
            output = world.evaluate()
        sys.stdout.write(json.dumps({"output": output}) + "\n")
        sys.stdout.flush()


# --- the server (runs the worlds as child processes) -------------------------------------------------------


class WorldProcess:
    """A task's world in a child process, restarted from the initial state when a call times out or dies."""

    def __init__(self, task_id: str, timeout_s: float = EXECUTE_TIMEOUT_S) -> None:
        self.task_id, self.timeout_s = task_id, timeout_s
        self.process: subprocess.Popen | None = None
        self._start()

    def _start(self) -> None:
        self.close()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rllib_llm.envs.appworld.standin", "worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
        )  # fmt: skip
        try:
            self.request({"op": "init", "task_id": self.task_id}, START_TIMEOUT_S, restart=False)
        except TimeoutError as e:
            self.close()
            raise RuntimeError(f"the world's process did not start within {START_TIMEOUT_S:g} s") from e

    def request(self, message: dict[str, Any], timeout_s: float | None = None, restart: bool = True) -> Any:
        """The world's answer to ``message``; past ``timeout_s`` (default the world's) a :class:`TimeoutError`,
        the world started again first when ``restart``."""
        assert self.process is not None and self.process.stdin is not None and self.process.stdout is not None
        answer: list[str] = []
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        reader = threading.Thread(target=lambda: answer.append(self.process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(self.timeout_s if timeout_s is None else timeout_s)
        if not answer or not answer[0]:
            if restart:
                self._start()
            raise TimeoutError(f"the code ran over {self.timeout_s:g} s or exhausted the world's limits")
        return json.loads(answer[0])["output"]

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


class StandInServer:
    """AppWorld's environment-server API over :data:`TASKS`, one active world at a time (as AppWorld's server),
    on ``host:port`` (port 0: a free one) in a background thread. A context manager; ``url`` is its address."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, timeout_s: float = EXECUTE_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.world: WorldProcess | None = None
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = min(int(self.headers.get("Content-Length") or 0), 1 << 20)
                try:
                    status, payload = outer.handle(self.path.strip("/"), json.loads(self.rfile.read(length) or b"{}"))
                except (ValueError, TypeError, AttributeError) as e:
                    status, payload = 422, {"detail": f"bad request: {e}"}
                except (RuntimeError, OSError) as e:  # a world that would not start: say why, not a dropped line
                    status, payload = 500, {"detail": f"stand-in error: {e}"}
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # no access log on stderr
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def handle(self, method: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) of one API call."""
        with self._lock:
            task_id = str(request.get("task_id", ""))
            if method == "initialize":
                if task_id not in TASKS:
                    return 422, {"detail": f"unknown task {task_id!r}; the stand-in has {', '.join(TASKS)}"}
                if self.world is not None:
                    self.world.close()
                self.world = WorldProcess(task_id, self.timeout_s)
                return 200, {"output": {"task_id": task_id, "instruction": TASKS[task_id]["instruction"],
                                        "supervisor": dict(SUPERVISOR), "datetime": "2023-05-18T12:00:00"}}  # fmt: skip
            if method not in ("execute", "task_completed", "evaluate", "close"):
                return 404, {"detail": f"no endpoint /{method}"}
            if self.world is None or task_id != self.world.task_id:
                return 500, {"detail": "AppWorld has not been initialized."}
            if method == "close":
                self.world.close()
                self.world = None
                return 200, {"output": None}
            op = {"execute": "execute", "task_completed": "completed", "evaluate": "evaluate"}[method]
            try:
                return 200, {"output": self.world.request({"op": op, "code": str(request.get("code", ""))})}
            except TimeoutError as e:
                return 200, {"output": f"Execution failed. Traceback:\nTimeoutError: {e}; the task's world was "
                                       "started again from its initial state."}  # fmt: skip

    def start(self) -> StandInServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        with self._lock:
            if self.world is not None:
                self.world.close()
                self.world = None

    def __enter__(self) -> StandInServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rllib_llm.envs.appworld.standin", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the stand-in on host:port until Ctrl-C")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=9000)
    sub.add_parser("worker", help="(internal) one task's world, JSON lines on stdin/stdout")
    args = parser.parse_args(argv)
    if args.command == "worker":
        worker_main()
        return
    server = StandInServer(args.host, args.port)
    print(f"AppWorld stand-in serving {len(TASKS)} tasks at {server.url} (Ctrl-C stops it)", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()


if __name__ == "__main__":
    main()
