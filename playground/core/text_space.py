"""`UnicodeText`: a gymnasium `Text` space whose charset is all of Unicode.

gymnasium's `spaces.Text` defaults to an alphanumeric charset, so real observations and
actions ("You see a red key.", "search[blue mug, $10]") lie outside it. A charset that
lists every character would be a frozenset of a million strings per space; this space
keeps `Text`'s interface (`character_set`, `character_list`, `character_index`, `sample`
with masks, flattening, batching, shared memory for `AsyncVectorEnv`) over the Unicode
scalar values (U+0000 to U+10FFFF without the surrogates U+D800-U+DFFF, which are not
characters and cannot be encoded) without materialising them.

A character's index is its code point, minus 0x800 above the surrogates, so indices are
dense: 0 ... 1,112,063; the padding value of a flattened string is 1,112,064 as `Text`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Set
from typing import Any, Iterator

import numpy as np
from gymnasium.spaces import Space, Text
from gymnasium.spaces.utils import flatten, unflatten
from gymnasium.vector.utils import create_empty_array, read_from_shared_memory

SURROGATE_START, SURROGATE_END = 0xD800, 0xE000  # end exclusive
SURROGATES = SURROGATE_END - SURROGATE_START
CHARACTERS = 0x110000 - SURROGATES  # 1,112,064 Unicode scalar values
_SURROGATE = re.compile("[\ud800-\udfff]")


def _codes_to_text(indices: np.ndarray) -> str:
    """The string of the characters with these indices."""
    codes = np.asarray(indices, dtype=np.uint32)
    codes = codes + (codes >= SURROGATE_START) * np.uint32(SURROGATES)
    return codes.astype("<u4").tobytes().decode("utf-32-le")


def _text_to_codes(text: str) -> np.ndarray:
    """The indices of the characters of `text` (ValueError for a surrogate)."""
    try:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.int32)
    except UnicodeEncodeError:
        raise ValueError("text with a lone surrogate is not Unicode text") from None
    return codes - (codes >= SURROGATE_END) * np.int32(SURROGATES)


class UnicodeCharset(Set):
    """The set of all Unicode scalar values, as one-character strings (nothing materialised)."""

    def __contains__(self, char: object) -> bool:
        return isinstance(char, str) and len(char) == 1 and not SURROGATE_START <= ord(char) < SURROGATE_END

    def __len__(self) -> int:
        return CHARACTERS

    def __iter__(self) -> Iterator[str]:
        return (chr(code) for code in range(0x110000) if not SURROGATE_START <= code < SURROGATE_END)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, UnicodeCharset):
            return True
        return isinstance(other, Set) and len(other) == CHARACTERS and all(c in self for c in other)

    def __hash__(self) -> int:
        return hash((UnicodeCharset, CHARACTERS))

    def __repr__(self) -> str:
        return "UnicodeCharset()"


class UnicodeCharList(Sequence):
    """The Unicode scalar values in index order: `chars[i]` is the character with index `i`."""

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(CHARACTERS)))
        index = int(index)
        if index < 0:
            index += CHARACTERS
        if not 0 <= index < CHARACTERS:
            raise IndexError(index)
        return chr(index + SURROGATES if index >= SURROGATE_START else index)

    def __len__(self) -> int:
        return CHARACTERS

    def __repr__(self) -> str:
        return "UnicodeCharList()"


CHARSET = UnicodeCharset()
CHARLIST = UnicodeCharList()


class UnicodeText(Text):
    """A `Text` space of strings of `min_length` to `max_length` Unicode characters (any script,
    spaces, punctuation, newlines; see module docstring).

    `sample()` draws the length uniformly, then each character uniformly among all Unicode
    scalar values, as `Text.sample` does over its charset; masks and probabilities are
    arrays over the 1,112,064 character indices, as for `Text`.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | np.random.Generator | None = None) -> None:
        if not np.issubdtype(type(max_length), np.integer) or not np.issubdtype(type(min_length), np.integer):
            raise TypeError(f"UnicodeText lengths must be integers, got {max_length!r} and {min_length!r}")
        if not 0 <= min_length <= max_length:
            raise ValueError(f"UnicodeText needs 0 <= min_length <= max_length, got {min_length} and {max_length}")
        self.min_length, self.max_length = int(min_length), int(max_length)
        # gymnasium annotates these as frozenset and tuple; the lazy views answer the same reads
        self._char_set, self._char_list = CHARSET, CHARLIST  # type: ignore[assignment]
        Space.__init__(self, dtype=str, seed=seed)

    def sample(self, mask=None, probability=None) -> str:
        """A random string of the space (see class docstring)."""
        if mask is not None and probability is not None:
            raise ValueError("Only one of `mask` or `probability` can be provided")
        weights = None
        length = None
        if mask is not None:
            length, weights = self._validate_mask(mask, np.int8, "mask")
            if weights is not None:
                assert np.all((weights == 0) | (weights == 1)), "Expects all mask values to 0 or 1"
                if not weights.any():
                    if self.min_length == 0:
                        return ""
                    raise ValueError("the character mask is all zero, so no character can be sampled")
                weights = weights / weights.sum()
        elif probability is not None:
            length, weights = self._validate_mask(probability, np.float64, "probability")
            if weights is not None:
                assert np.all((weights >= 0) & (weights <= 1)), "Expects all probability values within 0 and 1"
                assert np.isclose(weights.sum(), 1), "Expects the probabilities to sum to 1"
        if length is None:
            length = int(self.np_random.integers(self.min_length, self.max_length + 1))
        if weights is None:
            indices = self.np_random.integers(0, CHARACTERS, size=length)
        else:
            indices = self.np_random.choice(CHARACTERS, size=length, p=weights)
        return _codes_to_text(indices)

    def contains(self, x: Any) -> bool:
        """True for a `str` of an allowed length with no lone surrogate."""
        return (isinstance(x, str) and self.min_length <= len(x) <= self.max_length
                and (x.isascii() or _SURROGATE.search(x) is None))

    def character_index(self, char: str) -> np.int32:
        """The index of a character (KeyError for a surrogate or a non-character)."""
        if char not in CHARSET:
            raise KeyError(char)
        code = ord(char)
        return np.int32(code - SURROGATES if code >= SURROGATE_END else code)

    @property
    def characters(self) -> str:
        """Every character of the space, in index order (a 1.1-million-character string, built on demand)."""
        return _codes_to_text(np.arange(CHARACTERS))

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Text) and self.min_length == other.min_length
                and self.max_length == other.max_length and self.character_set == other.character_set)

    def __hash__(self) -> int:
        return hash((UnicodeText, self.min_length, self.max_length))


