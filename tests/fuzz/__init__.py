"""Coverage-guided fuzzing of the frame decoder and the request handlers (atheris, libFuzzer).

harness.py       the in-process request path and its invariants: `TestOneInput(data)`, importable without atheris
plausible.py     valid request bodies for every API and version the server serves, built from kcoord's own messages
fuzz_requests.py the atheris entry point: instruments kcoord's Python modules, then fuzzes `TestOneInput`
make_seeds.py    writes the seed corpus (corpus/fuzz_requests/) from plausible.py
corpus/          the corpus kept in the repo; crashes/ holds inputs of open bugs (see its README)

tests/wire/test_fuzz.py replays the corpus, runs the fuzzer for a time budget, and drives `kcoord serve` under an
address-space limit with the corpus and Hypothesis-made frames.
"""
