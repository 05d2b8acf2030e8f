"""The modern-group base's contract (kcoord/groups/modern.py): ModernGroup is a declared abstract base, as Kafka's
ModernGroup<T>. Each concrete modern type (the coordinator's group types below it) implements every abstract method,
a type that leaves one out cannot be made, the base declares every attribute its own code reads (so a type knows
what it must provide), each type made by the coordinator has them all, and the logic the base holds is not copied
back into a type (a fix to static-member fencing is made once)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from abc import abstractmethod

import pytest

from kcoord.config import GroupConfig
from kcoord.coordinator import GROUP_TYPES, Coordinator
from kcoord.groups import modern
from kcoord.groups.base import GroupBase
from kcoord.groups.classic import ClassicGroup
from kcoord.groups.modern import ModernGroup

MODERN_TYPES = [cls for cls in GROUP_TYPES if issubclass(cls, ModernGroup)]
BASES = (ModernGroup, GroupBase)  # what ModernGroup's code may rely on: its own declarations and GroupBase's

# The shared logic: a type provides hooks (the abstract methods, `released`, `reconciled`) and may extend a step
# (calling the base's), but does not carry its own copy of these.
SHARED = ("find_member", "instance_error", "member_or_holder", "static_holder", "answered_first", "member_leave",
          "leave", "replace_static_member", "forget_member", "update_member_fields", "reconcile", "arm_session",
          "on_member_timer", "load_current", "arm_loaded", "record_keys", "replay", "note", "state_name")


def coordinator() -> Coordinator:
    return Coordinator(GroupConfig(group_coordinator_rebalance_protocols="classic,consumer,connect"))


def test_the_consumer_and_connect_types_are_the_modern_types() -> None:
    assert {cls.GROUP_TYPE for cls in MODERN_TYPES} == {"consumer", "connect"}
    assert not issubclass(ClassicGroup, ModernGroup)


def test_the_base_declares_its_hooks_abstract() -> None:
    assert {"fail", "leave_response", "heartbeat_too_large", "session_timeout_ms", "fence", "leave_group_member",
            "hand_over", "step_inputs", "stage_member_metadata", "stage_target_member",
            "stage_current_assignment"} <= ModernGroup.__abstractmethods__
    with pytest.raises(TypeError, match="abstract"):
        ModernGroup("g", coordinator().group_context())


@pytest.mark.parametrize("cls", MODERN_TYPES, ids=lambda c: c.GROUP_TYPE)
def test_each_modern_type_implements_every_abstract_method(cls) -> None:
    assert not cls.__abstractmethods__, f"{cls.__name__} leaves {sorted(cls.__abstractmethods__)} unimplemented"
    for name in ModernGroup.__abstractmethods__:
        assert not getattr(getattr(cls, name), "__isabstractmethod__", False), name
    g = coordinator().new_group(cls, "g")
    assert type(g) is cls


@pytest.mark.parametrize("cls", MODERN_TYPES, ids=lambda c: c.GROUP_TYPE)
@pytest.mark.parametrize("hook", sorted(ModernGroup.__abstractmethods__))
def test_a_type_that_leaves_a_hook_out_cannot_be_made(cls, hook: str) -> None:
    # The compiled core (a cdef class) is the type's other base: its allocation must still refuse an abstract class.
    def left_out(self, *args):
        raise AssertionError("never called")

    partial = type(f"Partial{cls.__name__}", (cls,), {hook: abstractmethod(left_out)})
    with pytest.raises(TypeError, match=hook):
        coordinator().new_group(partial, "g")


def declared(bases=BASES) -> set[str]:
    """Every name the bases declare: annotated attributes, methods, properties and class attributes."""
    names: set[str] = set()
    for c in bases:
        names.update(vars(c))
        names.update(vars(c).get("__annotations__", {}))
    return names


def attributes_read(source: str, class_name: str) -> set[str]:
    """The `self.<name>` the methods of `class_name` in `source` read or write."""
    tree = ast.parse(textwrap.dedent(source))
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name)
    return {n.attr for n in ast.walk(cls)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}


def test_the_base_declares_every_attribute_its_code_reads() -> None:
    used = attributes_read(inspect.getsource(modern), "ModernGroup")
    missing = sorted(used - declared())
    assert not missing, f"ModernGroup reads attributes it does not declare: {missing}"


def test_the_declaration_check_sees_an_undeclared_attribute() -> None:
    # The check itself can fail: a base method reading what no base declares.
    source = "class ModernGroup:\n    def f(self):\n        return self.members, self.catalogue\n"
    assert attributes_read(source, "ModernGroup") - declared() == {"catalogue"}


@pytest.mark.parametrize("cls", MODERN_TYPES, ids=lambda c: c.GROUP_TYPE)
def test_each_type_made_by_the_coordinator_has_every_declared_attribute(cls) -> None:
    g = coordinator().new_group(cls, "g")
    for c in BASES:
        for name in vars(c).get("__annotations__", {}):
            assert hasattr(g, name), f"{cls.__name__} does not provide {name}, which {c.__name__} declares"


@pytest.mark.parametrize("cls", MODERN_TYPES, ids=lambda c: c.GROUP_TYPE)
def test_the_shared_logic_is_not_copied_into_a_type(cls) -> None:
    copied = [name for name in SHARED if name in vars(cls)]
    assert not copied, f"{cls.__name__} defines its own {copied}: change ModernGroup (or a hook) instead"
