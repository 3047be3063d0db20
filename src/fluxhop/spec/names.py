"""Kubernetes names: DNS-1123 checks and Docker-style random names.

The word lists hold only ordinary words: no personal names.
"""

from __future__ import annotations

import random
import re

from fluxhop.errors import shown

__all__ = ["check_dns_label", "dns_label_problem", "random_name"]

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

ADJECTIVES = (
    "agile",
    "amber",
    "ancient",
    "bold",
    "brave",
    "breezy",
    "bright",
    "brisk",
    "calm",
    "clever",
    "cosmic",
    "crisp",
    "curious",
    "daring",
    "dusty",
    "eager",
    "electric",
    "fancy",
    "fast",
    "fluffy",
    "frosty",
    "gentle",
    "giant",
    "glowing",
    "golden",
    "happy",
    "hidden",
    "humble",
    "icy",
    "jolly",
    "keen",
    "lively",
    "lucky",
    "mellow",
    "mighty",
    "misty",
    "nimble",
    "noble",
    "parallel",
    "patient",
    "plucky",
    "polite",
    "quantum",
    "quick",
    "quiet",
    "rapid",
    "rusty",
    "scalable",
    "shiny",
    "silent",
    "sleepy",
    "snappy",
    "sparkly",
    "speedy",
    "spry",
    "steady",
    "sunny",
    "swift",
    "tidy",
    "vivid",
    "wandering",
    "witty",
    "wobbly",
    "zesty",
)

NOUNS = (
    "acorn",
    "anchor",
    "badger",
    "beacon",
    "bison",
    "breeze",
    "cactus",
    "canyon",
    "capybara",
    "cluster",
    "comet",
    "compiler",
    "coral",
    "crane",
    "dolphin",
    "dune",
    "ember",
    "falcon",
    "fern",
    "fjord",
    "flux",
    "galaxy",
    "geyser",
    "glacier",
    "harbor",
    "hedgehog",
    "heron",
    "kernel",
    "lagoon",
    "lantern",
    "lemur",
    "lynx",
    "maple",
    "meadow",
    "meteor",
    "narwhal",
    "nebula",
    "node",
    "otter",
    "panda",
    "pebble",
    "penguin",
    "pinecone",
    "pixel",
    "quasar",
    "rabbit",
    "raven",
    "reef",
    "river",
    "rocket",
    "scheduler",
    "sparrow",
    "squid",
    "summit",
    "teapot",
    "thunder",
    "tortoise",
    "tundra",
    "velvet",
    "volcano",
    "waffle",
    "walrus",
    "willow",
    "yak",
)


def dns_label_problem(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 DNS label, or None when it is one."""
    if not value:
        return "must not be empty"
    if len(value) > 63:
        return f"is {len(value)} characters; the limit is 63"
    if not _DNS_LABEL.fullmatch(value):
        return (
            "must be lower-case letters, digits and '-', starting and ending with a letter or digit"
        )
    return None


def check_dns_label(value: str, what: str) -> str:
    problem = dns_label_problem(value)
    if problem:
        raise ValueError(f"{what} {shown(value)} {problem}")
    return value


def random_name(rng: random.Random | None = None) -> str:
    """A random ``adjective-noun`` name, DNS-1123 safe."""
    chooser = rng or random.SystemRandom()
    return f"{chooser.choice(ADJECTIVES)}-{chooser.choice(NOUNS)}"
