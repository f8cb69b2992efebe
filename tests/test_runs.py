"""Run files: TREC's six columns or a PyTerrier frame by header, and errors naming file and line."""
import warnings

import pandas as pd
import pytest

from pyterrier_utility.contexts.runs import read_run
from pyterrier_utility.errors import FrameError


def expected(rows):
    return pd.DataFrame(rows, columns=['qid', 'docno', 'score', 'rank'])


def test_a_trec_run_is_ranked_by_score_ties_in_file_order(tmp_path):
    (tmp_path / 'run.txt').write_text('2 Q0 d9 1 1.5 r\n1 Q0 d1 0 3 r\n\n1 Q0 d2 1 7 r\n1 Q0 d3 2 3 r\n')
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        run = read_run(tmp_path / 'run.txt')
    pd.testing.assert_frame_equal(run, expected([('1', 'd2', 7.0, 0), ('1', 'd1', 3.0, 1), ('1', 'd3', 3.0, 2),
                                                 ('2', 'd9', 1.5, 0)]))


@pytest.mark.parametrize('text,message', [
    ('1 d1 0 2.0\n', r'run\.txt, line 1: 4 fields .*expected the six of a TREC run: qid Q0 docno rank score tag'),
    ('1 Q0 d1 0 2.0 r\n1 Q0 d2 1 r\n', r'run\.txt, line 2: 5 fields'),
    ('1 Q0 d1 0 2.0 r\n1 Q0 d2 x 1.0 r\n', r"run\.txt, line 2: rank 'x' is not an integer"),
    ('1 Q0 d1 0 high r\n', r"run\.txt, line 1: score 'high' is not a number"),
    ('\n\n', r'run\.txt: no lines'),
])
def test_anything_but_six_trec_columns_names_file_and_line(tmp_path, text, message):
    (tmp_path / 'run.txt').write_text(text)
    with pytest.raises(FrameError, match=message):
        read_run(tmp_path / 'run.txt')


def test_a_nan_score_with_ranks_is_ordered_by_rank_and_named(tmp_path):
    (tmp_path / 'run.txt').write_text('1 Q0 d1 0 nan r\n1 Q0 d2 1 0.5 r\n2 Q0 d3 0 2 r\n2 Q0 d4 1 1 r\n')
    with pytest.warns(UserWarning, match=r'scores missing or not numbers; these queries are ordered by rank: qid 1$'):
        run = read_run(tmp_path / 'run.txt')
    pd.testing.assert_frame_equal(run, expected([('1', 'd1', 0.0, 0), ('1', 'd2', -1.0, 1), ('2', 'd3', 2.0, 0),
                                                 ('2', 'd4', 1.0, 1)]))


@pytest.mark.parametrize('name', ['run.csv', 'run.parquet'])
def test_a_pyterrier_frame_is_read_by_its_header(tmp_path, name):
    frame = pd.DataFrame({'qid': ['1', '1'], 'docno': ['a', 'b'], 'score': [1.0, 2.0], 'rank': [1, 0]})
    if name.endswith('.parquet'):
        pytest.importorskip('pyarrow')
        frame.to_parquet(tmp_path / name)
    else:
        frame.to_csv(tmp_path / name, index=False)
    pd.testing.assert_frame_equal(read_run(tmp_path / name), expected([('1', 'b', 2.0, 0), ('1', 'a', 1.0, 1)]))


def test_a_frame_without_the_columns_or_with_bad_scores_is_named(tmp_path):
    (tmp_path / 'run.csv').write_text('query,doc,value\n1,a,2\n')
    with pytest.raises(FrameError, match=r"run\.csv, line 1 \(the header\): columns \['query', 'doc', 'value'\]; "
                                         r'expected qid, docno, and score or rank'):
        read_run(tmp_path / 'run.csv')
    (tmp_path / 'run.csv').write_text('qid,docno,score\n1,a,2\n1,b,\n')
    with pytest.raises(FrameError, match=r"run\.csv, line 3: score 'nan' is missing or not a number \(qid \['1'\]\), "
                                         'and there are no ranks'):
        read_run(tmp_path / 'run.csv')
    (tmp_path / 'run.csv').write_text('')
    with pytest.raises(FrameError, match=r'run\.csv: empty; expected a header'):
        read_run(tmp_path / 'run.csv')
