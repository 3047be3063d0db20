"""``flux run``/``flux submit`` job options in Flux's own spellings, checked
where they can be and passed on word for word:

* ``-o/--setopt KEY[=VAL]`` and ``-S/--setattr KEY[=VAL]``: a key is required
  (flux reads a missing ``=VAL`` as ``1``/true, so it is kept as written);
* ``-t/--time-limit``: ``flux run -t``'s rule (a bare number is minutes);
* ``--exclusive``;
* ``--flux-args "..."``: anything else, split as a shell would and appended.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from fluxhop.arguments import check_fields
from fluxhop.errors import InputError
from fluxhop.flux.fsd import parse_time_limit

__all__ = ["JobOptions"]


def _key_value(flag: str, item: str) -> str:
    key, _, _ = item.partition("=")
    if not key or any(c.isspace() for c in key):
        raise InputError(
            f"{flag} {item!r}: write it as KEY[=VALUE] (e.g. {flag} cpu-affinity=per-task)"
        )
    return item


@dataclass(frozen=True)
class JobOptions:
    setopt: tuple[str, ...] = ()
    setattr: tuple[str, ...] = ()
    time_limit: str | None = None
    exclusive: bool = False
    flux_args: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)

    def words(self) -> list[str]:
        """The options as ``flux run`` arguments; a one-line error names the
        flag whose value cannot be right."""
        words: list[str] = []
        for item in self.setopt:
            words += ["-o", _key_value("-o/--setopt", item)]
        for item in self.setattr:
            words += ["-S", _key_value("-S/--setattr", item)]
        if self.time_limit is not None:
            try:
                parse_time_limit(self.time_limit)
            except InputError as err:
                raise InputError(f"-t/--time-limit: {err}") from None
            words += ["-t", self.time_limit]
        if self.exclusive:
            words.append("--exclusive")
        if self.flux_args:
            try:
                words += shlex.split(self.flux_args)
            except ValueError as err:
                raise InputError(f"--flux-args {self.flux_args!r}: {err}") from None
        return words
