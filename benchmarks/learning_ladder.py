"""The learning ladder (issue 20): where does RL of the main job lose what supervised learning finds?

    python benchmarks/learning_ladder.py --seeds 0 1 --iterations 4             # every rung, the old recipe
    python benchmarks/learning_ladder.py --recipe shipped --rungs natural        # the main job as shipped

Every rung trains the main job's model, LoRA adapters, prompt and optimizer (``tuned_examples/numberline_gigpo.py``,
loaded, with ``--recipe``'s overrides) through the library's own Learner; only what the update sees changes:

- ``supervised``: the NLL of the right reply (``<action>+</action>`` where the target is above the pointer,
  else ``-``) on a balanced batch of start states, as many rows and optimizer steps per iteration as RL gets.
- ``oracle``: the RL pipeline (group rollouts, clipped policy loss) with oracle advantages (+1 for a move
  towards the target, -1 for any other reply) on balanced start states (half the groups target-above).
- ``gigpo_balanced``: the same rollouts with GiGPO's advantages.
- ``natural``: GiGPO on random start states, as the main job plays.

After every iteration it probes the EnvRunner's policy on all 30 start states of NumberLine(5): P(``+``) and
P(``-``) of the decision token (the first reply token after the prefilled ``<action>``), its entropy, and the
change of the decision logit ``z = log P(+) - log P(-)`` since iteration 0, split into its common-mode part
(the mean over all states: more ``+`` everywhere) and its differential part (mean over target-above states
minus mean over target-below states: the comparison the task needs). From the Learner: gradient norm and the
share of uninformative (all-zero-advantage) groups. Greedy success on the held-out seeds at the end.
Writes ``benchmarks/results/learning_ladder[_<recipe>].{json,md,png}``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import RESULTS_DIR, format_table, init_ray, machine_info  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TUNED_EXAMPLE = ROOT / "tuned_examples" / "numberline_gigpo.py"
RUNGS = ("supervised", "oracle", "gigpo_balanced", "natural")
MAX_POSITION = 5
#: Overrides of the tuned example per recipe: "before" is the main job as it was before issue 20 (lr 3e-4,
#: no KL, no warm-up, success-only reward, 16 iterations); "shipped" is the tuned example as it is.
RECIPES: dict[str, dict[str, Any]] = {
    "before": {"lr": 3e-4, "kl_coeff": 0.0, "away_penalty": 0.0},
    "shipped": {},
}


# --- states, seeds and the probe -------------------------------------------------------------------------


def all_states(max_position: int = MAX_POSITION) -> list[tuple[int, int]]:
    """Every NumberLine start state (target, position), target != position."""
    return [(t, p) for t in range(max_position + 1) for p in range(max_position + 1) if t != p]


def seeds_for_states(env_config: dict[str, Any]) -> dict[tuple[int, int], int]:
    """The first env seed that starts NumberLine in each state (reset is deterministic in the seed)."""
    from rllib_llm.envs.gym_cards import NumberLineEnv

    env, found = NumberLineEnv(**env_config), {}
    wanted = set(all_states(env.max_position))
    for seed in range(100_000):
        env.reset(seed=seed)
        found.setdefault((env.target, env.position), seed)
        if len(found) == len(wanted):
            return found
    raise RuntimeError(f"no seed found for states {sorted(wanted - set(found))}")


def balanced_seeds(rng: np.random.Generator, seed_of: dict[tuple[int, int], int], groups: int) -> list[int]:
    """``groups`` start-state seeds, half (rounded at random) with the target above the pointer."""
    above = [s for s in seed_of if s[0] > s[1]]
    below = [s for s in seed_of if s[0] < s[1]]
    n_above = groups // 2 + (int(rng.integers(2)) if groups % 2 else 0)
    picks = [above[i] for i in rng.choice(len(above), n_above, replace=False)]
    picks += [below[i] for i in rng.choice(len(below), groups - n_above, replace=False)]
    return [seed_of[s] for s in picks]


def correct_move(state: tuple[int, int]) -> str:
    target, position = state
    return "+" if target > position else "-"


class Probe:
    """The decision-token statistics of the EnvRunner's policy on every start state (step-0 prompts)."""

    def __init__(self, algo: Any, seed_of: dict[tuple[int, int], int]) -> None:
        from rllib_llm.columns import PROMPT

        self.algo = algo
        self.states = sorted(seed_of)
        episodes = algo.play_held_out([seed_of[s] for s in self.states])
        self.prompts = [list(map(int, ep.get_extra_model_outputs(PROMPT)[0])) for ep in episodes]
        tokenizer = algo.env_runner.module.tokenizer
        prefix = algo.config.response_prefix
        self.replies = {a: tokenizer.encode(f"<action>{a}</action>"[len(prefix):], add_special_tokens=False)
                        for a in "+-"}
        self.tokens = {a: ids[0] for a, ids in self.replies.items()}
        self.z0: np.ndarray | None = None

    def __call__(self) -> dict[str, Any]:
        import torch

        model = self.algo.env_runner.module.model
        device = next(model.parameters()).device
        p_plus, p_minus, entropy = [], [], []
        with torch.no_grad():
            for prompt in self.prompts:
                logits = model(input_ids=torch.tensor([prompt], device=device)).logits[0, -1].float()
                logp = torch.log_softmax(logits, -1)
                p_plus.append(float(logp[self.tokens["+"]].exp()))
                p_minus.append(float(logp[self.tokens["-"]].exp()))
                entropy.append(float(-(logp.exp() * logp).sum()))
        z = np.log(np.maximum(p_plus, 1e-12)) - np.log(np.maximum(p_minus, 1e-12))
        if self.z0 is None:
            self.z0 = z
        dz = z - self.z0
        up = np.array([correct_move(s) == "+" for s in self.states])
        plus, minus = np.array(p_plus), np.array(p_minus)
        right = np.where(up, plus, minus)
        return {
            "p_plus_up": float(plus[up].mean()),
            "p_plus_down": float(plus[~up].mean()),
            "p_minus_up": float(minus[up].mean()),
            "p_minus_down": float(minus[~up].mean()),
            # The policy picks the right move greedily where P(right) > P(wrong).
            "right_argmax_rate": float(np.mean(right > np.where(up, minus, plus))),
            "decision_entropy": float(np.mean(entropy)),
            "dz_common": float(dz.mean()),
            "dz_differential": float(dz[up].mean() - dz[~up].mean()),
        }


