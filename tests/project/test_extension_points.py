"""One way to extend objcli (issue 86): every extension point is an ``options.Registry`` that its package
fills by importing its modules, and the registry refuses a name twice, spells aliases, and says the close
names of one it does not know."""

from __future__ import annotations

import pytest

from objcli.errors import ObjcliError
from objcli.formats import FORMATS
from objcli.inputs.text_formats import TEXT_INPUTS
from objcli.inputs.token_inputs import TOKEN_INPUTS
from objcli.objectives import REGISTRY
from objcli.options import Registry
from objcli.packing import PACKERS
from objcli.stores import STORE_KINDS


@pytest.mark.parametrize("registry", [REGISTRY, STORE_KINDS, TOKEN_INPUTS, TEXT_INPUTS, FORMATS, PACKERS])
def test_every_extension_point_is_a_registry_its_modules_fill(registry):
    assert isinstance(registry, Registry) and len(registry) >= 4
    for name, thing in registry.items():
        assert thing.name == name and registry.named(name) is thing
        module = thing.__module__ if isinstance(thing, type) else type(thing).__module__
        assert module.startswith("objcli.")  # registered where it is defined


def test_a_registry_keeps_one_thing_a_name_and_says_what_it_does_not_know():
    things = Registry("widget", order=lambda cls: cls.name)

    @things.register("round", "circle")
    class Round:
        pass

    @things.register("flat")
    class Flat:
        pass

    assert things.names() == ["flat", "round"] and things.named("circle") is Round and Round.name == "round"
    with pytest.raises(ValueError, match="registered twice"):
        things.register("circle")(type("Other", (), {}))
    with pytest.raises(ObjcliError, match="unknown widget 'rund'; did you mean round.*known widgets: flat, round"):
        things.named("rund")
    things.unregister("round")
    assert things.names() == ["flat"] and "circle" not in things.aliases
