"""verlsweep.command.overrides: the verl subtree as command-line overrides. What Hydra's own parser reads
back from format_value must be the value that was composed, whatever it looks like."""
from __future__ import annotations

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from verlsweep.command.overrides import OTHER_SECTION, flatten, format_value, ordered, quoted, section_name

PARSER = OverridesParser.create()


def parsed(text: str):
    return PARSER.parse_override(f"k={text}").value()


@pytest.mark.parametrize("value", [
    None, True, False, 0, -3, 0.9, 1e-06, "plain", "path/to/model.safetensors", "true", "null", "1.5", "0.9",
    "has space", "it's", "", "${not.an.interpolation}", "[1,2]",
    # backslashes: literal inside, doubled only before a quote or at the end (Hydra's quoted-value rule)
    "a\\b", "a\\\\b", "C:\\dir\\", "a\\'b",
    [1, 2.5, "x"], {"a": 1, "b": "two words"}, [[1, 2], [3]],
])
def test_hydra_reads_back_exactly_the_value_written(value):
    assert parsed(format_value(value)) == value


def test_strings_that_look_like_other_types_are_quoted():
    for text in ("true", "False", "null", "nan", "-inf", "12", "0.5"):
        assert format_value(text) == quoted(text)
    assert format_value("model.safetensors") == "model.safetensors"


def test_a_value_hydra_cannot_express_is_refused_by_type():
    with pytest.raises(TypeError, match="cannot express set"):
        format_value({1, 2})


def test_flatten_gives_resolved_dotted_leaves_keeps_lists_whole_and_drops_empty_mappings():
    node = OmegaConf.create({"a": {"b": 1, "c": "${a.b}", "d": [1, 2], "e": {}}, "f": None})
    assert flatten(node) == {"a.b": 1, "a.c": 1, "a.d": [1, 2], "f": None}


def test_keys_are_grouped_in_verls_script_order_keeping_their_order_within_a_section():
    keys = ["trainer.x", "ray_kwargs.y", "actor_rollout_ref.rollout.b", "data.z", "actor_rollout_ref.rollout.a",
            "actor_rollout_ref.actor.c"]
    assert ordered(keys) == ["data.z", "actor_rollout_ref.actor.c", "actor_rollout_ref.rollout.b",
                             "actor_rollout_ref.rollout.a", "trainer.x", "ray_kwargs.y"]
    assert [section_name(k) for k in ("data.z", "actor_rollout_ref.ref.q", "ray_kwargs.y")] == \
        ["DATA", "REF", OTHER_SECTION]
