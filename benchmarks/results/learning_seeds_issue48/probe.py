"""P(+) per NumberLine start state of a main-job checkpoint (issue 48 diagnosis)."""
import json
import sys

sys.path.insert(0, "/work/main")
from benchmarks.gpu_sweep import action_probabilities  # noqa: E402
from rllib_llm.run.checkpoints import read_checkpoint, restore  # noqa: E402
from rllib_llm.run.cli import init_ray, load_tuned_example  # noqa: E402

init_ray()
config, _ = load_tuned_example(sys.argv[2] if len(sys.argv) > 2 else "tuned_examples/numberline_gigpo.py")
algo = config.build_algo()
restore(algo, read_checkpoint(sys.argv[1]))
episodes = algo.play_held_out()
won = {str(ep.get_observations(0)): bool(ep.get_infos(-1).get("won")) for ep in episodes}
rows = action_probabilities(algo, episodes)
for r in rows:
    r["won"] = won[r["state"]]
print(json.dumps(rows))
algo.stop()
