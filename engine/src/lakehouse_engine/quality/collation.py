"""When two key spellings are the same key for the source: its collation, read from the name.

A MySQL/MariaDB string key is unique in its column's collation: in ``utf8mb4_general_ci`` the
source cannot hold both 'abc' and 'ABC', nor 'abc' and 'abc ' (PAD SPACE), nor 'e' and 'é'.
Silver compares bytes, so the key check groups silver's keys as the collation would, in two
steps (``uniqueness``):

1. **Candidates, in Spark**: keys grouped by a Spark (ICU) collation of the same class as the
   source's (:attr:`CollationRule.spark_collation`: case- and accent-insensitive, trailing
   spaces ignored or not), after the character foldings of :attr:`CollationRule.folds`.
2. **Confirmation, by the source**: the spellings of each candidate group are grouped again by
   the server, in the column's own collation; only spellings the server calls equal collide.

So a reported collision is always one the source itself would refuse (no false alarm from ICU
being coarser than MySQL's tables), and the approximation is only in step 1, which can miss
pairs that ICU's class keeps apart. Measured against MariaDB 10.11, ICU misses and the folds
below restore:

- ``*_general_ci`` (and ``general_nopad``): 'ß' = 's' and 'ı' = 'i' (one-to-one tables), and
  every character outside the Basic Multilingual Plane (emoji...) equal to every other one;
- ``*_unicode_ci`` and MariaDB's language collations of Unicode charsets (UCA 4.0.0): those
  characters all equal too, and a no-break space equal to a space (PAD SPACE then drops it).

Still missed (not reported even when silver holds both): language tailorings ICU's root order
lacks (``utf8mb4_swedish_ci`` / ``latin1_swedish_ci`` 'ü' = 'y', ``utf8mb4_turkish_ci``
'I' = 'ı', ``latin1_german1_ci`` 'ß' = 's'), and whatever MySQL 8's ``_0900_`` and MariaDB
11's ``uca1400`` collations equate beyond ICU's root collation (not measured here). Accent
insensitivity of the ``*_ci`` collations without ``_ai``/``_as`` is assumed for every accent;
step 2 rejects the ones a collation keeps apart ('å' and 'a' in ``utf8mb4_swedish_ci``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Family = Literal["binary", "general", "uca400", "uca520", "uca900", "uca1400", "simple"]

# Character sets whose collations are Unicode tables (the rest are 8-bit charsets, each
# collation a table of its own: latin1_swedish_ci, cp1250_czech_cs...).
UNICODE_CHARSETS = frozenset({"utf8mb4", "utf8mb3", "utf8", "ucs2", "utf16", "utf16le", "utf32"})
# Charsets that can hold characters outside the BMP (utf8mb3 cannot).
SUPPLEMENTARY_CHARSETS = frozenset({"utf8mb4", "utf16", "utf16le", "utf32"})
NBSP = "\u00a0"
_NAME = re.compile(r"^[a-z0-9_]+$")


@dataclass(frozen=True)
class CollationRule:
    """How a source collation compares strings, as far as key equality goes."""

    collation: str  # e.g. "utf8mb4_general_ci"
    charset: str  # e.g. "utf8mb4"
    case_insensitive: bool
    accent_insensitive: bool
    pad_space: bool  # trailing spaces do not count ('abc' = 'abc ')
    family: Family

    @property
    def exact(self) -> bool:
        """Equal in the collation exactly when equal byte for byte: nothing to check beyond."""
        return self.family == "binary" and not self.pad_space

    @property
    def spark_collation(self) -> str | None:
        """The Spark collation grouping candidates of this class; None when bytes decide."""
        if self.exact:
            return None
        if self.family == "binary":
            return "UTF8_BINARY_RTRIM"
        name = "UNICODE"
        name += "_CI" if self.case_insensitive else ""
        name += "_AI" if self.accent_insensitive else ""
        return name + ("_RTRIM" if self.pad_space else "")

    @property
    def folds(self) -> tuple[tuple[str, str], ...]:
        """Characters replaced (``str.translate`` style pairs, equal lengths) before the Spark
        collation groups candidates: equalities of the source's tables that ICU lacks. Only
        ever makes more candidates, which the source then confirms or rejects."""
        if self.family == "general" and self.case_insensitive:
            return (("ßı", "si"),)
        if self.family in ("uca400", "uca520") and self.pad_space:
            return ((NBSP, " "),)
        return ()

    @property
    def supplementary_equal(self) -> bool:
        """Every character outside the BMP has one weight (U+FFFD) in this collation."""
        return (self.family in ("general", "uca400") and self.case_insensitive
                and self.charset in SUPPLEMENTARY_CHARSETS)

    def describe(self) -> str:
        """What the collation ignores, e.g. ``case-, accent- and trailing-space-insensitive``."""
        ignored = [word for word, on in (("case", self.case_insensitive), ("accent", self.accent_insensitive),
                                         ("trailing-space", self.pad_space)) if on]
        if not ignored:
            return "byte for byte"
        if len(ignored) == 1:
            return f"{ignored[0]}-insensitive"
        return ", ".join(f"{w}-" for w in ignored[:-1]) + f" and {ignored[-1]}-insensitive"


def collation_rule(collation: str, charset: str | None = None) -> CollationRule:
    """The rule of a MySQL/MariaDB collation, from its name (``information_schema`` spelling).

    Name parts: ``_bin`` compares bytes; ``_ci``/``_cs`` case; ``_ai``/``_as`` accents (the
    older ``_ci`` collations without either treat accented letters as their base letter, and
    ``_cs`` ones keep them apart; ``_w2``, two weight levels, ignores case only); PAD SPACE
    unless the name has ``nopad`` (MariaDB) or ``0900`` (MySQL 8's UCA 9.0.0 collations) - the
    server's ``PAD_ATTRIBUTE``, which MariaDB does not publish."""
    name = collation.lower()
    if not _NAME.match(name):
        raise ValueError(f"unexpected collation name {collation!r}")
    charset = (charset or name.split("_", 1)[0]).lower()
    if name == "binary" or charset == "binary":
        return CollationRule(name, "binary", False, False, False, "binary")
    parts = name.split("_")[1:]
    pad_space = "nopad" not in parts and "0900" not in parts
    if "bin" in parts:
        return CollationRule(name, charset, False, False, pad_space, "binary")
    case_sensitive = "cs" in parts and "ci" not in parts
    accent_insensitive = "ai" in parts or ("as" not in parts and not case_sensitive and "w2" not in parts)
    return CollationRule(name, charset, not case_sensitive, accent_insensitive, pad_space, _family(charset, parts))


def _family(charset: str, parts: list[str]) -> Family:
    if charset not in UNICODE_CHARSETS:
        return "simple"
    if "0900" in parts:
        return "uca900"
    if "uca1400" in parts:
        return "uca1400"
    if "520" in parts:
        return "uca520"
    if "general" in parts:
        return "general"
    return "uca400"  # unicode_ci and the language collations (swedish_ci, german2_ci...)
