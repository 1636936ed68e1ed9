"""The column schema: one name for every piece of data that moves from the env to the loss.

RLlib keeps its names in :class:`ray.rllib.core.columns.Columns`; this module is the same for what an LLM
agent adds (prompt and response token ids, the group a rollout belongs to, GiGPO's anchor state), and reuses
RLlib's name wherever RLlib has one (``action_logp``, ``advantages``, ``vf_preds``, ``value_targets``,
``agent_id``). Every layer imports its keys from here, so the sampler, the env-to-module connectors, the
Learner connectors and the loss never import each other for a string.

Where each group of names lives, in the order a step travels (see notes/ARCHITECTURE.md):

1. ``info`` dicts an env returns (``INFO_*``);
2. ``episode.custom_data`` the EnvRunner fills at reset (group, seed, prompt fields);
3. the env-to-module batch the memory and prompt connectors write (``MEMORY`` .. ``IMAGES``);
4. ``extra_model_outputs`` recorded per step (prompt/response ids, log-probs, anchor, validity);
5. the Learner connector's step columns (one row per env step: rewards, indexes, anchors, token lists);
6. the Learner's token batch (padded ids, masks, advantages) and the RLModule's forward outputs.
"""

from __future__ import annotations

from ray.rllib.core.columns import Columns
from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

# --- 1. env info keys -----------------------------------------------------------------------------------

#: ``info["won"]``: the episode ended in success (success rate, GiGPO's and the eval's notion of winning).
INFO_WON = "won"
#: ``info["is_action_valid"]``: the env accepted the parsed action (else the invalid-action penalty applies).
INFO_ACTION_VALID = "is_action_valid"
#: ``info["anchor_obs"]``: the env's hashable state for GiGPO's step groups (default: the text observation).
INFO_ANCHOR_OBS = "anchor_obs"
#: ``info["env_error"]``: set by the EnvRunner on the step where an env call failed (episode truncated).
ENV_ERROR = "env_error"

# --- 2. episode.custom_data -----------------------------------------------------------------------------

#: The group (episodes that reset with one seed): ``<worker>-<rollout>-<group>``.
GROUP_ID = "group_id"
#: The seed the episode's env reset with.
SEED = "seed"
#: Env faults that hit this episode (failed resets before it started, a failed step).
ENV_FAULTS = "env_faults"
#: The policy version the episode was sampled with: the Learner's weights sequence number the EnvRunner
#: last received (RLlib's ``weights_seq_no``); every episode of a group rollout has the same one.
POLICY_VERSION = WEIGHTS_SEQ_NO
#: The acting agent of a multi-agent episode's agent episode (RLlib's name).
AGENT_ID = Columns.AGENT_ID
#: Prompt fields filled at reset from the env or the config: template, task, few-shot examples, and the
#: text the reply starts with (prefilled after the generation prompt).
TEMPLATE_KEY = "prompt_template"
TASK_KEY = "task_description"
FEW_SHOT_KEY = "few_shot"
RESPONSE_PREFIX_KEY = "response_prefix"
#: How the env takes actions: ``"tags"`` (the text inside ``<action>...</action>``) or ``"raw"`` (the reply).
ACTION_FORMAT_KEY = "action_format"

# --- 3. env-to-module batch -----------------------------------------------------------------------------

#: Memory blocks (one per episode) and how many steps they cover; read by the prompt builder.
MEMORY = "memory"
HISTORY_LENGTH = "history_length"
#: The prompt builder's output: token ids to generate from, the user message, the observation's image.
PROMPT_IDS = "prompt_ids"
PROMPT_TEXT = "prompt_text"
IMAGES = "images"
#: What the EnvRunner adds for the module's forward_exploration / forward_inference: the SamplingParams.
SAMPLING_PARAMS = "sampling_params"
#: The module's sampling output: one GenerationOutput (token ids, log-probs, text) per prompt.
GENERATIONS = "generations"

#: The module-to-env batch: the reply texts, and the env actions parsed from them (RLlib's name).
ACTIONS = Columns.ACTIONS

# --- 4. extra_model_outputs per step ---------------------------------------------------------------------

#: The step's prompt token ids (as generated from: a VL prompt's image placeholder expanded).
PROMPT = PROMPT_IDS
#: The sampled response token ids.
RESPONSE = "response_ids"
#: Per-token log-probs of the response under the sampling policy (RLlib's name for the behaviour log-prob).
ACTION_LOGP = Columns.ACTION_LOGP
#: The decoded response text.
RESPONSE_TEXT = "response_text"
#: GiGPO's anchor state of the observation the step acted on.
ANCHOR = "anchor"
#: Whether the response parsed to an action the env accepted.
VALID = INFO_ACTION_VALID
#: Why generation stopped: ``"stop"`` or ``"length"`` (cut at ``max_new_tokens``).
FINISH_REASON = "finish_reason"
#: Images the step's prompt showed (vision-language policies only).
NUM_IMAGES = "num_images"

# --- 5. the Learner connector's step columns ------------------------------------------------------------
# ``batch[module_id]`` between FlattenSteps and StepsToTokenBatch: one row per env step, in episode order,
# plus PROMPT / RESPONSE / ACTION_LOGP (token lists), ANCHOR, VALID and, for VL steps, IMAGES (one per row).

#: The env's reward of the step; reward shaping (invalid-action, overlong penalties) is added here.
REWARDS = Columns.REWARDS
#: Dense ids: the step's episode, its group (GRPO/GiGPO's episode group) and its anchor state (GiGPO).
EPISODE_INDEX = "episode_index"
GROUP_INDEX = "group_index"
ANCHOR_INDEX = "anchor_index"

# --- 6. the Learner's token batch and the RLModule's outputs ---------------------------------------------

#: Left-padded prompt + right-padded response ids, their attention mask, and the response tokens' mask.
INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
RESPONSE_MASK = "response_mask"
#: Per-row advantages, and the critic's values at sampling time and its targets (PPO).
ADVANTAGES = Columns.ADVANTAGES
#: Asynchronous rollouts: per-token log-probs of the response under the Learner's policy before this update
#: (the proximal policy of the decoupled PPO objective; the ratio's denominator, ``action_logp`` the behaviour).
PROX_LOGP = "prox_logp"
OLD_VALUES = Columns.VF_PREDS
VALUE_TARGETS = Columns.VALUE_TARGETS
#: A VL batch's images (uint8, padded to the largest) and their (height, width).
IMAGE_SIZES = "image_sizes"
#: RLModule forward outputs: per-token log-probs and entropies under the current policy, the frozen
#: reference's log-probs (KL), the value head's output.
LOGP = "logp"
ENTROPY = "entropy"
REF_LOGP = "ref_logp"
VALUES = "values"
