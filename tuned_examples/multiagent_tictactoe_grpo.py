"""Two LLM players learn tic-tac-toe against each other: multi-agent GRPO with agent-wise advantages, one LoRA
adapter per player on the embedded SmolLM2-135M-Instruct (2 CPU cores).

    rllib-llm train tuned_examples/multiagent_tictactoe_grpo.py

``player_1`` (X) maps to the module ``x_player`` and ``player_2`` (O) to ``o_player``: two LLMRLModules,
each its own copy of the base model with its own LoRA adapters (two copies of 135M parameters, ~1.1 GB in
float32 per process that holds them). Two random opening moves per seed make the groups differ; the 4
games of a group start from the same position. Advantages are normalized within (group, player), so X's
wins and O's losses are each compared with the same player's other games (Dr. MAS). Per-player metrics
are in the result dict as ``env_runners/agent_player_1/success_rate`` (win rate), ``.../valid_action_rate``
and ``.../episode_return_mean``; per-module losses under ``learners/x_player`` and ``learners/o_player``.

Time on an idle 2-core machine (2026-12-05): one training iteration (16 games) 94 s; ``--iterations 1`` takes
2 min 55 s in all (model load and the two 16-seed evaluations included). The 10 iterations of ``stop`` took
25 min on 2026-12-04 (games with a winner 0.312 -> 0.562, legal moves 0.204 -> 0.343; notes/multi_agent.md);
``--iterations 3`` is a 6-minute look. An earlier 27.7 min for one iteration was a machine running other jobs.
"""

from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec

from rllib_llm.env_connectors import ChatPromptBuilder
from rllib_llm.multi_agent import AgentToModule, MultiAgentGRPOConfig, llm_module_spec

SYSTEM_PROMPT = (
    "You play tic-tac-toe. Three of your marks in a row, column or diagonal win. "
    "Reply with the number of one free cell, like <action>5</action>."
)
EXAMPLE = (
    "You are X.\n X | 2 | 3\n---+---+---\n 4 | O | 6\n---+---+---\n 7 | 8 | 9\nLegal moves: 2, 3, 4, 6, 7, 8, 9.",
    "<action>9</action>",
)
LORA = {"r": 8, "lora_alpha": 16}

config = (
    MultiAgentGRPOConfig()
    .environment("TicTacToe", env_config={"opening_moves": 2, "max_steps": 16})
    .llm(model={"name_or_path": "smollm2-135m-instruct", "trainable_layers": 6})
    .multi_agent(
        policies={"x_player", "o_player"},
        policy_mapping_fn=AgentToModule({"player_1": "x_player", "player_2": "o_player"}),
    )
    .rl_module(
        rl_module_spec=MultiRLModuleSpec(
            rl_module_specs={"x_player": llm_module_spec(lora=LORA), "o_player": llm_module_spec(lora=LORA)}
        )
    )
    .env_runners(
        env_to_module_connector=lambda env, spaces, device: [
            ChatPromptBuilder(system_prompt=SYSTEM_PROMPT, template="{current_observation}", output_format="")
        ]
    )
    .generation(temperature=1.0, max_new_tokens=10, stop=["</action>"])
    .group_rollouts(group_size=4, num_groups=4, max_episode_steps=16, invalid_action_penalty=0.1, few_shot=[EXAMPLE],
                    response_prefix="<action>")
    .agents(advantage_grouping="agent")
    .training(lr=1e-4, minibatch_size=32, num_epochs=1)
    .evaluation(evaluation_num_seeds=16)
    .debugging(seed=0)
)

stop = {"training_iteration": 10}

if __name__ == "__main__":
    from rllib_llm.run.cli import run_example
    run_example(config, stop)
