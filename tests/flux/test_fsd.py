"""RFC 23 Flux Standard Duration."""

from __future__ import annotations

import math

import pytest

from fluxhop.errors import DurationError
from fluxhop.flux import fsd


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("30s", 30),
        ("2m", 120),
        ("1.5h", 5400),
        ("2d", 172800),
        ("0", 0),
        ("5", 5),
        ("0.5s", 0.5),
        ("100ms", 0.1),
        ("inf", math.inf),
    ],
)
def test_parse(text, seconds):
    assert fsd.parse(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "5x", "-1s", "1 h", "one"])
def test_parse_rejects(text):
    with pytest.raises(DurationError):
        fsd.parse(text)


def test_time_limit_bare_number_is_minutes():
    assert fsd.parse_time_limit("2") == 120
    assert fsd.parse_time_limit("30s") == 30


@pytest.mark.parametrize(
    "seconds, text", [(30, "30s"), (120, "2m"), (3600, "1h"), (0, "0s"), (1.5, "1.5s")]
)
def test_format_round_trips(seconds, text):
    assert fsd.format_fsd(seconds) == text
    assert fsd.parse(text) == seconds
