"""Blackjack (Gym Cards): "hit" or "stand" against a dealer who draws to 17.

Standard rules on one shuffled 52-card deck (seeded by ``reset``): aces count 11 unless that busts the hand,
face cards count 10; going over 21 loses at once; on "stand" the dealer reveals the hole card and hits
while below 17 (standing on soft 17, as gymnasium's Blackjack does). Reward +1 win, 0 push, -1 loss;
``natural_reward`` (default 1.0, casino payoff 1.5) pays a two-card 21 that the dealer does not match.

verl-agent's scoring (notes/parity.md): ``loss_reward=0.0`` (a loss earns what a push does there) and
``natural_beats_dealer_21=False`` (its natural check never fires against a dealer's 21 in three or more cards:
that deal is a push).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rllib_llm.envs import rendering
from rllib_llm.envs.base import TextEnv
from rllib_llm.envs.gym_cards import cards as cardlib


def hand_value(hand: list[cardlib.Card]) -> tuple[int, bool]:
    """(best total, soft) where soft means an ace is being counted as 11."""
    total = sum(1 if c.rank == "A" else 10 if c.rank in ("10", "J", "Q", "K") else int(c.rank) for c in hand)
    if any(c.rank == "A" for c in hand) and total + 10 <= 21:
        return total + 10, True
    return total, False


class BlackjackEnv(TextEnv):
    prompt_template: ClassVar[str] = (
        "You are playing Blackjack against a dealer. Get a hand total closer to 21 than the dealer without "
        "going over. Aces count 1 or 11, face cards 10. 'hit' takes another card; 'stand' ends your turn and "
        "the dealer draws until reaching 17.\n{memory}Current observation: {current_observation}\n"
        "Available actions: {available_actions}\n"
        "Think briefly, then give your action inside <action> </action> tags: <action>hit</action> or "
        "<action>stand</action>."
    )
    ACTIONS: ClassVar[tuple[str, ...]] = ("stand", "hit")
    MAX_CARDS_SHOWN: ClassVar[int] = 8

    def __init__(
        self,
        max_steps: int = 10,
        natural_reward: float = 1.0,
        image_obs: bool = False,
        loss_reward: float = -1.0,
        natural_beats_dealer_21: bool = True,
    ) -> None:
        super().__init__()
        self.max_steps = max_steps
        self.natural_reward = natural_reward
        self.loss_reward = float(loss_reward)
        self.natural_beats_dealer_21 = natural_beats_dealer_21
        self.image_obs = image_obs
        self._image_shape = (
            2 * (cardlib.CARD_H + cardlib.GAP) + cardlib.GAP,
            self.MAX_CARDS_SHOWN * (cardlib.CARD_W + cardlib.GAP) + cardlib.GAP,
        )
        if image_obs:
            self.observation_space = rendering.image_observation_space(self.observation_space, *self._image_shape)
        self.deck: list[cardlib.Card] = []
        self.player: list[cardlib.Card] = []
        self.dealer: list[cardlib.Card] = []
        self.done = False
        self.outcome = ""
        self.reward = 0.0
        self.steps = 0

    def _draw(self) -> cardlib.Card:
        return self.deck.pop()

    def _obs(self) -> Any:
        total, soft = hand_value(self.player)
        you = f"Your hand: {cardlib.cards_text(self.player)} (total {total}{', soft' if soft else ''})."
        if self.done:
            dealer_total, _ = hand_value(self.dealer)
            text = f"Dealer's hand: {cardlib.cards_text(self.dealer)} (total {dealer_total}). {you} {self.outcome}"
        else:
            text = f"Dealer shows: {self.dealer[0]}. {you}"
        return rendering.with_image(text, self.render_rgb() if self.image_obs else None)

    def render_rgb(self) -> np.ndarray:
        dealer: list[cardlib.Card | None] = list(self.dealer) if self.done else [self.dealer[0], None]
        rows = [dealer[: self.MAX_CARDS_SHOWN], list(self.player)[: self.MAX_CARDS_SHOWN]]
        return cardlib.pad_to(cardlib.render_rows(rows), *self._image_shape)

    def _info(self, valid: bool) -> dict[str, Any]:
        total, soft = hand_value(self.player)
        return {
            "is_action_valid": valid,
            "won": self.done and self.reward > 0,
            "anchor_obs": (total, soft, self.dealer[0].rank if self.dealer else "", self.done),
            "available_actions": [] if self.done else list(self.ACTIONS),
            "player_total": total,
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Deals from a seeded deck; ``options={"deck": ["10", "A", ...]}`` stacks the deck (draw order:
        player, player, dealer up-card, dealer hole card, then hits) for reproducible scenarios."""
        super().reset(seed=seed)
        self.deck = cardlib.new_deck(self.np_random)
        if options and options.get("deck"):
            stacked = [cardlib.Card(str(rank), "S") for rank in options["deck"]]
            if any(c.rank not in cardlib.RANKS for c in stacked):
                raise ValueError(f"Unknown rank in stacked deck {options['deck']}; ranks are {cardlib.RANKS}")
            self.deck = self.deck + stacked[::-1]
        self.player = [self._draw(), self._draw()]
        self.dealer = [self._draw(), self._draw()]
        self.done, self.outcome, self.reward, self.steps = False, "", 0.0, 0
        self.task_description = "Beat the dealer at Blackjack."
        return self._obs(), self._info(True)

    def _finish(self) -> float:
        """Dealer plays out and the hand is scored."""
        while hand_value(self.dealer)[0] < 17:
            self.dealer.append(self._draw())
        player, dealer = hand_value(self.player)[0], hand_value(self.dealer)[0]
        natural = len(self.player) == 2 and player == 21
        dealer_natural = len(self.dealer) == 2 and dealer == 21
        if natural and not dealer_natural and (self.natural_beats_dealer_21 or dealer != 21):
            return self.natural_reward
        if dealer > 21 or player > dealer:
            return 1.0
        return 0.0 if player == dealer else self.loss_reward

    def step(self, action: str | None) -> tuple[Any, float, bool, bool, dict]:
        if not self.player:
            raise RuntimeError("Call reset() before step()")
        self.steps += 1
        move = action.strip().lower() if isinstance(action, str) else ""
        valid = move in self.ACTIONS and not self.done
        reward = 0.0
        if valid and move == "hit":
            self.player.append(self._draw())
            if hand_value(self.player)[0] > 21:
                self.done, reward, self.outcome = True, self.loss_reward, "You busted: you lose."
        elif valid:
            reward = self._finish()
            self.done = True
            self.outcome = "You win." if reward > 0 else "Push: it's a draw." if reward == 0 else "You lose."
        self.reward = reward if self.done else 0.0
        truncated = not self.done and self.steps >= self.max_steps
        return self._obs(), reward, self.done, truncated, self._info(valid)

    def render(self) -> str:
        return self._obs()["text"] if self.image_obs else self._obs()
