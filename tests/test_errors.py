"""The exception hierarchy: one root, one line."""

from __future__ import annotations

import pytest

from fluxhop import errors


def test_every_error_derives_from_the_root():
    for name in dir(errors):
        value = getattr(errors, name)
        if (
            isinstance(value, type)
            and issubclass(value, Exception)
            and not issubclass(value, Warning)
        ):
            assert issubclass(value, errors.FluxhopError)


def test_messages_are_folded_onto_one_line():
    err = errors.InvalidJobspec("first line\n  second line\tand more")
    assert str(err) == "first line second line and more"


@pytest.mark.parametrize(
    "cls", [errors.HostlistError, errors.InvalidResourceSet, errors.CurveCertError]
)
def test_input_errors_are_value_errors(cls):
    assert issubclass(cls, ValueError)
    assert cls("x").exit_code == 2
