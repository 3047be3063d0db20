"""Rendered YAML reads back as the same strings with kubectl's YAML reader
too: PyYAML writes `y`, `1e3` or `0o17` plain, go-yaml v2 (kubectl) reads them
as a bool or a number, so fluxhop quotes them."""

from __future__ import annotations

import pytest
import yaml

from fluxhop.documents import go_reads_as_string
from fluxhop.render.output import dump_yaml

WORDS = ["y", "Y", "n", "yes", "on", "off", "1e3", "08", "0o17", "0x1F", "1_000", ".5", "+1",
         "null", "~", "", "true", "2", "plain", "a b", "-v", "1.2.3", "2026-01-01"]  # fmt: skip


def plain_strings(text: str) -> list[str]:
    """Every scalar written without quotes that PyYAML reads as a string."""
    found = []
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.ScalarEvent) and event.style is None and event.implicit[0]:
            resolved = yaml.SafeLoader.resolve(
                yaml.SafeLoader(""), yaml.ScalarNode, event.value, (True, False)
            )
            if resolved == "tag:yaml.org,2002:str":
                found.append(event.value)
    return found


@pytest.mark.parametrize("word", WORDS)
def test_a_word_reads_back_as_itself_in_go_yaml_too(word):
    text = dump_yaml([{"env": [{"name": "A", "value": word}], "args": [word]}])
    assert yaml.safe_load(text) == {"env": [{"name": "A", "value": word}], "args": [word]}
    for plain in plain_strings(text):
        assert go_reads_as_string(plain), (plain, text)


def test_the_check_can_fail():
    assert not go_reads_as_string("y") and not go_reads_as_string("1e3")
    assert "y" in plain_strings(yaml.safe_dump({"a": "y"}))  # PyYAML alone leaves it plain
