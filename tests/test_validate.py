"""read_per_query: a study's per_query.csv read back, every malformation named by file, line, column."""
import pandas as pd
import pytest

from pyterrier_utility.errors import FrameError, SettingError
from pyterrier_utility.study.validate import read_per_query

HEADER = 'labels,system,k,qid,n_docs,ndcg,quality_0shot,quality,utility\n'
ROWS = ['label>=2,Rel,1,1,1,1.0,0.5,0.75,0.5\n', 'label>=2,BM25,1,1,1,0.0,0.5,0.25,-0.5\n',
        'label>=2,BM25,2,1,2,0.5,0.0,0.25,\n']


def write(tmp_path, text):
    path = tmp_path / 'per_query.csv'
    path.write_text(text)
    return path


def test_a_study_file_is_read_typed(tmp_path):
    frame = read_per_query(write(tmp_path, HEADER + ''.join(ROWS)))
    expected = pd.DataFrame({'labels': ['label>=2'] * 3, 'system': ['Rel', 'BM25', 'BM25'], 'k': [1, 1, 2],
                             'qid': ['1', '1', '1'], 'n_docs': [1, 1, 2], 'ndcg': [1.0, 0.0, 0.5],
                             'quality_0shot': [0.5, 0.5, 0.0], 'quality': [0.75, 0.25, 0.25],
                             'utility': [0.5, -0.5, float('nan')]})
    pd.testing.assert_frame_equal(frame, expected)


def test_what_the_study_writes_reads_back_equal(tmp_path):
    written = pd.DataFrame({'dataset': ['a', 'b'], 'reader': ['gemma3-270m', 'gemma3-270m'], 'labels': ['l', 'l'],
                            'system': ['S, with comma', 'S'],
                            'k': [3, 3], 'qid': ['007', '7'], 'n_docs': [3, 0], 'ndcg': [0.25, 0.0],
                            'quality_0shot': [0.1, 0.2], 'quality': [0.3, 0.2], 'utility': [2.0, 0.0]})
    written.to_csv(tmp_path / 'per_query.csv', index=False)
    pd.testing.assert_frame_equal(read_per_query(tmp_path / 'per_query.csv'), written)


@pytest.mark.parametrize('text,message', [
    ('', r'per_query\.csv: empty'),
    (HEADER, r'per_query\.csv: a header and no rows'),
    (HEADER.replace(',utility', ''), r"per_query\.csv, line 1 \(the header\): no column \['utility'\]"),
    (HEADER + ROWS[0] + ROWS[0], r"per_query\.csv, lines \[2, 3\]: one row per labels, system, k, qid expected"),
    ('reader,' + HEADER + 'a,' + ROWS[0] + 'b,' + ROWS[1] + 'b,' + ROWS[1].replace('0.25', '0.5'),
     r"per_query\.csv, lines \[3, 4\]: one row per reader, labels, system, k, qid expected"),
    (HEADER + ROWS[0] + 'label>=2,BM25,1,1,1,0.0,0.5', r'per_query\.csv, line 3: 7 fields where the header has 9 '
                                                      r'\(the last line: the file was cut short\?\)'),
    (HEADER + ROWS[0] + ROWS[1][:-4], r'per_query\.csv, line 3: the last line has no line end'),
    (HEADER + ROWS[0] + ROWS[1].replace('-0.5', 'high'), r"line 3, column utility: is not a number \(nor empty\) "
                                                         r"\('high'\)"),
    (HEADER + ROWS[0].replace(',1,1,1,', ',,1,1,'), r'line 2, column k: is empty'),
    (HEADER + ROWS[0].replace(',1,1,1,', ',0,1,1,'), r"line 2, column k: is not an integer >= 1 \('0'\)"),
    (HEADER + ROWS[0].replace(',1,1,1,', ',1.5,1,1,'), r"line 2, column k: is not an integer >= 1 \('1.5'\)"),
    (HEADER + ROWS[0].replace('0.75', 'high'), r"line 2, column quality: is not a number \(nor empty\) \('high'\)"),
    (HEADER + ROWS[0].replace('Rel', ' '), r'line 2, column system: is empty'),
])
def test_a_malformed_file_is_named_by_line_and_column(tmp_path, text, message):
    with pytest.raises(FrameError, match=message):
        read_per_query(write(tmp_path, text))


def test_a_missing_file_is_a_setting_error(tmp_path):
    with pytest.raises(SettingError, match='does not exist'):
        read_per_query(tmp_path / 'per_query.csv')