# --- rungs -----------------------------------------------------------------------------------------------


def oracle_connector(input_observation_space: Any = None, input_action_space: Any = None) -> Any:
    """A learner connector piece (after ComputeAdvantages) that replaces every step's advantage by the
    oracle's: +1 for the move towards the target, -1 for anything else."""
    from ray.rllib.connectors.connector_v2 import ConnectorV2
    from ray.rllib.core import DEFAULT_MODULE_ID

    from rllib_llm.columns import ADVANTAGES, ANCHOR

    class OracleAdvantages(ConnectorV2):
        def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
            moves = [a for ep in episodes for a in ep.get_actions()]
            anchors = [tuple(a) for a in batch[DEFAULT_MODULE_ID][ANCHOR]]
            batch[DEFAULT_MODULE_ID][ADVANTAGES] = np.array(
                [1.0 if m == correct_move(s) else -1.0 for m, s in zip(moves, anchors, strict=True)], dtype=np.float32
            )
            return batch

    return OracleAdvantages()


def balanced_algo_class(base: type, seed_of: dict[tuple[int, int], int], seed: int) -> type:
    """``base`` whose rollouts start from balanced start states (LLMAlgorithm.sample_episodes, overridden)."""
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS

    rng = np.random.default_rng(seed)

    class Balanced(base):
        def sample_episodes(self) -> list:
            seeds = balanced_seeds(rng, seed_of, self.config.num_groups)
            episodes = self.env_runner.sample(seeds=seeds)
            self.metrics.aggregate([self.env_runner.get_metrics()], key=ENV_RUNNER_RESULTS)
            return episodes

    Balanced.__name__ = f"Balanced{base.__name__}"
    return Balanced


