"""What a run records of its settings (``settings.json``) and announces on the console: the config,
each reader's engine as built, and where each decoding value comes from.

Example::

    from pyterrier_utility.study import PAPER
    from pyterrier_utility.study.record import decoding_sources
    decoding_sources(PAPER)['max_new_tokens']  # "authors' code (tools/llama_tools.py: max_tokens=300)"
"""
from pathlib import Path
from typing import Dict, Optional

from .._messages import inform
from .._version import __version__
from ..cache.keys import backend_key
from ..reader import Reader
from ..settings import FIELDS
from .config import StudyConfig
from .config_json import to_dict
from .presets import DECODING_SOURCES, PRESETS


def print_settings(command: str, config: StudyConfig, readers: Dict[str, Reader], out: Path,
                   argv: Optional[list] = None) -> dict:
    """Prints the settings; returns them whole, with each backend as built, for ``settings.json``."""
    first = next(iter(readers.values()))
    # The stops each reader uses: its prompt format's, then the decoding's where the format takes them.
    engines = {name: dict(engine_record(r.backend), stop=list(r.stop)) for name, r in readers.items()}
    own = {name: config.decoding_for(name) for name in readers if config.decoding_for(name) != config.decoding}
    for name, theirs in own.items():
        engines[name]['decoding'] = theirs.as_dict()
    notes = config.decoding_notes()
    record = dict(to_dict(config), command=command, version=__version__, seeds=first.seeds(),
                  backends={name: backend_key(r.backend) for name, r in readers.items()}, engines=engines,
                  argv=argv, decoding_notes=notes)
    shown = ', '.join(f'{k}={record[k]}' for k in ('datasets', 'readers', 'samples', 'seeds', 'quality', 'scorer',
                                                   'neural', 'bm25', 'ks', 'label_sets', 'rel_labels'))
    decoding = ', '.join(f'{k}={v!r}' for k, v in config.decoding.as_dict().items())
    urls = config.engine.base_urls
    inform(f'pyterrier-utility {command}' + (f' (preset {config.preset})' if config.preset else '')
           + f': {shown}, {decoding}' + (f', base_urls={list(urls)}' if urls else '')
           + f'; settings in {out / "settings.json"}')
    sources = decoding_sources(config)
    if sources:
        record['decoding_sources'] = sources
        inform(f'decoding of preset {config.preset}, each value and where it comes from:')
        for name, source in sources.items():
            inform(f'  {name}={getattr(config.decoding, name)!r}: {source}')
    for name, theirs in own.items():
        changed = {k: v for k, v in theirs.as_dict().items() if v != config.decoding.as_dict()[k]}
        inform(f'{name}: its own ' + ', '.join(f'{k}={v!r}' for k, v in changed.items())
               + ' (what this reader needs; given explicitly, ' + ', '.join(f'--{k.replace("_", "-")}' for k in changed)
               + ' sets every reader\'s)')
    for reader, own_way in notes.items():
        inform(f'{reader}: ' + '; '.join(f'{name}={getattr(config.decoding, name)!r} {how}'
                                            for name, how in own_way.items()))
    for name, r in readers.items():
        if list(r.stop) != list(config.decoding.stop):
            inform(f'{name}: stops at {list(r.stop)!r} (prompt format {r.template.name!r}: '
                   + ('its stop, then the decoding\'s)' if r.template.backend_stops else 'its stop alone)'))
    for name, engine in engines.items():
        inform(f'{name}: {engine["reproducibility"]}'
               + (f'; engine settings {engine["settings"]}' if engine.get('settings') else ''))
        if engine.get('placement', {}).get('runner') == 'ray':
            actors = engine['placement']['actors']
            inform(f'{name}: on Ray, {len(actors)} replicas: ' + '; '.join(
                   f"node {a['node_id'][:12]} ({a['ip']}): {a['device']}" for a in actors))
        elif engine.get('placement'):
            actors = engine['placement']['actors']
            cpu = actors[0]['device'].split(',')[0]
            runner = engine['placement']['runner']
            inform(f'{name}: {len(actors)} replica {runner} of one torch thread each, on {cpu}')
    return record


def engine_record(backend) -> dict:
    """What a run records of its engine: whether fresh generation is reproducible, the engine
    settings the backend chose (e.g. vLLM's CPU build without chunked prefill) and, on Ray, where it
    ran (the replicas, each one's node and device)."""
    record = {'reproducibility': getattr(backend, 'reproducibility', None)
              or 'not stated by the backend: answers reproducible from the generation cache only'}
    if getattr(backend, 'engine_settings', None):
        record['settings'] = dict(backend.engine_settings)
    if getattr(backend, 'placement', None):
        record['placement'] = dict(backend.placement)
    return record


def decoding_sources(config: StudyConfig) -> Dict[str, str]:
    """Where each decoding value of a preset's study comes from (``{}`` without a preset): the
    preset's source for a value left as the preset has it, else 'given' and the preset's value."""
    sources = DECODING_SOURCES.get(config.preset or '', {})
    if config.preset is None or not sources:
        return {}
    preset = PRESETS[config.preset].decoding
    return {name: sources.get(name, f'the preset {config.preset}')
            if getattr(config.decoding, name) == getattr(preset, name)
            else f'this run (the preset has {getattr(preset, name)!r})' for name in FIELDS}
