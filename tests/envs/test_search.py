from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rllib_llm.envs import make_env
from rllib_llm.envs.http_client import ServerRequestError, ServerUnavailableError
from rllib_llm.envs.search import (
    BM25Retriever,
    DenseRetriever,
    HashingEmbedder,
    RetrieverClient,
    SearchEnv,
    exact_match,
    f1_score,
    load_corpus,
    load_questions,
    normalize_answer,
)
from rllib_llm.envs.text_search import BM25Index
from tests.envs.conftest import check_step
from tests.envs.fake_http import FakeServer, free_port

QUESTIONS = {q["id"]: q for q in load_questions()}
CORPUS = {d["id"]: d for d in load_corpus()}


def _first(kind: str, text: str) -> dict:
    return next(q for q in QUESTIONS.values() if q["type"] == kind and text in q["question"])


# -- scoring ------------------------------------------------------------------------------------------------
def test_squad_normalisation_em_f1() -> None:
    assert normalize_answer("The  Danube!") == "danube"
    assert exact_match("the Danube", ["Danube"]) == 1.0
    assert exact_match("Danube river", ["Danube"]) == 0.0
    assert f1_score("Danube river", ["Danube"]) == pytest.approx(2 / 3)
    assert f1_score("Paris", ["Berlin", "paris"]) == 1.0
    assert f1_score("", ["x"]) == 0.0


# -- data ------------------------------------------------------------------------------------------------
def test_fixture_is_real_sized_and_consistent() -> None:
    assert len(CORPUS) >= 200
    kinds = [q["type"] for q in QUESTIONS.values()]
    assert kinds.count("single") >= 100 and kinds.count("multi") >= 100
    for q in QUESTIONS.values():
        assert q["answers"] and all(s in CORPUS for s in q["support"])
        if q["type"] == "multi":
            assert len(q["support"]) >= 2
        # the answer is stated in the last supporting passage
        assert any(normalize_answer(a) in normalize_answer(CORPUS[q["support"][-1]]["text"]) for a in q["answers"]), q


# -- BM25 -------------------------------------------------------------------------------------------------
def test_bm25_matches_the_formula_on_a_tiny_corpus() -> None:
    docs = ["red apple", "green apple apple", "blue sky"]
    index = BM25Index(docs, k1=1.2, b=0.75)
    avgdl = 7 / 3  # lengths 2, 3, 2
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    expected = [idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl)) for tf, dl in ((1, 2), (2, 3))]
    scores = index.scores("apple")
    assert scores[:2] == pytest.approx(expected) and scores[2] == 0.0
    assert [i for i, _ in index.search("apple")] == [1, 0]
    assert index.search("nothing here") == []
    assert [i for i, _ in BM25Index(["x y", "x y"]).search("x")] == [0, 1]  # ties by document order


# -- env episodes -----------------------------------------------------------------------------------------
def test_single_hop_episode_wins() -> None:
    env = make_env("Search")
    q = _first("single", "What is the capital of France")
    obs, info = env.reset(seed=0, options={"question_id": q["id"]})
    assert type(env).action_format == "raw" and q["question"] in obs
    obs, r, term, trunc, info = check_step(
        env.step(f"<think>look it up</think><search>{q['question']}</search>"), valid=True
    )
    assert obs.startswith("<information>Doc 1(Title: France)") and r == 0.0 and not term
    obs, r, term, trunc, info = check_step(env.step("<think>found</think><answer> paris </answer>"), valid=True)
    assert (r, term, info["won"], info["f1"]) == (1.0, True, True, 1.0)


def test_multi_hop_needs_two_searches() -> None:
    q = _first("multi", "capital of the country where Albert Einstein was born")
    env = SearchEnv(topk=3, max_turns=4)
    env.reset(options={"question_id": q["id"]})
    first, *_ = check_step(env.step(f"<search>{q['question']}</search>"), valid=True)
    assert "Ulm, Germany" in first and "Berlin" not in first
    second, *_ = check_step(env.step("<search>Germany capital</search>"), valid=True)
    assert "Its capital is Berlin" in second
    _, r, term, _, info = check_step(env.step("<answer>Berlin</answer>"), valid=True)
    assert r == 1.0 and term and info["won"]


