"""The command line's merge: a preset or a command's defaults with the settings given explicitly
(:func:`resolve`), decoding fields and the readers' kind among them."""
from typing import Any, Dict

from ..engines import engine_of
from ..errors import SettingError
from ..settings import FIELDS
from .config import StudyConfig


def resolve(base: StudyConfig, given: Dict[str, Any]) -> StudyConfig:
    """``base`` (a preset or a command's defaults) with the settings ``given`` explicitly, decoding
    fields among them. When the readers change between offline models and named ones, the
    decoding fields that tell the kinds apart and the prompt format, where not given, are the readers'
    engine's (:meth:`~pyterrier_utility.engines.Engine.kind_decoding`): the penalty, its window and the stop of
    :data:`~pyterrier_utility.engines.OFFLINE_DECODING` and the ``'example'`` format for offline
    readers, the study's own stop, no penalty and the plain format for named models. Readers of both
    kinds share one decoding and one prompt format, so they need the repetition penalty, stop and
    prompt format given explicitly.

    Example::

        resolve(PRESETS['paper'], {'readers': ('gemma3-270m',), 'max_new_tokens': 32})
    """
    given = dict(given)
    decoding = {name: given.pop(name) for name in FIELDS if name in given}
    readers = given.get('readers', base.readers)
    readers = (readers,) if isinstance(readers, str) else tuple(readers)
    kinds = {engine_of(r).offline for r in readers}
    if len(kinds) > 1 and not ({'repetition_penalty', 'stop'} <= set(decoding) and 'prompt_format' in given):
        raise SettingError(f'the readers {list(readers)} mix offline base models and named models, which share one '
                           'decoding and prompt: give --repetition-penalty, --stop and --prompt-format explicitly')
    base_decoding = base.decoding
    if len(kinds) == 1 and kinds != {base.offline}:
        base_decoding = base_decoding.replace(**engine_of(readers[0]).kind_decoding())
        given.setdefault('prompt_format', engine_of(readers[0]).prompt_format)
    given_fields = tuple(sorted(set(base.decoding_given) | set(decoding)))
    return base.replace(decoding=base_decoding.replace(**decoding), decoding_given=given_fields, **given)
