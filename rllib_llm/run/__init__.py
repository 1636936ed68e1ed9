"""Run tooling: what drives training from outside the RLlib core.

The ``rllib-llm`` command (:mod:`.cli`), its progress table and files (:mod:`.progress`,
:mod:`.trajectory_recorder`), atomic checkpoints and resume (:mod:`.checkpoints`), experiment tracking
(:mod:`.tracking`), stop criteria (:mod:`.stopping`), plots (:mod:`.plots`), Tune sweeps (:mod:`.sweeps`) and
the third-party notices a run keeps quiet (:mod:`.quiet`). The core (algorithms, runners, connectors,
modules) never imports this package.
"""