def test_every_multi_hop_answer_is_missing_from_the_first_search() -> None:
    env = SearchEnv()
    for q in [q for q in QUESTIONS.values() if q["type"] == "multi"][:60]:
        info = normalize_answer(env.search(q["question"]))
        assert not any(f" {normalize_answer(a)} " in f" {info} " for a in q["answers"]), q["question"]


def test_wrong_answer_scores_zero_with_partial_f1() -> None:
    env = SearchEnv()
    env.reset(options={"question": "Who wrote Hamlet?", "answers": ["William Shakespeare"]})
    _, r, term, _, info = check_step(env.step("<answer>Walter Shakespeare</answer>"), valid=True)
    assert r == 0.0 and term and not info["won"] and info["f1"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "bad", [None, "", "I think it is Paris", "<search></search>", "<answer>Paris", "<action>Paris</action>", 42]
)
def test_bad_responses_are_invalid(bad: object) -> None:
    env = SearchEnv(max_turns=3)
    env.reset(seed=1)
    obs, r, term, trunc, _ = check_step(env.step(bad), valid=False)  # type: ignore[arg-type]
    assert "previous action is invalid" in obs and r == 0.0 and not term and not trunc


def test_first_tag_wins_and_turn_limit_truncates() -> None:
    env = SearchEnv(max_turns=2)
    env.reset(options={"question": "What is the capital of Peru?", "answers": ["Lima"]})
    obs, _, term, trunc, info = check_step(env.step("<search>Peru</search> <answer>Lima</answer>"), valid=True)
    assert info["query"] == "Peru" and not term and not trunc
    _, r, term, trunc, _ = check_step(env.step("<search>Peru capital</search>"), valid=True)
    assert trunc and not term and r == 0.0


def test_seeded_question_choice_and_type_filter() -> None:
    a, b = SearchEnv(question_type="multi"), SearchEnv(question_type="multi")
    assert a.reset(seed=4)[0] == b.reset(seed=4)[0]
    assert QUESTIONS[a.question_id]["type"] == "multi"
    assert len({SearchEnv(question_type="single").reset(seed=s)[0] for s in range(8)}) > 4
    with pytest.raises(ValueError):
        SearchEnv(question_type="hard")


# -- dense retrieval ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("use_faiss", [False, True])
def test_dense_retrieval(use_faiss: bool) -> None:
    if use_faiss:
        pytest.importorskip("faiss")
    embed = HashingEmbedder(dim=1024)
    retriever = DenseRetriever(embed, use_faiss=use_faiss)
    assert retriever.uses_faiss is use_faiss
    hits = retriever.retrieve(["Albert Einstein theory of relativity", "chemical symbol Au gold"], topk=2)
    assert hits[0][0]["title"] == "Albert Einstein" and hits[1][0]["title"] == "Gold"
    assert hits[0][0]["score"] >= hits[0][1]["score"]


def test_dense_faiss_and_numpy_agree() -> None:
    pytest.importorskip("faiss")
    embed = HashingEmbedder(dim=256)
    queries = [q["question"] for q in list(QUESTIONS.values())[:20]]
    a = DenseRetriever(embed, use_faiss=True).retrieve(queries, 3)
    b = DenseRetriever(embed, use_faiss=False).retrieve(queries, 3)
    for ra, rb in zip(a, b, strict=True):
        assert np.allclose([h["score"] for h in ra], [h["score"] for h in rb], atol=1e-5)


def test_hashing_embedder_is_deterministic_and_normalised() -> None:
    v = HashingEmbedder(64)(["hello world", "hello world", ""])
    assert np.allclose(v[0], v[1]) and np.isclose(np.linalg.norm(v[0]), 1.0) and not v[2].any()


# -- HTTP client -------------------------------------------------------------------------------------------
def _search_r1_handler(fail_first: int = 0):  # noqa: ANN202
    """A server in Search-R1's format (documents carry only ``contents``), failing the first calls with 503."""
    retriever = BM25Retriever()
    calls = {"n": 0}

    def handle(method: str, path: str, body: bytes) -> tuple[int, object]:
        calls["n"] += 1
        if calls["n"] <= fail_first:
            return 503, {"error": "warming up"}
        if path != "/retrieve":
            return 404, {"error": "no route"}
        req = json.loads(body)
        rows = retriever.retrieve(req["queries"], req["topk"])
        return 200, {
            "result": [
                [
                    {"document": {"id": h["id"], "contents": f'"{h["title"]}"\n{h["text"]}'}, "score": h["score"]}
                    for h in row
                ]
                for row in rows
            ]
        }

    return handle


