"""A :class:`~.config.StudyConfig` as JSON values and back: what a study folder's ``settings.json``
holds of its config (the engine options one by one, label sets and the decoding as text and a mapping)."""
import dataclasses
from typing import Any, Dict

from ..engines import ENGINE_OPTION_NAMES
from ..settings import Decoding
from .config import StudyConfig


def to_dict(config: StudyConfig) -> Dict[str, object]:
    """``config`` as JSON values (what ``settings.json`` holds); :func:`from_dict` reads it back.

    Example::

        json.dumps(to_dict(StudyConfig(queries=3)))
    """
    out: Dict[str, object] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name == 'engine':  # settings.json holds the options one by one
            out.update((name, list(v) if isinstance(v, tuple) else v) for name, v in vars(value).items())
            continue
        if field.name == 'decoding':
            value = value.as_dict()
        elif field.name in ('label_sets',):
            value = [str(x) for x in value]
        elif field.name == 'rel_labels':
            value = str(value)
        elif isinstance(value, tuple):
            value = [list(x) if isinstance(x, tuple) else x for x in value]
        out[field.name] = value
    return out


def from_dict(values: Dict[str, Any]) -> StudyConfig:
    """The config of a ``settings.json`` (its other keys, such as the backend's key, ignored), checked
    as every config is.

    Example::

        config = from_dict(json.loads((folder / 'settings.json').read_text()))
    """
    names = {f.name for f in dataclasses.fields(StudyConfig)} | set(ENGINE_OPTION_NAMES)
    values = {k: v for k, v in values.items() if k in names}
    if 'decoding' in values:
        values['decoding'] = Decoding(**values['decoding'])
    return StudyConfig(**values)
