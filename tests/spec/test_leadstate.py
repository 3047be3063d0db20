"""--lead-state, the flag for spec.leadState (spec/leadstate.py parse_lead_state):
each word is the field a file would set; a word it does not know is one line
naming the flag and what it takes."""

from __future__ import annotations

import pytest

from fluxhop.errors import InputError
from fluxhop.spec.leadstate import LeadState, parse_lead_state


@pytest.mark.parametrize(
    ("value", "state"),
    [
        ("emptyDir", {"emptyDir": True}),
        ("emptydir", {"emptyDir": True}),
        ("claim", {}),  # a claim fluxhop makes, of the default StorageClass
        ("claim=team-state", {"claimName": "team-state"}),
        ("class=fast,size=5Gi", {"storageClassName": "fast", "size": "5Gi"}),
        ("claim, class=fast, checkpoint=5", {"storageClassName": "fast", "checkpointSeconds": 5}),
        ("Claim=mine,Checkpoint=2", {"claimName": "mine", "checkpointSeconds": 2}),
    ],
)
def test_each_word_is_the_field_a_file_would_set(value, state):
    assert parse_lead_state(value) == state
    LeadState.model_validate(state)  # and the model takes it


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("", "an empty item is not one of emptyDir, claim"),
        ("pvc", "pvc is not one of emptyDir, claim, claim=NAME"),
        ("size=", "size= is not one of"),
        ("size", "size is not one of"),
        ("emptyDir,size=1Gi", "emptyDir takes nothing else"),
        ("claim,claim=mine", "claim is given twice"),
        ("size=1Gi,size=2Gi", "size is given twice"),
        ("claim=mine,size=5Gi", "class and size are of the claim fluxhop makes"),
        ("claim=mine,class=fast", "claim=NAME is one you made; drop one"),
    ],
)
def test_a_word_it_does_not_know_is_one_line_naming_the_flag(value, said):
    with pytest.raises(InputError) as err:
        parse_lead_state(value)
    message = str(err.value)
    assert message.startswith(f"--lead-state {value!r}: ") and said in message
    assert "\n" not in message
    if "is not one of" in said:
        assert "e.g. --lead-state emptyDir" in message


def test_a_negative_checkpoint_is_the_models_to_refuse_as_too_small():
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        LeadState.model_validate(parse_lead_state("checkpoint=-5"))
