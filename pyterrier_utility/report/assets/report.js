// The per-query explorer of a study report: filters, sorting and a page of rows at a time over the
// JSON blob in #study-data; a row opens its query (contexts, answers, scores) beside another system or k.
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('study-data').textContent);
  const R = D.rows;
  const N = R.qid.length;
  const PAGE = 50;
  const state = {dataset: '', labels: '', system: '', k: '', search: '', sort: null, dir: 1, page: 0, open: null};
  const COLUMNS = [
    ['dataset', D.block, i => D.datasets[R.dataset[i]]],
    ['labels', 'Label set', i => D.labels[R.labels[i]]],
    ['system', 'System', i => D.systems[R.system[i]]],
    ['k', 'k', i => R.k[i]],
    ['qid', 'qid', i => D.queries.qid[R.qid[i]]],
    ['query', 'Query', i => D.queries.text[R.qid[i]] || ''],
    ['ndcg', 'nDCG@k', i => R.ndcg[i]],
    ['quality_0shot', 'P_0', i => R.quality_0shot[i]],
    ['quality', 'P_k', i => R.quality[i]],
    ['utility', 'U', i => R.utility[i]],
  ].filter(c => c[0] !== 'dataset' || D.named_datasets);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === 'class') node.className = value;
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }
  const fmt = v => (v === null || v === undefined) ? '–' : (typeof v === 'number' && !Number.isInteger(v) ? v.toFixed(3) : String(v));
  const uClass = v => v === null ? '' : (v > 0 ? 'u-pos' : (v < 0 ? 'u-neg' : ''));

  function select(name, label, values) {
    const options = [el('option', {value: ''}, 'all')].concat(values.map(v => el('option', {value: v}, v)));
    return el('label', {}, label + ' ', el('select', {id: 'filter-' + name, onchange: e => {
      state[name] = e.target.value; state.page = 0; render();
    }}, options));
  }

  function matches(i) {
    if (state.dataset && D.datasets[R.dataset[i]] !== state.dataset) return false;
    if (state.labels && D.labels[R.labels[i]] !== state.labels) return false;
    if (state.system && D.systems[R.system[i]] !== state.system) return false;
    if (state.k && String(R.k[i]) !== state.k) return false;
    if (state.search) {
      const q = R.qid[i];
      const text = ((D.queries.text[q] || '') + ' ' + D.queries.qid[q]).toLowerCase();
      if (!text.includes(state.search)) return false;
    }
    return true;
  }

  function selected() {
    const rows = [];
    for (let i = 0; i < N; i++) if (matches(i)) rows.push(i);
    if (state.sort !== null) {
      const value = COLUMNS[state.sort][2];
      rows.sort((a, b) => {
        const x = value(a), y = value(b);
        if (x === null) return y === null ? 0 : 1;  // NaN last either way
        if (y === null) return -1;
        return (x < y ? -1 : x > y ? 1 : 0) * state.dir;
      });
    }
    return rows;
  }

  function render() {
    const rows = selected();
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const body = document.querySelector('#rows tbody');
    body.replaceChildren(...rows.slice(state.page * PAGE, (state.page + 1) * PAGE).map(i => el('tr', {
      'data-row': i, class: i === state.open ? 'open' : '', onclick: () => openRow(i)},
      COLUMNS.map(c => el('td', {class: typeof c[2](i) === 'number' ? 'num ' + (c[0] === 'utility' ? uClass(R.utility[i]) : '') : ''},
        fmt(c[2](i)))))));
    document.getElementById('count').textContent = rows.length === 0 ? 'no rows' :
      `rows ${state.page * PAGE + 1}–${Math.min(rows.length, (state.page + 1) * PAGE)} of ${rows.length}`;
    document.getElementById('prev').disabled = state.page === 0;
    document.getElementById('next').disabled = state.page >= pages - 1;
    document.querySelectorAll('#rows th').forEach((th, c) => {
      if (c === state.sort) th.dataset.dir = state.dir > 0 ? 'asc' : 'desc'; else delete th.dataset.dir;
    });
  }

  function cellKey(i, system, k) { return `${R.qid[i]}|${system}|${k}`; }

  function relevant(labelSet, label) {
    const rule = D.relevance[labelSet];
    if (!rule || label === null) return false;
    return rule.min !== undefined ? label >= rule.min : rule.in.includes(label);
  }

  function contextList(i) {
    if (!D.contexts) return el('p', {class: 'note'}, 'contexts.csv is not in the study folder.');
    const contexts = D.contexts[cellKey(i, R.system[i], R.k[i])] || [];
    if (!contexts.length) return el('p', {class: 'note'}, 'No context: the reader answered without documents.');
    return el('ol', {class: 'contexts'}, contexts.map(([doc, label], j) => el('li', {
      class: 'context' + (relevant(R.labels[i], label) ? ' relevant' : ''), 'data-docno': D.docs.docno[doc],
      'data-label': label === null ? '' : label},
      el('div', {class: 'head'}, `Context ${j + 1} · ${D.docs.docno[doc]} · `,
        label === null ? 'unjudged' : `label ${label}`, relevant(R.labels[i], label) ? ' · relevant' : ''),
      el('div', {class: 'text'}, D.docs.text[doc]))));
  }

  // Whether the engine gave any answer a mean log-probability: only then the column is shown.
  const LOGPROBS = Object.values(D.answers || {}).some(cell => cell.some(a => a[2] !== null));

  // A character one can see (health.csv's rule): an answer of white space, NUL or ESC alone is empty.
  const VISIBLE = /[\p{L}\p{M}\p{N}\p{P}\p{S}]/u;

  function answerCell(cls, answer) {
    if (!answer) return el('td', {class: cls}, '–');
    const text = D.answer_texts[answer[1]];
    return el('td', {class: cls + (answer[3] ? ' truncated' : '')}, el('span', {class: 'answer-text'}, text),
      VISIBLE.test(text) ? null : el('span', {class: 'note'}, '(empty)'),
      answer[3] ? [' ', el('span', {class: 'cut', title: 'generation stopped at max_new_tokens'}, 'cut')] : null);
  }

  function answerTable(i) {
    if (!D.answers) return el('p', {class: 'note'}, 'answers.csv is not in the study folder.');
    const zero = D.answers[cellKey(i, D.zero_shot, 0)] || [];
    const kshot = D.answers[cellKey(i, R.system[i], R.k[i])] || [];
    const score = (system, k) => {
      const found = D.scores && D.scores[`${R.qid[i]}|${R.labels[i]}|${system}|${k}`];
      return new Map((found || []).map(s => [s[0], s]));
    };
    const zs = score(D.zero_shot, 0), ks = score(R.system[i], R.k[i]);
    const samples = [...new Set(zero.map(a => a[0]).concat(kshot.map(a => a[0])))].sort((a, b) => a - b);
    const find = (list, s) => list.find(x => x[0] === s);
    const scored = (map, s) => map.has(s) ? [el('td', {class: 'num'}, fmt(map.get(s)[1])), el('td', {}, map.get(s)[2])] :
      (D.scores ? [el('td', {}, '–'), el('td', {}, '–')] : []);
    const confidence = (cls, answer) => LOGPROBS ? el('td', {class: 'num ' + cls}, fmt(answer ? answer[2] : null)) : null;
    const extra = (D.scores ? [D.quality, 'best doc'] : []).concat(LOGPROBS ? ['mean log-prob'] : []);
    const head = ['sample', '0-shot answer'].concat(extra, [`k=${R.k[i]} answer`], extra);
    return el('div', {}, D.scores ? null : el('p', {class: 'note'}, `scores.csv is not in the study folder: answers without their ${D.quality}.`),
      el('table', {class: 'answers'}, el('thead', {}, el('tr', {}, head.map(h => el('th', {}, h)))),
        el('tbody', {}, samples.map(s => el('tr', {class: 'answer', 'data-sample': s}, el('td', {}, s),
          answerCell('zero', find(zero, s)), scored(zs, s), confidence('zero-logprob', find(zero, s)),
          answerCell('kshot', find(kshot, s)), scored(ks, s), confidence('kshot-logprob', find(kshot, s)))))));
  }

  function pane(i) {
    return el('div', {class: 'pane', 'data-system': D.systems[R.system[i]], 'data-k': R.k[i]},
      el('h3', {}, `${D.systems[R.system[i]]}, k=${R.k[i]}`),
      el('p', {class: 'metrics'}, `nDCG@${R.k[i]} ${fmt(R.ndcg[i])} · P_0 ${fmt(R.quality_0shot[i])} · P_k ${fmt(R.quality[i])} · `,
        el('span', {class: uClass(R.utility[i])}, `U ${fmt(R.utility[i])}`), ` · ${R.n_docs[i]} ${R.n_docs[i] === 1 ? "context" : "contexts"}`),
      el('h4', {}, 'Contexts, in the order the reader saw them'), contextList(i),
      el('h4', {}, 'Answers'), answerTable(i));
  }

  function openRow(i, other) {
    state.open = i;
    const q = R.qid[i];
    const peers = [];
    for (let j = 0; j < N; j++) if (j !== i && R.qid[j] === q && R.labels[j] === R.labels[i]) peers.push(j);
    const compare = el('select', {id: 'compare', onchange: e => openRow(i, e.target.value === '' ? undefined : +e.target.value)},
      [el('option', {value: ''}, 'nothing')].concat(peers.map(j => el('option', {value: j},
        `${D.systems[R.system[j]]}, k=${R.k[j]}`))));
    if (other !== undefined) compare.value = String(other);
    const section = document.getElementById('query');
    section.replaceChildren(
      el('h2', {}, `Query ${D.queries.qid[q]}: `, el('span', {class: 'question'}, D.queries.text[q] || '(query text not recorded)')),
      el('p', {}, (D.named_datasets ? D.datasets[R.dataset[i]] + ' · ' : '') + D.labels[R.labels[i]] + ' · ',
        el('label', {}, 'compare with ', compare), ' ', el('button', {id: 'close', onclick: () => {
          section.hidden = true; state.open = null; render();
        }}, 'close')),
      el('div', {class: 'panes'}, pane(i), other !== undefined ? pane(other) : null));
    section.hidden = false;
    render();
    if (other === undefined) section.scrollIntoView();
  }

  function init() {
    const explorer = document.getElementById('explorer');
    const unique = values => [...new Set(values)];
    const search = el('input', {type: 'search', id: 'search', placeholder: 'search query text or qid', oninput: e => {
      state.search = e.target.value.trim().toLowerCase(); state.page = 0; render();
    }});
    explorer.append(
      el('div', {class: 'controls'}, D.named_datasets ? select('dataset', D.block.toLowerCase(), D.datasets) : null,
        select('labels', 'label set', D.labels),
        select('system', 'system', unique(R.system).map(s => D.systems[s])),
        select('k', 'k', unique(R.k).sort((a, b) => a - b).map(String)), search),
      el('div', {class: 'pager'}, el('button', {id: 'prev', onclick: () => { state.page--; render(); }}, '‹ previous'),
        el('span', {id: 'count'}), el('button', {id: 'next', onclick: () => { state.page++; render(); }}, 'next ›')),
      el('table', {id: 'rows'}, el('thead', {}, el('tr', {}, COLUMNS.map((c, j) => el('th', {'data-column': c[0], onclick: () => {
        state.dir = state.sort === j ? -state.dir : 1; state.sort = j; render();
      }}, c[1])))), el('tbody')));
    render();
    document.body.dataset.ready = performance.now().toFixed(1);
  }
  init();
})();
