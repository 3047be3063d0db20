"""flux run's job options: passed on in flux's spellings, checked where they can be."""

from __future__ import annotations

import pytest

from fluxhop.errors import InputError
from fluxhop.flux.jobopts import JobOptions


def test_words_in_flux_run_spellings():
    options = JobOptions(
        setopt=("cpu-affinity=per-task", "pmi=pmix", "verbose"),
        setattr=("system.queue=debug", "user.tag=a b"),
        time_limit="90",
        exclusive=True,
        flux_args="--requires='host:a b' -q batch",
    )
    assert options.words() == [
        "-o", "cpu-affinity=per-task", "-o", "pmi=pmix", "-o", "verbose",
        "-S", "system.queue=debug", "-S", "user.tag=a b",
        "-t", "90", "--exclusive", "--requires=host:a b", "-q", "batch",
    ]  # fmt: skip
    assert JobOptions().words() == []


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (JobOptions(setopt=("=x",)), "-o/--setopt '=x': write it as KEY"),
        (JobOptions(setattr=("a b=1",)), "-S/--setattr 'a b=1'"),
        (JobOptions(time_limit="1y"), "-t/--time-limit: invalid duration '1y'"),
        (JobOptions(flux_args="'open"), "--flux-args"),
    ],
)
def test_what_cannot_be_right_is_one_line(options, says):
    with pytest.raises(InputError, match=says.replace("(", r"\(")) as err:
        options.words()
    assert "\n" not in str(err.value)
