"""``--select`` / ``--exclude``, dbt style: table names, shell wildcards and ``tag:`` selectors.

``orders``, ``order*``, ``*_items``, ``tag:finance`` and ``tag:fin*`` all work. Every selector
must match at least one table: a typo in a scheduled command should stop it (exit 2), not
quietly ingest nothing or everything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase

from ..errors import ConfigError
from ..tables import TableSpec

TAG = "tag:"
WILDCARDS = frozenset("*?[")


def matches(spec: TableSpec, selector: str) -> bool:
    """Whether ``selector`` (a name, a wildcard pattern or ``tag:PATTERN``) picks ``spec``.

    Case-sensitive, like the table names themselves (``fnmatchcase``, not ``fnmatch``)."""
    if selector.startswith(TAG):
        return any(fnmatchcase(tag, selector[len(TAG):]) for tag in spec.tags)
    return fnmatchcase(spec.name, selector)


def select_tables(
    specs: Mapping[str, TableSpec],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    package: str | None = None,
) -> list[TableSpec]:
    """The tables ``include`` picks (all when empty) minus those ``exclude`` picks.

    Raises ``ConfigError`` for a selector matching no table, or a selection left empty;
    ``package`` (the project's) is named in the command to add one (``python -m <package>``;
    without it, the ``lakehouse`` command)."""
    for selector in (*include, *exclude):
        if not any(matches(spec, selector) for spec in specs.values()):
            raise ConfigError(_matches_nothing(specs, selector, package))
    chosen = [s for s in specs.values() if not include or any(matches(s, i) for i in include)]
    chosen = [s for s in chosen if not any(matches(s, e) for e in exclude)]
    if not chosen:
        raise ConfigError("the selection matches no table: --exclude removes every table --select picks")
    return chosen


def _matches_nothing(specs: Mapping[str, TableSpec], selector: str, package: str | None) -> str:
    if selector.startswith(TAG):
        tags = sorted({tag for spec in specs.values() for tag in spec.tags})
        return f"no table has a tag matching {selector[len(TAG):]!r} (tags in use: {', '.join(tags) or 'none'})"
    known = ", ".join(sorted(specs)) or "none"
    if WILDCARDS & set(selector):
        return f"the pattern {selector!r} matches no table (known: {known})"
    return (f"no table named {selector!r} (known: {known}); add it with "
            f"`{f'python -m {package}' if package else 'lakehouse'} add-table {selector}` (a table "
            "without a primary key also needs --key col1,col2)")
