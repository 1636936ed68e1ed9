"""The policy and its samplers, the RLlib-shaped core: the group-rollout EnvRunner base
(:mod:`.group_env_runner`), the single- and multi-agent EnvRunners (:mod:`.single_agent_env_runner`,
:mod:`.multi_agent_env_runner`, named as RLlib names its own), the LLM as an RLModule (:mod:`.rl_module`),
model and tokenizer loading (:mod:`.models`) and vision-language policies (:mod:`.vision`).

It sits above the generation backends, env-to-module connectors and envs it drives, and below the algorithms
that train it; it never imports either (tests/architecture/test_import_cycles.py).
"""
