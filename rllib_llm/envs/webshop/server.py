"""Adapter to a real WebShop server (princeton-nlp/WebShop's Flask app, ``python -m web_agent_site.app``).

It browses the server's HTML the way WebShop's own text env does: clickables are the buttons (class
``btn``), the product links (class ``product-link``) and the option radio inputs; the observation is the
visible text joined by ``[SEP]``; the search bar is ``#search_input``; the score is read from the done page's
``#reward``. Sessions ``fixed_<i>`` pick goal ``i``, as in WebShop. Stdlib only (no bs4/flask client side).
"""

from __future__ import annotations

import re
import urllib.parse
from html.parser import HTMLParser
from typing import Any

import numpy as np

from rllib_llm.envs.http_client import request
from rllib_llm.envs.webshop.shop import SEP, Page

_HIDDEN = {"script", "style", "head", "title"}


class _WebShopHTML(HTMLParser):
    """Collects visible texts, click targets and the search form of a WebShop page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.targets: dict[str, tuple[str, str]] = {}  # clickable -> (method, url)
        self.search_action: str | None = None
        self.instruction = ""
        self.reward_text = ""
        self._stack: list[tuple[str, dict[str, str]]] = []
        self._form: tuple[str, str] | None = None
        self._button: str | None = None
        self._link: str | None = None
        self._in_instruction = 0
        self._in_reward = False
        self._hidden_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if tag in _HIDDEN or "display:none" in a.get("style", "").replace(" ", "") or "hidden" in a:
            self._hidden_depth += 1
        if tag == "form":
            self._form = (a.get("method", "get").upper(), a.get("action", ""))
        elif tag == "button" and "btn" in classes:
            self._button = ""
        elif tag == "a" and "product-link" in classes:
            self._link = a.get("href", "")
            self._button = ""
        elif tag == "input" and a.get("type") == "radio" and a.get("value"):
            self.targets[a["value"]] = ("GET", a.get("data-url", ""))
        elif tag == "input" and a.get("id") == "search_input" and self._form is not None:
            self.search_action = self._form[1]
        if a.get("id") == "instruction-text":
            self._in_instruction = 1
        if a.get("id") == "reward":
            self._in_reward = True
        if tag not in ("input", "img", "br", "link", "meta"):
            self._stack.append((tag, a))

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN and self._hidden_depth:
            self._hidden_depth -= 1
        if tag == "form":
            self._form = None
        if tag == "button" and self._button is not None:
            text = self._button.strip().lower()
            if text and text != "search" and self._form is not None:
                self.targets[text] = self._form
            self._button = None
        if tag == "a" and self._link is not None:
            self.targets[(self._button or "").strip().lower()] = ("GET", self._link)
            self._link, self._button = None, None
        while self._stack:
            open_tag, attrs = self._stack.pop()
            if attrs.get("id") == "instruction-text":
                self._in_instruction = 0
            if attrs.get("id") == "reward":
                self._in_reward = False
            if attrs.get("style", "").replace(" ", "").find("display:none") >= 0 or "hidden" in attrs:
                self._hidden_depth = max(0, self._hidden_depth - 1)
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._button is not None:
            self._button += data
        if self._in_reward:
            self.reward_text += data
        text = data.strip()
        if not text or self._hidden_depth:
            return
        if self._in_instruction == 1 and text.startswith("Instruction:"):
            self.instruction = text[len("Instruction:") :].strip()
            self._in_instruction = 2
        self.texts.append(text)


class WebShopServer:
    """A :class:`~rllib_llm.envs.webshop.shop.LocalShop`-compatible backend that drives a WebShop server."""

    def __init__(
        self, url: str, num_goals: int = 500, goal_offset: int = 0, timeout: float = 30.0, retries: int = 3
    ) -> None:
        self.url = url.rstrip("/")
        self.num_goals, self.goal_offset = num_goals, goal_offset
        self.timeout, self.retries = timeout, retries
        self.session = ""
        self.instruction = ""
        self._current_url = ""
        self._parsed: _WebShopHTML | None = None
        self.goal: dict[str, Any] = {}

    def _fetch(self, url: str, form: dict[str, str] | None = None) -> Page:
        body, final_url = request(
            url,
            form=form,
            timeout=self.timeout,
            retries=self.retries,
            what="WebShop server",
            allowed_origin=self.url,  # a page's links may not lead the env to files or other hosts
            hint="Start it with `python -m web_agent_site.app` in the WebShop repo (see the module docstring).",
        )
        parsed = _WebShopHTML()
        parsed.feed(body.decode(errors="replace"))
        self._current_url, self._parsed = final_url, parsed
        if parsed.instruction:
            self.instruction = parsed.instruction
        for key, (method, target) in list(parsed.targets.items()):
            parsed.targets[key] = (method, urllib.parse.urljoin(final_url, target))
        if "/done/" in urllib.parse.urlparse(final_url).path:
            match = re.search(r"-?\d+(\.\d+)?", parsed.reward_text.split(")")[-1])
            reward = float(match.group()) if match else 0.0
            return Page(SEP.join(parsed.texts), [], done=True, reward=reward)
        return Page(SEP.join(parsed.texts), list(parsed.targets), has_search_bar=parsed.search_action is not None)

    def new_goal(self, rng: np.random.Generator, asin: str | None = None) -> dict[str, Any]:
        if asin is not None:
            raise ValueError("A WebShop server picks goals by index: use options={'goal_idx': i}")
        return {"goal_idx": self.goal_offset + int(rng.integers(self.num_goals))}

    def goal_from_index(self, index: int) -> dict[str, Any]:
        return {"goal_idx": index}

    def start(self, goal: dict[str, Any]) -> Page:
        self.goal = goal
        self.session = goal.get("session") or f"fixed_{goal['goal_idx']}"
        return self._fetch(f"{self.url}/{self.session}")

    def search(self, query: str) -> Page:
        action = self._parsed.search_action if self._parsed else None
        target = urllib.parse.urljoin(self._current_url, action) if action else f"{self.url}/{self.session}"
        return self._fetch(target, form={"search_query": query})

    def click(self, target: str) -> Page:
        assert self._parsed is not None
        method, url = self._parsed.targets[target]
        return self._fetch(url, form={} if method == "POST" else None)