# Fast versions of gymnasium's per-character Text helpers (flattening, and AsyncVectorEnv's
# shared memory, where gymnasium's own reader would also return stale strings: SharedTexts).

@flatten.register(UnicodeText)  # mypy cannot match this to gymnasium's generic fallback, Space[T]
def _flatten_unicode_text(space: UnicodeText, x: str) -> np.ndarray:  # type: ignore[misc]
    out = np.full((space.max_length,), CHARACTERS, dtype=np.int32)
    codes = _text_to_codes(x)
    out[: len(codes)] = codes
    return out


@unflatten.register(UnicodeText)  # mypy cannot match this to gymnasium's generic fallback, Space[T]
def _unflatten_unicode_text(space: UnicodeText, x: np.ndarray) -> str:  # type: ignore[misc]
    x = np.asarray(x)
    return _codes_to_text(x[x < CHARACTERS])


class SharedTexts(Sequence):
    """The `n` strings in a shared-memory buffer, decoded whenever they are read.

    `AsyncVectorEnv(shared_memory=True)` (the default) reads its observation buffer once,
    expecting a view that the workers' writes update, as a numpy array is; gymnasium's own
    `Text` reader returns a tuple of strings made at that moment, which never changes. This
    is the view for text: `deepcopy` (what the vector env returns with `copy=True`, the
    default) gives a plain tuple of the strings written by the latest step.
    """

    def __init__(self, space: UnicodeText, shared_memory, n: int) -> None:
        self._data = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape((n, space.max_length))

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        row = self._data[index]
        return _codes_to_text(row[row < CHARACTERS])

    def __len__(self) -> int:
        return len(self._data)

    def __deepcopy__(self, memo) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@read_from_shared_memory.register(UnicodeText)
def _read_unicode_text(space: UnicodeText, shared_memory, n: int = 1) -> SharedTexts:
    return SharedTexts(space, shared_memory, n)


@create_empty_array.register(UnicodeText)
def _empty_unicode_text(space: UnicodeText, n: int = 1, fn=np.zeros) -> tuple[str, ...]:
    return tuple("\0" * space.min_length for _ in range(n))
