"""A small study run as its own process by test_resume.py: ``python study_job.py OUT DELAY``.

Rel and NRel on four Cranfield queries at k = 1, 2, 3, two samples each, answered by a slow
deterministic backend that logs every prompt it generates to OUT/generated.log.
"""
import hashlib
import sys
import time
from pathlib import Path

from pyterrier_rag.backend import Backend, BackendOutput

import pyterrier_utility as pu
from pyterrier_utility import study as ex


class SlowBackend(Backend):
    supports_seeds = True
    batch_size = 4

    def __init__(self, log: Path, delay: float):
        super().__init__('slow')
        self.log = log
        self.delay = delay

    def generate(self, inps, *, seeds=None, max_new_tokens=None, stop_sequences=None, **kw):
        time.sleep(self.delay * len(inps))
        outs = [hashlib.sha256(f'{p}|{s}'.encode()).hexdigest()[:12] + f' answer {p.count("Context ")}'
                for p, s in zip(inps, seeds)]
        with open(self.log, 'a') as f:
            f.writelines(f'{hashlib.sha256(p.encode()).hexdigest()} {s}\n' for p, s in zip(inps, seeds))
        return [BackendOutput(text=o) for o in outs]


def main(out: str, delay: float) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    d = pu.datasets.cranfield()
    qrels = d.get_qrels()
    topics = pu.datasets.answerable_topics(d.get_topics(), qrels, 2).head(4)
    systems = {'Rel': pu.OracleSampler(qrels, d.texts, labels=2, num_results=3),
               'NRel': pu.OracleSampler(qrels, d.texts, relevant=False, fill_unjudged=True, num_results=3)}
    backend = pu.GenerationCache(SlowBackend(out / 'generated.log', delay), out / 'generations.sqlite')
    reader = pu.Reader(backend, n_samples=2)
    results = ex.run_study(topics, qrels, systems, reader, d.texts, ks=[1, 2, 3], label_sets=[2],
                           bertscore='minilm', verbose=False)
    pu.report.write_study(results, out)


if __name__ == '__main__':
    main(sys.argv[1], float(sys.argv[2]))
