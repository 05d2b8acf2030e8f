"""The compiled deadline heap against a plain model: keyed timers replaced, never duplicated."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord._core._members import DeadlineHeap

ops = st.lists(st.tuples(st.sampled_from(["new", "schedule", "cancel", "pop", "release"]),
                         st.integers(0, 40), st.integers(0, 1000)), max_size=300)


@settings(max_examples=400, deadline=None)
@given(ops)
def test_heap_matches_model(seq) -> None:
    heap = DeadlineHeap(capacity=4)
    keys: list[int] = []
    model: dict[int, int] = {}
    for op, i, t in seq:
        if op == "new" or not keys:
            k = heap.new_key()
            assert k not in keys
            keys.append(k)
        elif op == "schedule":
            k = keys[i % len(keys)]
            heap.schedule(k, t)
            model[k] = t
        elif op == "cancel":
            k = keys[i % len(keys)]
            assert heap.cancel(k) == (k in model)
            model.pop(k, None)
        elif op == "release":
            k = keys.pop(i % len(keys))
            heap.release_key(k)
            model.pop(k, None)
        else:
            due = sorted((d, k) for k, d in model.items() if d <= t)
            assert heap.pop_expired(t) == [k for _, k in due]
            for _, k in due:
                del model[k]
        assert len(heap) == len(model)
        assert heap.next_deadline() == (min(model.values()) if model else None)
        assert heap.keys_in_use == len(keys)


def test_rescheduling_moves_instead_of_duplicating() -> None:
    heap = DeadlineHeap()
    k = heap.new_key()
    for d in (50, 10, 99, 30):
        heap.schedule(k, d)
    assert len(heap) == 1 and heap.deadline_of(k) == 30
    assert heap.pop_expired(100) == [k] and heap.pop_expired(1000) == []
