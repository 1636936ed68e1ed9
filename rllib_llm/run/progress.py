"""What training reports: the per-iteration progress table the CLI prints, the JSON lines it writes next
to checkpoints (progress rows, sampled trajectories) and the flat metric names trackers get."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rllib_llm.metrics import (
    AGENT_PREFIX,
    ENTROPY,
    ENV_RUNNERS,
    EPISODE_RETURN_MEAN,
    KL,
    LEARNERS,
    PROMPT_LENGTH_MEAN,
    RESPONSE_LENGTH_MEAN,
    SUCCESS_RATE,
    TOKENS_PER_S,
    UNINFORMATIVE_GROUP_FRACTION,
    VALID_ACTION_RATE,
)

#: A module-id wildcard in a column path: the mean over the Learner's modules (``__all_modules__`` left out),
#: so ``kl`` is ``default_policy``'s in single-agent runs and the modules' mean in multi-agent ones.
EACH_MODULE = "*"
ALL_MODULES = "__all_modules__"
#: (column title, path into an RLlib result dict, format)
Column = tuple[str, tuple[str, ...], str]
COLUMNS: list[Column] = [
    ("iter", ("training_iteration",), "{:>4.0f}"),
    ("success", (ENV_RUNNERS, SUCCESS_RATE), "{:>7.2f}"),
    ("valid", (ENV_RUNNERS, VALID_ACTION_RATE), "{:>5.2f}"),
    ("return", (ENV_RUNNERS, EPISODE_RETURN_MEAN), "{:>6.2f}"),
    ("resp_len", (ENV_RUNNERS, RESPONSE_LENGTH_MEAN), "{:>8.1f}"),
    ("prompt_len", (ENV_RUNNERS, PROMPT_LENGTH_MEAN), "{:>10.1f}"),
    ("kl", (LEARNERS, EACH_MODULE, KL), "{:>7.4f}"),
    ("entropy", (LEARNERS, EACH_MODULE, ENTROPY), "{:>7.3f}"),
    # Groups whose advantages were all 0 (every episode alike): near 1, the policy has stopped exploring.
    ("no_signal", (LEARNERS, UNINFORMATIVE_GROUP_FRACTION), "{:>9.2f}"),
    ("tok/s", (ENV_RUNNERS, TOKENS_PER_S), "{:>6.1f}"),
    ("time_s", ("time_this_iter_s",), "{:>6.1f}"),
]
#: Per-agent columns of a multi-agent run, one set per ``env_runners/agent_<id>`` dict the env runner reports.
#: Asynchronous rollouts add these (the trained groups' version lag, groups dropped as too stale).
ASYNC_COLUMNS: list[Column] = [
    ("stale", ("async_rollouts", "staleness_mean"), "{:>5.2f}"),
    ("dropped", ("async_rollouts", "groups_dropped"), "{:>7.0f}"),
]

AGENT_COLUMNS: list[tuple[str, str]] = [
    ("success", SUCCESS_RATE),
    ("valid", VALID_ACTION_RATE),
    ("return", EPISODE_RETURN_MEAN),
]


def lookup(result: dict[str, Any], path: tuple[str, ...]) -> float:
    value: Any = result
    for depth, key in enumerate(path):
        if key == EACH_MODULE and isinstance(value, dict):
            found = [lookup(inner, path[depth + 1 :]) for name, inner in value.items() if name != ALL_MODULES]
            found = [v for v in found if not math.isnan(v)]
            return sum(found) / len(found) if found else math.nan
        if not isinstance(value, dict) or key not in value:
            return math.nan
        value = value[key]
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


#: Short header labels of the per-agent columns (the row keys keep the full names).
SHORT_SUFFIX = {"success": "succ", "return": "ret"}


def header_label(title: str) -> str:
    """A column's printed header: per-agent titles shortened (``player_1:success`` -> ``p1:succ``) so a
    two-agent table stays near 125 characters; other titles as they are."""
    if ":" not in title:
        return title
    agent, suffix = title.rsplit(":", 1)
    name, _, number = agent.rpartition("_")
    if name and number.isdigit():
        agent = name[0] + number
    return f"{agent}:{SHORT_SUFFIX.get(suffix, suffix)}"


def table_columns(result: dict[str, Any]) -> list[Column]:
    """:data:`COLUMNS` (with :data:`ASYNC_COLUMNS` before the timings in an asynchronous run), then
    ``<agent>:success``/``:valid``/``:return`` for each agent in the result's ``env_runners`` (multi-agent
    runs; agents in id order). Widths fit the printed label."""
    columns = list(COLUMNS)
    if "async_rollouts" in result:
        columns[-2:-2] = ASYNC_COLUMNS
    runners = result.get(ENV_RUNNERS) or {}
    for key in sorted(k for k, v in runners.items() if isinstance(v, dict) and str(k).startswith(AGENT_PREFIX)):
        agent = str(key)[len(AGENT_PREFIX) :]
        for suffix, metric in AGENT_COLUMNS:
            title = f"{agent}:{suffix}"
            columns.append((title, (ENV_RUNNERS, key, metric), f"{{:>{max(5, len(header_label(title)))}.2f}}"))
    return columns


def printed_columns(columns: list[Column]) -> list[Column]:
    """The columns the table prints: with per-agent columns, the all-agent success/valid/return are left out
    (the per-agent ones say more, and a two-agent table would be ~190 characters wide); rows keep them all."""
    if not any(":" in title for title, _, _ in columns):
        return columns
    aggregate = {title for _, metric in AGENT_COLUMNS for title, path, _ in COLUMNS if path == (ENV_RUNNERS, metric)}
    return [column for column in columns if column[0] not in aggregate]


def row_values(result: dict[str, Any], columns: list[Column] | None = None) -> dict[str, float]:
    """The row of one result: ``columns`` (default: all of :func:`table_columns`) by title."""
    return {title: lookup(result, path) for title, path, _ in (columns or table_columns(result))}


def header(columns: list[Column] = COLUMNS) -> str:
    widths = [len(fmt.format(0.0)) for _, _, fmt in columns]
    return "  ".join(header_label(title).rjust(w) for (title, _, _), w in zip(columns, widths, strict=True))


def format_row(values: dict[str, float], columns: list[Column] = COLUMNS) -> str:
    """The table cells of ``columns``; a value missing from ``values`` or NaN prints as ``-``."""
    cells = []
    for title, _, fmt in columns:
        value = values.get(title, math.nan)
        width = len(fmt.format(0.0))
        cells.append("-".rjust(width) if math.isnan(value) else fmt.format(value))
    return "  ".join(cells)


def flatten_metrics(result: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every finite number of an RLlib result as ``"env_runners/success_rate"``-style keys (Tune's names),
    for trackers; the config echo (``config/...``) and non-numbers are left out."""
    flat: dict[str, float] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            if name != "config":
                flat.update(flatten_metrics(value, f"{name}/"))
        elif not isinstance(value, (bool, str)):
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            if math.isfinite(number):
                flat[name] = number
    return flat


