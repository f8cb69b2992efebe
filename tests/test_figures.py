"""Figures 3-5: produced for every label set, with intervals, titles that say what they leave out."""
import matplotlib.text
import pandas as pd
import pytest
from test_stats import per_query

from pyterrier_utility.report import figures


@pytest.fixture
def study():
    """Two label sets, k = 2 and 5, systems A, Rel, NRel and B over 12 queries."""
    one = per_query(12)
    one = pd.concat([one, one[one.system == 'A'].assign(system='B', utility=lambda d: d['utility'] * 0.5)])
    both = pd.concat([one, one.assign(labels='label>=3')], ignore_index=True)
    return pd.concat([both, both.assign(k=5, utility=both['utility'] + 0.1)], ignore_index=True)


def visible(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def flat(ax) -> str:
    """A panel's title as one line (it is wrapped to the panel's width)."""
    return ax.get_title().replace('\n', ' ')


def test_draw_figures_writes_each_with_a_panel_per_label_set(study, tmp_path):
    import matplotlib.pyplot as plt
    names = figures.draw_figures(study, tmp_path, 5, formats=('png', 'pdf'))
    assert names == [f'{n}.{f}' for n in ('fig3_utility_vs_k', 'fig4_ndcg_vs_utility_k5', 'fig5_pearson_vs_k')
                     for f in ('png', 'pdf')]
    for name in names:
        head = (tmp_path / name).read_bytes()[:8]
        assert head == (b'\x89PNG\r\n\x1a\n' if name.endswith('png') else b'%PDF-1.4'[:len(head)])
    fig5 = figures.correlation_vs_k(study)
    assert [flat(ax)[:len('Correlation of nDCG@k and utility vs k, label≥2, n = 12 queries')]
            for ax in visible(fig5)] == ['Correlation of nDCG@k and utility vs k, label\u22652, n = 12 queries',
                                         'Correlation of nDCG@k and utility vs k, label\u22653, n = 12 queries']
    # Legible beside the report's 14-pixel text: no text under 10 points (17 pixels at 120 dpi), and the
    # titles of the panels side by side apart.
    for fig in (fig5, figures.utility_vs_k(study), figures.ndcg_vs_utility(study, 5)):
        fig.canvas.draw()
        assert min(t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text()) >= 10
        boxes = [ax.title.get_window_extent() for ax in visible(fig)]
        assert [(i, j) for i in range(len(boxes)) for j in range(i) if boxes[i].overlaps(boxes[j])] == []
    plt.close('all')


def test_fig3_has_error_bars_and_says_nrel_is_left_out(study):
    fig3 = figures.utility_vs_k(study)
    axes = visible(fig3)
    assert len(axes) == 2
    title = flat(axes[0])
    assert title.startswith('Utility vs k, label\u22652, n = 12 queries') and 'not drawn: NRel' in title
    assert '>=' not in title
    assert len(axes[0].containers) == 3  # A, Rel and B: errorbar containers
    legend = axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ['A', 'Rel', 'B']
    assert legend.get_bbox_to_anchor().x0 > axes[0].get_window_extent().x1 - 1  # outside the axes


def test_fig4_shares_axes_and_gives_n_r_p(study):
    fig4 = figures.ndcg_vs_utility(study, 5)
    axes = visible(fig4)
    assert len(axes) == 4  # A and B per label set
    assert axes[0].get_shared_x_axes().joined(axes[0], axes[3]) and axes[0].get_shared_y_axes().joined(axes[0], axes[3])
    assert axes[0].get_title().startswith('label\u22652, A\nn = 12, r = ')
    width, height = fig4.get_size_inches()
    assert width / height < 2  # not a strip
    one_k = study[study['labels'] == 'label>=2']
    grid = figures.ndcg_vs_utility(one_k, 5)
    assert [ax.get_title().split('\n')[0] for ax in visible(grid)] == ['label\u22652, A', 'label\u22652, B']
    assert grid.get_size_inches()[0] / grid.get_size_inches()[1] < 2.5


def test_fig5_names_what_it_leaves_out_and_a_one_query_run_says_so(study):
    fig5 = figures.correlation_vs_k(study, labels='label>=2')
    ax = visible(fig5)[0]
    assert 'not drawn, r undefined' in flat(ax) and flat(ax).endswith(': NRel')
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ['A', 'Rel', 'B']
    assert len(ax.containers) == 3
    single = figures.correlation_vs_k(study[study.qid == 'q0'], labels='label>=2')
    ax = visible(single)[0]
    assert 'n = 1 query' in flat(ax) and ': A, Rel, NRel, B' in flat(ax)
    assert [t.get_text() for t in ax.texts] == ['nothing to draw']