def test_client_parses_search_r1_format_and_env_uses_it() -> None:
    with FakeServer(_search_r1_handler()) as server:
        env = SearchEnv(retriever=server.url, topk=2)
        env.reset(options={"question": "What is the capital of Japan?", "answers": ["Tokyo"]})
        obs, *_ = check_step(env.step("<search>capital of Japan</search>"), valid=True)
        assert obs.startswith("<information>Doc 1(Title: Japan) Japan is a country")
        assert json.loads(server.requests[0][2]) == {"queries": ["capital of Japan"], "topk": 2, "return_scores": True}


def test_client_retries_5xx_then_succeeds() -> None:
    with FakeServer(_search_r1_handler(fail_first=2)) as server:
        hits = RetrieverClient(server.url, retries=3, backoff=0.01).retrieve(["Mount Everest"], 1)
        assert hits[0][0]["title"] == "Mount Everest" and len(server.requests) == 3


def test_client_gives_up_with_a_clear_error() -> None:
    with FakeServer(_search_r1_handler(fail_first=100)) as server:
        with pytest.raises(ServerUnavailableError, match="after 2 attempts"):
            RetrieverClient(server.url, retries=1, backoff=0.01).retrieve(["x"], 1)
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerUnavailableError, match="serve_retriever"):
        RetrieverClient(dead, retries=1, backoff=0.01, timeout=1).retrieve(["x"], 1)


def test_client_does_not_retry_client_errors() -> None:
    with FakeServer(lambda m, p, b: (422, {"error": "bad"})) as server:
        with pytest.raises(ServerRequestError, match="422"):
            RetrieverClient(server.url, retries=3, backoff=0.01).retrieve(["x"], 1)
        assert len(server.requests) == 1


def test_unknown_retriever_spec() -> None:
    with pytest.raises(ValueError):
        SearchEnv(retriever="elasticsearch")


def test_retrieve_requests_are_bounded_before_any_retrieval():
    import json

    from rllib_llm.envs.search.requests import (
        MAX_BODY_BYTES,
        MAX_QUERIES,
        MAX_QUERY_CHARS,
        RejectedRequest,
        parse_retrieve_request,
    )

    def status(body: bytes, length: str | None = None) -> int:
        with pytest.raises(RejectedRequest) as info:
            parse_retrieve_request(body, length)
        return info.value.status

    assert parse_retrieve_request(json.dumps({"queries": ["a", "b"], "topk": 500}).encode()) == (["a", "b"], 50)
    assert status(b"{}", str(MAX_BODY_BYTES + 1)) == 413  # refused from the header, before reading the body
    assert status(json.dumps({"queries": ["q"] * 300_000}).encode()) == 413  # ~2 MB
    assert status(json.dumps({"queries": ["q"] * (MAX_QUERIES + 1)}).encode()) == 422
    assert status(json.dumps({"queries": ["x" * (MAX_QUERY_CHARS + 1)]}).encode()) == 422
    assert status(json.dumps({"queries": "not a list"}).encode()) == 422
    assert status(b"not json") == 422


def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_cap():
    """A chunked upload has no Content-Length: the server read it whole before its 413 (1 GB: +1.0 GB kept,
    21 s). Now the stream stops being read one chunk past the cap."""
    import asyncio

    from rllib_llm.envs.search.requests import MAX_BODY_BYTES, RejectedRequest, read_body_capped

    consumed = []

    async def endless():
        while True:
            consumed.append(1)
            yield b"x" * 65536

    with pytest.raises(RejectedRequest) as info:
        asyncio.run(read_body_capped(endless()))
    assert info.value.status == 413 and len(consumed) == MAX_BODY_BYTES // 65536 + 1

    async def small():
        yield b'{"queries": '
        yield b'["a"]}'

    assert asyncio.run(read_body_capped(small())) == b'{"queries": ["a"]}'
