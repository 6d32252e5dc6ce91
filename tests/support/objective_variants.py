"""The registry's objectives with every option choice that changes the packers they take: what the
tests parametrized over the registry run (no hand-written lists)."""

from objcli.errors import ObjcliError
from objcli.objectives import REGISTRY
from objcli.options import option_fields


def variants():
    """(objective, option values) for every choice that changes which packers an objective takes."""
    for name in REGISTRY.names():
        options_type = REGISTRY.named(name).options_type
        seen = {REGISTRY.named(name).packers(options_type())}
        yield name, {}
        for f in option_fields(options_type):
            for choice in f.metadata["choices"] or ():
                try:
                    options = options_type(**{f.name: choice})
                except ObjcliError:  # a choice that needs another option first (--sentences needs --pairs ict)
                    continue
                packers = REGISTRY.named(name).packers(options)
                if packers not in seen:
                    seen.add(packers)
                    yield name, {f.name: choice}