def progress_row(values: dict[str, float], metrics: dict[str, float], wall_time: float) -> dict[str, float | None]:
    """One line of ``progress.jsonl``: the table's cells by their titles (``values``: :func:`row_values`, every
    column of the result, also agents the printed table has none for), then every scalar metric of the
    iteration under Tune's names (``metrics``: :func:`flatten_metrics`, ``learners/default_policy/policy_loss``,
    ``env_runners/weight_sync_s``, ...), so what reaches a tracker is also in the run folder. NaN (a metric
    with no data this iteration, e.g. an agent that never acted) is written as null: strict JSON."""
    cells = {k: None if math.isnan(v) else v for k, v in values.items()}
    return {**cells, **metrics, "wall_time": wall_time}


# --- sampled trajectories (trajectories.jsonl) ------------------------------------------------------


def episode_record(episode: Any, iteration: int, render_prompt: Callable[[Any], str] | None = None) -> dict[str, Any]:
    """One sampled episode as a JSON-able dict: per step the prompt (as ``render_prompt`` turns the
    recorded prompt into text: token ids decoded, or chat messages joined), the response, the parsed
    action, the reward. What ``rllib-llm show-trajectory`` prints."""
    from rllib_llm.columns import GROUP_ID, PROMPT, RESPONSE_TEXT, SEED, VALID
    from rllib_llm.env_connectors.memory import observation_text
    from rllib_llm.metrics import episode_success

    observations = episode.get_observations()
    actions, rewards = episode.get_actions(), episode.get_rewards()

    def column(key: str) -> list:
        return list(episode.get_extra_model_outputs(key)) if key in episode.extra_model_outputs else [None] * len(actions)

    steps = []
    for t, (prompt, response, valid) in enumerate(zip(column(PROMPT), column(RESPONSE_TEXT), column(VALID), strict=True)):
        steps.append(
            {
                "t": t,
                "observation": observation_text(observations[t]),
                "prompt": render_prompt(prompt) if render_prompt is not None and prompt is not None else None,
                "response": response,
                "action": actions[t],
                "valid": None if valid is None else bool(valid),
                "reward": float(rewards[t]),
            }
        )
    return {
        "iteration": iteration,
        "group_id": episode.custom_data.get(GROUP_ID),
        "seed": episode.custom_data.get(SEED),
        "return": float(episode.get_return()),
        "success": episode_success(episode),
        "final_observation": observation_text(observations[-1]),
        "steps": steps,
    }


