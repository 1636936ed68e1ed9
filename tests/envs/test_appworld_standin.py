"""The offline AppWorld stand-in: AppWorld's server protocol over toy tasks, the agent's code in a limited child
process, and the env's ``server_url="standin"`` mode."""

from __future__ import annotations

import pytest

from rllib_llm.envs import make_env
from rllib_llm.envs.appworld import AppWorldClient
from rllib_llm.envs.appworld.standin import TASKS, StandInServer, World


def test_every_task_is_solvable_by_code_and_evaluation_fails_a_wrong_or_destructive_solution():
    solutions = {
        "standin_first_name": "apis.supervisor.complete_task(answer=apis.supervisor.show_profile()['first_name'])",
        "standin_playlist_count": "apis.supervisor.complete_task(answer=len(apis.music.show_playlist('Road Trip')['songs']))",
        "standin_ben_phone": "apis.supervisor.complete_task(answer=apis.contacts.search_contacts('Ben')[0]['phone_number'])",
        "standin_count_contacts": "apis.supervisor.complete_task(answer=len(apis.contacts.search_contacts()))",
        "standin_add_todo": "apis.todo.add_todo('buy milk'); apis.supervisor.complete_task()",
        "standin_remove_todo": "apis.todo.remove_todo('pay rent'); apis.supervisor.complete_task()",
        "standin_add_song": "apis.music.add_song_to_playlist('Focus', 'Yellow'); apis.supervisor.complete_task()",
        "standin_longest_playlist": "p = apis.music.show_playlists()\n"
        "apis.supervisor.complete_task(answer=max(p, key=lambda n: len(apis.music.show_playlist(n)['songs'])))",
    }
    assert set(solutions) == set(TASKS)
    for task_id, code in solutions.items():
        world = World(task_id)
        assert world.execute(code) == ""
        assert world.state["completed"] and world.evaluate()["success"], task_id
    wrong = World("standin_ben_phone")
    wrong.execute("apis.supervisor.complete_task(answer='5550111')")
    assert wrong.evaluate() == {"success": False, "difficulty": 1, "num_tests": 1, "passes": [], "failures": ["answer"]}
    greedy = World("standin_remove_todo")  # removes the right to-do, and every other one
    greedy.execute("for t in apis.todo.show_todos(): apis.todo.remove_todo(t)")
    result = greedy.evaluate()
    assert not result["success"] and result["failures"] == ["other to-dos kept"]


def test_code_errors_are_observations_and_blocked_builtins_are_missing():
    world = World("standin_first_name")
    assert world.execute("x = 2\nprint(x * 21)") == "42\n"
    assert world.execute("print(x + 41)") == "43\n"  # the namespace persists between calls
    assert "KeyError" in world.execute("apis.music.show_playlist('Nope')")
    for blocked in ("open('/etc/passwd')", "__import__('os')", "eval('1')", "exec('1')", "import os"):
        out = world.execute(blocked)
        assert "NameError" in out or "ImportError" in out, (blocked, out)


def test_the_server_speaks_appworlds_protocol_through_the_real_client_and_survives_a_runaway_call():
    with StandInServer(timeout_s=2.0) as server:
        client = AppWorldClient(server.url, timeout=30.0, retries=0)
        task = client.initialize("standin_playlist_count", experiment_name="x")
        assert task["instruction"] == TASKS["standin_playlist_count"]["instruction"]
        assert task["supervisor"]["first_name"] == "Joyce"
        assert client.execute("standin_playlist_count", "print(apis.music.show_playlists())") == "['Road Trip', 'Focus']\n"
        assert client.task_completed("standin_playlist_count") is False
        out = client.execute("standin_playlist_count", "while True: pass")  # killed, the world starts again
        assert out.startswith("Execution failed") and "started again" in out
        client.execute("standin_playlist_count", "apis.supervisor.complete_task(answer=3)")
        assert client.task_completed("standin_playlist_count") is True
        assert client.evaluate("standin_playlist_count")["success"] is True
        client.close("standin_playlist_count")
        from rllib_llm.envs.http_client import ServerRequestError, ServerUnavailableError

        with pytest.raises(ServerRequestError, match="unknown task"):
            client.initialize("nope")
        with pytest.raises(ServerUnavailableError, match="HTTP Error 500"):  # AppWorld's own answer: a 500
            client.execute("standin_first_name", "print(1)")


def test_the_env_runs_offline_against_its_own_stand_in():
    env = make_env("AppWorld", {"server_url": "standin", "max_steps": 3})
    try:
        obs, info = env.reset(seed=0)
        assert env.task_id in TASKS and "No code has been run yet" in obs
        # the task reaches the prompt once, through the template's task slot (the observation does not repeat it)
        from rllib_llm.env_connectors.prompts import fill_template
        from rllib_llm.env_connectors.templates import get_template

        slots = {**info["prompt_slots"], "task_description": env.task_description, "current_step": 1,
                 "current_observation": obs, "step_count": 0, "history_length": 0, "action_history": ""}
        prompt = fill_template(get_template("AppWorld").no_history, **slots)
        assert env.task_description and prompt.count(env.task_description) == 1
        assert info["anchor_obs"] == f"{env.task_id}\n{obs}"  # two tasks' first states are not one anchor
        assert info["prompt_slots"]["supervisor_name"] == "Joyce Weaver"
        env.reset(seed=0, options={"task_id": "standin_first_name"})
        obs, reward, terminated, truncated, info = env.step("print(apis.supervisor.show_profile())")
        assert "Joyce" in obs and reward == 0.0 and not terminated
        obs, reward, terminated, truncated, info = env.step("apis.supervisor.complete_task(answer='Joyce')")
        assert (reward, terminated, info["won"], info["pass_fraction"]) == (1.0, True, True, 1.0)
        url = env.standin.url
    finally:
        env.close()
    assert env.standin is None
    with pytest.raises(Exception):  # noqa: B017 - the stand-in is gone with its env
        AppWorldClient(url, timeout=2.0, retries=0).initialize("standin_first_name")