def supervised_step(algo: Any, probe: Probe, rng: np.random.Generator, rows: int, minibatch: int) -> dict[str, float]:
    """``rows`` balanced (prompt, right reply) rows in minibatches through the Learner's optimizer (NLL of
    the reply tokens, the Learner's grad clip), then a weight sync to the EnvRunner."""
    import torch

    from rllib_llm.algorithms.learner_connectors import pad_token_batch
    from rllib_llm.columns import ACTION_LOGP, PROMPT, RESPONSE
    from rllib_llm.token_forward import response_logprobs

    up = [i for i, s in enumerate(probe.states) if correct_move(s) == "+"]
    down = [i for i, s in enumerate(probe.states) if correct_move(s) == "-"]
    picks = [*rng.choice(up, rows // 2), *rng.choice(down, rows - rows // 2)]
    rng.shuffle(picks)
    norms: list[float] = []

    def train(learner: Any) -> None:
        module = learner.module["default_policy"]
        optimizer = learner.get_optimizer()
        params = [p for p in module.parameters() if p.requires_grad]
        for start in range(0, len(picks), minibatch):
            chunk = picks[start : start + minibatch]
            responses = [probe.replies[correct_move(probe.states[i])] for i in chunk]
            steps = {PROMPT: [probe.prompts[i] for i in chunk], RESPONSE: responses,
                     ACTION_LOGP: [[0.0] * len(r) for r in responses]}
            batch = {k: torch.as_tensor(v) for k, v in pad_token_batch(steps, module.tokenizer.pad_token_id).items()}
            logp, _ = response_logprobs(module.model, batch["input_ids"], batch["attention_mask"],
                                        batch["response_mask"].shape[1], module.temperature)
            loss = -(logp * batch["response_mask"]).sum() / batch["response_mask"].sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(params, algo.config.grad_clip or float("inf"))))
            optimizer.step()

    algo.learner_group.foreach_learner(train)
    algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner_group, inference_only=True)
    return {"grad_norm": float(np.mean(norms)), "nll_steps": len(norms)}


def _metric(result: dict, *path: str) -> float | None:
    """A result entry (:func:`rllib_llm.run.progress.lookup`), None where the result has none."""
    from rllib_llm.run.progress import lookup

    value = lookup(result, path)
    return None if math.isnan(value) else value


def build(rung: str, seed: int, args: argparse.Namespace, seed_of: dict) -> Any:
    from rllib_llm.run.cli import load_tuned_example

    config, _ = load_tuned_example(TUNED_EXAMPLE)
    config = config.copy(copy_frozen=False)
    overrides = dict(RECIPES[args.recipe])
    env_config = dict(config.env_config)
    if "away_penalty" in overrides:
        env_config["away_penalty"] = overrides.pop("away_penalty")
    config.environment(env_config=env_config)
    if overrides:
        config.training(**overrides)
    config.llm(model={**config.llm_model, "name_or_path": args.model})
    config.evaluation(evaluation_num_seeds=args.eval_seeds).debugging(seed=seed)
    if rung in ("oracle", "gigpo_balanced"):
        config.algo_class = balanced_algo_class(config.algo_class, seed_of, seed)
    if rung == "oracle":
        config.training(learner_connector=oracle_connector)
    return config.build_algo()


def run_rung(rung: str, seed: int, args: argparse.Namespace, seed_of: dict, log: Any) -> None:
    start = time.perf_counter()
    algo = build(rung, seed, args, seed_of)
    probe = Probe(algo, seed_of)
    rng = np.random.default_rng(seed)

    def write(kind: str, **fields: Any) -> None:
        record = {"rung": rung, "seed": seed, "recipe": args.recipe, "kind": kind, **fields}
        log.write(json.dumps(record, default=float) + "\n")
        log.flush()
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in record.items()}), flush=True)

    write("probe", iteration=0, **probe(), seconds=time.perf_counter() - start)
    rows = algo.config.num_groups * algo.config.group_size * 4  # about what one RL iteration trains on
    for iteration in range(1, args.iterations + 1):
        t = time.perf_counter()
        if rung == "supervised":
            stats = supervised_step(algo, probe, rng, rows, algo.config.minibatch_size or rows)
        else:
            result = algo.train()
            stats = {
                "grad_norm": _metric(result, "learners", "default_policy", "gradients_default_optimizer_global_norm"),
                "uninformative_group_fraction": _metric(result, "learners", "uninformative_group_fraction"),
                "train_success": _metric(result, "env_runners", "success_rate"),
                "valid": _metric(result, "env_runners", "valid_action_rate"),
                "kl": _metric(result, "learners", "default_policy", "kl"),
            }
        write("probe", iteration=iteration, **probe(), **stats, seconds=time.perf_counter() - t)
    evaluation = algo.evaluate_seeds()
    write("eval", iteration=args.iterations, success_rate=evaluation["success_rate"],
          valid_action_rate=evaluation["valid_action_rate"])
    algo.stop()


# --- report ------------------------------------------------------------------------------------------


