"""The ``predict`` command: which signals, available before or without generating, predict a study's
utility and answer quality (Tian, Ganguly & Macdonald, ECIR 2026), over a finished study folder.

:func:`~pyterrier_utility.study.prediction.run_prediction` computes the signals and their correlations
with U, the absolute gain P_k - P_0 and P_k; this command writes them into the folder and prints the
summary. No answer is generated: no reader is built.

Example::

    from pyterrier_utility.commands import predicting as prediction
    found = prediction.run_prediction('results/study')
    prediction.save_prediction(found, 'results/study')
"""
import json
import time
from pathlib import Path
from typing import List, Union

from ..prediction.parameters import PredictionParameters
from ..report.figures import pyplot
from ..report.html import write_report
from ..report.prediction_report import HEATMAP, prediction_heatmap
from ..schema import FRAME_FILES, PREDICTION_FILES, REPORT_FILE, SETTINGS_FILE
from ..study.meta_evaluation import grouped, summary
from ..study.output import lock_folder
from ..study.prediction import Prediction, run_prediction
from ..vocabulary import PREDICTION_TARGETS


def save_prediction(found: Prediction, out: Union[str, Path]) -> List[str]:
    """Writes ``signals.csv``, ``prediction.csv`` and the heatmap (:data:`.prediction_report.HEATMAP`)
    into ``out``, records the signals, their parameters, those left out of each system and why, and
    each system's combination in its ``settings.json`` (under ``prediction``) and writes the study's
    ``report.html`` again with them; returns the file names."""
    out = Path(out)
    with lock_folder(out):
        found.signals.to_csv(out / PREDICTION_FILES['signals'], index=False)
        found.prediction.to_csv(out / PREDICTION_FILES['prediction'], index=False)
        record = json.loads((out / SETTINGS_FILE).read_text())
        record['prediction'] = dict(found.settings.as_dict(), signals=found.definitions,
                                    **grouped(found.left_out, found.combined),
                                    targets=dict(zip(PREDICTION_TARGETS, ('(P_k - P_0) / P_0', 'P_k - P_0', 'P_k'))))
        (out / SETTINGS_FILE).write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + '\n')
        written = list(PREDICTION_FILES.values()) + [SETTINGS_FILE]
        if len(found.prediction):
            pyplot().close(prediction_heatmap(found.prediction, out / HEATMAP))
            written.append(HEATMAP)
        if (out / FRAME_FILES['per_query']).is_file():  # a study's folder: its page gains the section
            write_report(out)
            written.append(REPORT_FILE)
    return sorted(written)


def predict(out: Union[str, Path], settings: PredictionParameters = PredictionParameters()) -> Prediction:
    """The ``predict`` command: runs, saves and prints the summary."""
    start = time.time()
    with lock_folder(Path(out)):
        found = run_prediction(out, settings)
        written = save_prediction(found, out)
    print(summary(found.prediction))
    print(f'written to {out}/ ({", ".join(written)}) in {time.time() - start:.0f} s; 0 answers generated')
    return found
