"""Working with pyterrier-rag's own readers.

pyterrier-rag's ``Reader`` formats its instruction with a fastchat conversation template chosen
from the backend's ``model_id``; for a model fastchat does not know (every backend of this
package, e.g. ``gemma-3-270m-q4_k_m``) that is its ``one_shot`` template, which puts a system
message and a whole example dialogue (a birthday-party question and answer) before the prompt.
A base model then continues that dialogue. :func:`plain_prompt` keeps the prompt as written.
"""
from .reader import KSHOT_PROMPT

#: The study's k-shot prompt as a Jinja template over pyterrier-rag's columns.
_KSHOT_TEMPLATE = KSHOT_PROMPT.replace('{contexts}', '{{ qcontext }}').replace('{query}', '{{ query }}')


def plain_prompt(instruction: str = _KSHOT_TEMPLATE, **kwargs):
    """A pyterrier-rag ``PromptTransformer`` sending ``instruction`` (a Jinja template over the
    frame's columns, e.g. ``{{ qcontext }}`` and ``{{ query }}``) to the backend as it is, with no
    chat template; by default the study's k-shot prompt. Keyword arguments go to ``PromptTransformer``.

    Example::

        from pyterrier_rag.prompt import Concatenator
        from pyterrier_rag.readers import Reader as RagReader
        rag = RagReader(pu.backends.gemma3_270m(), prompt=plain_prompt())
        answers = (dataset.bm25() % 5 >> Concatenator() >> rag)(topics)
    """
    from fastchat.conversation import get_conv_template
    from pyterrier_rag.prompt import PromptTransformer
    kwargs.setdefault('model_name_or_path', None)
    return PromptTransformer(instruction=instruction, conversation_template=get_conv_template('raw'), **kwargs)
