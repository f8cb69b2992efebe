"""What a text holds: a character one can see, or one no UTF-8 file can take (a lone surrogate)."""
import unicodedata


def visible(text: str) -> bool:
    """Whether ``text`` holds a character one can see: a letter, mark, number, punctuation or symbol,
    not only white space and control or format characters (NUL, ESC, a zero-width space)."""
    return any(unicodedata.category(c)[0] in 'LMNPS' for c in text)


def encodable(text: str) -> bool:
    """True when ``text`` can be written as UTF-8 (no lone surrogate such as ``'\\ud800'``)."""
    try:
        text.encode('utf-8')
    except UnicodeEncodeError:
        return False
    return True