def describe_group_id(group_id: Any) -> str:
    """``"0-1-2"`` -> ``"0-1-2 (EnvRunner 0, its rollout 1, group 2)"``: the episodes of a group start from the
    same seed and are compared with each other by the group-relative estimators. A restarted runner's ids
    start ``<worker>r<restarts>`` (``"1r2-0-3"``: EnvRunner 1 after its 2nd restart)."""
    parts = str(group_id).split("-")
    if len(parts) != 3:
        return str(group_id)
    worker, _, restarts = parts[0].partition("r")
    runner = f"EnvRunner {worker}" + (f" after restart {restarts}" if restarts else "")
    return f"{group_id} ({runner}, its rollout {parts[1]}, group {parts[2]})"


def format_trajectory(record: dict[str, Any], *, prompts: bool = True) -> str:
    """A trajectory record as readable text: a header line, then per step prompt/response/action/reward."""
    agent = f"agent {record['agent_id']} (module {record['module_id']}), " if record.get("agent_id") else ""
    lines = [
        f"=== iteration {record['iteration']}, {agent}group {describe_group_id(record['group_id'])}, seed "
        f"{record['seed']}: return {record['return']:.3f}, {'success' if record['success'] else 'no success'}, "
        f"{len(record['steps'])} step(s) ==="
    ]
    if prompts and record.get("few_shot"):
        examples = "; ".join(f"user {user!r} -> assistant {reply!r}" for user, reply in record["few_shot"])
        lines.append(f"(each prompt opens with the config's few-shot example, not an earlier step: {examples})")
    for step in record["steps"]:
        lines.append(f"--- step {step['t'] + 1} ---")
        if prompts and step.get("prompt"):
            lines.append("prompt:")
            lines.extend(f"  | {line}" for line in step["prompt"].splitlines())
        else:
            lines.append(f"observation: {step['observation']}")
        lines.append(f"response: {step['response']!r}")
        validity = "" if step["valid"] is None else ("" if step["valid"] else " (invalid)")
        lines.append(f"action: {step['action']!r}{validity}  reward: {step['reward']:g}")
    lines.append(f"final observation: {record['final_observation']}")
    return "\n".join(lines)


def episode_records(episode: Any, iteration: int, render_prompt: Callable[[Any], str] | None = None) -> list[dict]:
    """``[episode_record(...)]`` of a single-agent episode; one record per agent (with ``agent_id`` and
    ``module_id``) of a multi-agent one, agents in id order, agents that never acted left out."""
    agents = getattr(episode, "agent_episodes", None)
    if agents is None:
        return [episode_record(episode, iteration, render_prompt)]
    records = []
    for agent_id in sorted(agents, key=str):
        agent_episode = agents[agent_id]
        if len(agent_episode):
            record = episode_record(agent_episode, iteration, render_prompt)
            records.append({**record, "agent_id": agent_id, "module_id": agent_episode.module_id})
    return records
