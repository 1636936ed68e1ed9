from rllib_llm.env_connectors.action_parsing import parse_action, strip_think


def test_parses_inner_text_of_last_action_block():
    assert parse_action("<think>go up</think><action> + </action>") == "+"
    assert parse_action("<action>-</action> then <action>+</action>") == "+"
    assert parse_action("<ACTION>go north</ACTION>") == "go north"


def test_missing_unclosed_or_empty_action_is_none():
    assert parse_action("I would move +") is None
    assert parse_action("<action>+") is None
    assert parse_action("<action>   </action>") is None
    assert parse_action("") is None


def test_strip_think():
    assert strip_think("<think>a\nb</think> <action>x</action>") == "<action>x</action>"
