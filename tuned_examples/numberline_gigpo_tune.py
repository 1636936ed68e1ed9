"""Ray Tune sweep of GiGPO on NumberLine: group size x learning rate, best trial by held-out success.

    python tuned_examples/numberline_gigpo_tune.py [--iterations 3] [--grid group_size=2,4] [--grid lr=1e-5,5e-5]
    ray job submit --working-dir . -- python tuned_examples/numberline_gigpo_tune.py --max-concurrent 4
    rllib-llm train tuned_examples/numberline_gigpo_tune.py    (one run of the base config, no sweep)

The base config is tuned_examples/numberline_gigpo.py's; ``param_grid`` lists the values swept. Each trial
is one GiGPO run (an RLlib Algorithm is a Tune Trainable) reporting ``env_runners/success_rate`` and, at its
last iteration, ``held_out/success_rate`` (the best trial is chosen on it); trials
run one at a time unless ``--max-concurrent`` says otherwise (4 trials x 10 iterations of SmolLM2 take
about an hour on 2 CPU cores). Trials are logged to MLflow (``./mlruns``) and Tune's ``runs/tune``.
"""

from pathlib import Path

from rllib_llm.run.cli import load_tuned_example

config, stop = load_tuned_example(Path(__file__).with_name("numberline_gigpo.py"))

param_grid = {"group_size": [2, 4], "lr": [1e-5, 5e-5]}

if __name__ == "__main__":
    from rllib_llm.run.sweeps import sweep_main
    sweep_main(config, param_grid, stop)