def summarize(records: list[dict]) -> list[dict]:
    """Per rung: mean and spread over seeds of the last probe and the held-out success."""
    rows = []
    for rung in RUNGS:
        mine = [r for r in records if r["rung"] == rung]
        if not mine:
            continue
        seeds = sorted({r["seed"] for r in mine})
        last = [max((r for r in mine if r["seed"] == s and r["kind"] == "probe"), key=lambda r: r["iteration"]) for s in seeds]
        evals = [r["success_rate"] for r in mine if r["kind"] == "eval"]
        first = [r for r in mine if r["kind"] == "probe" and r["iteration"] == 1]

        def stat(values: list) -> str:
            values = [v for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
            if not values:
                return "-"
            return f"{statistics.fmean(values):.2f} [{min(values):.2f}, {max(values):.2f}]"

        rows.append({
            "rung": rung, "seeds": len(seeds), "iterations": last[0]["iteration"],
            "P(+) up": stat([r["p_plus_up"] for r in last]), "P(+) down": stat([r["p_plus_down"] for r in last]),
            "right argmax": stat([r["right_argmax_rate"] for r in last]),
            "decision entropy": stat([r["decision_entropy"] for r in last]),
            "dz common": stat([r["dz_common"] for r in last]), "dz differential": stat([r["dz_differential"] for r in last]),
            "uninformative groups": stat([r.get("uninformative_group_fraction") for r in mine if r["kind"] == "probe"]),
            "grad norm (it. 1)": stat([r.get("grad_norm") for r in first]),
            "held-out success": stat(evals),
        })
    return rows


def report(records: list[dict], stem: str, note: str) -> None:
    rows = summarize(records)
    columns = ["rung", "seeds", "iterations", "P(+) up", "P(+) down", "right argmax", "decision entropy", "dz common",
               "dz differential", "uninformative groups", "grad norm (it. 1)", "held-out success"]
    lines = [f"# {stem} (generated by benchmarks/learning_ladder.py)", "", note, "",
             "Values: mean [min, max] over seeds, at the last iteration (uninformative groups: over all iterations).", "",
             format_table(rows, columns)]
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"{stem}.md").write_text("\n".join(lines) + "\n")
    (RESULTS_DIR / f"{stem}.json").write_text(json.dumps({"note": note, "machine": machine_info(), "summary": rows,
                                                          "records": records}, indent=1, default=float) + "\n")
    print("\n".join(lines[-1:]))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rungs = [r for r in RUNGS if any(x["rung"] == r for x in records)]
    fig, axes = plt.subplots(1, len(rungs), figsize=(4 * len(rungs), 3.4), sharey=True, squeeze=False)
    for ax, rung in zip(axes[0], rungs, strict=True):
        for seed in sorted({r["seed"] for r in records if r["rung"] == rung}):
            probes = sorted((r for r in records if r["rung"] == rung and r["seed"] == seed and r["kind"] == "probe"),
                            key=lambda r: r["iteration"])
            its = [r["iteration"] for r in probes]
            ax.plot(its, [r["p_plus_up"] for r in probes], color="tab:green", alpha=0.8, label="target above" if seed == 0 else None)
            ax.plot(its, [r["p_plus_down"] for r in probes], color="tab:red", alpha=0.8, label="target below" if seed == 0 else None)
        ax.set_title(rung)
        ax.set_xlabel("iteration")
        ax.set_ylim(0, 1)
    axes[0][0].set_ylabel("P(+) of the decision token")
    axes[0][0].legend(loc="best", fontsize=8)
    fig.suptitle(f"{stem}: P(+) where the target is above (green) / below (red), one line per seed")
    fig.tight_layout()
    fig.savefig(RESULTS_DIR / f"{stem}.png", dpi=90)
    print(f"wrote {RESULTS_DIR / stem}.png")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rungs", nargs="+", default=list(RUNGS), choices=RUNGS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--recipe", default="before", choices=sorted(RECIPES))
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--eval-seeds", type=int, default=64)
    parser.add_argument("--log", type=Path, default=None, help="JSONL records (default /tmp/learning_ladder_<recipe>.jsonl)")
    parser.add_argument("--report-only", action="store_true", help="only rewrite the report from --log")
    args = parser.parse_args()
    log_path = args.log or Path(f"/tmp/learning_ladder_{args.recipe}.jsonl")
    stem = "learning_ladder" if args.recipe == "before" else f"learning_ladder_{args.recipe}"
    if not args.report_only:
        init_ray()
        seed_of = seeds_for_states({"max_position": MAX_POSITION})
        with log_path.open("a") as log:
            for seed in args.seeds:
                for rung in args.rungs:
                    run_rung(rung, seed, args, seed_of, log)
    records = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    note = (f"Recipe {args.recipe!r} ({RECIPES[args.recipe] or 'the tuned example as it is'}) of "
            f"tuned_examples/numberline_gigpo.py, model {args.model}, {args.iterations} iterations per rung; "
            "held-out success: greedy, on the main job's held-out seeds.")
    report(records, stem, note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
