"""The main job (tuned_examples/numberline_gigpo.py) with GiGPO's step groups pooled across episode groups
(``step_grouping="exact_across_groups"``): the issue-20 experiment on the seeds the shipped recipe misses.

    rllib-llm train benchmarks/learning_across_groups_example.py --seed 2 --no-tracking --output runs/across_s2

Results: benchmarks/results/learning_across_groups/ (summary and progress of each seed run), notes/learning.md.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "numberline_gigpo", Path(__file__).resolve().parents[1] / "tuned_examples" / "numberline_gigpo.py"
)
_main_job = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_main_job)

config = _main_job.config.copy(copy_frozen=False).training(step_grouping="exact_across_groups")
stop = _main_job.stop
