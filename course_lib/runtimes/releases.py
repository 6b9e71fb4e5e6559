"""A runtime's release history as data: one row per release that changed a sizing rule, each citing its source.

Every runtime module keeps one :class:`History`: a table of :class:`Change` rows, oldest first. A row
says which rules a release changed (``sets``), the file of *that* release it was read from
(``source``), and the published start-up log that checks it (``checked_by``; empty when the rule is
read from source and no log checks it). :meth:`History.at` folds the rows up to a release into the
:class:`TypedRules` that release follows, and remembers which row set each rule, so an estimate can say
which of the rules it used no log has checked. Adding a release is adding a row, not a condition.

>>> h = History("demo", (
...     Change("0.1.0", {"share": 0.9, "graphs": "outside"}, "demo/config.py (0.1.0)", checked_by="log A"),
...     Change("0.3.0", {"share": 0.92}, "demo/config.py (0.3.0)"),
... ), known=("0.1", "0.2", "0.3"))
>>> h.at("0.2.5").share, h.at("0.3.1").share
(0.9, 0.92)
>>> h.at("0.3.0").unchecked()
['share (0.3.0, demo/config.py (0.3.0))']
>>> h.at("0.4")
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: --demo-version='0.4' is not a demo release modelled here; use one of 0.1, 0.2, 0.3
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping

from ..errors import CourseInputError
from .versions import Version, parse_version


@dataclass(frozen=True)
class Change:
    """One release's changes to the sizing rules.

    since: the first release with them ("0.21.0"). sets: rule name -> its value from that release on.
    source: the file (and release) the rule was read from. checked_by: the published log(s) that check
    it, or "" when nothing but the source says so. why: one line on what changed, in the release's words.
    """

    since: str
    sets: Mapping[str, Any]
    source: str
    checked_by: str = ""
    why: str = ""

    @property
    def version(self) -> Version:
        v = parse_version(self.since)
        assert v is not None, self.since
        return v


@dataclass(frozen=True)
class TypedRules:
    """The rules one release follows: a frozen dataclass whose fields are the rules (enums where a rule is one
    of a few words), filled by :meth:`History.at` from the table. ``version``: the release; ``origins``: rule name ->
    the row that set it (:meth:`origin`).

    A runtime declares a subclass with one field per rule; a row setting a rule the class does not declare fails at
    import. A table given no class gets one made from its first row's rule names (typed ``Any``).
    """

    version: Version
    origins: Mapping[str, Change] = field(repr=False, compare=False)

    @classmethod
    def rule_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("version", "origins"))

    @property
    def values(self) -> dict[str, Any]:
        """rule name -> value (for tables and ``--json``)."""
        return {name: getattr(self, name) for name in self.rule_names()}

    def origin(self, name: str) -> Change:
        """The release row that set rule ``name``."""
        return self.origins[name]

    def unchecked(self, names: tuple[str, ...] | None = None) -> list[str]:
        """Rules (of ``names``, default all) read from source that no published log checks, with their release."""
        out = []
        for name in (names or self.rule_names()):
            row = self.origins.get(name)
            if row is not None and not row.checked_by:
                out.append(f"{name} ({row.since}, {row.source})")
        return out


def _coerce(hint: Any, value: Any) -> Any:
    """A table value as the rule's declared type: an enum member, or a mapping of them."""
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        for arg in typing.get_args(hint):
            if isinstance(arg, type) and issubclass(arg, Enum):
                try:
                    return arg(value)
                except ValueError:
                    continue
        return value
    if origin in (Mapping, dict, typing.Mapping) or (origin is not None and getattr(origin, "__name__", "") == "Mapping"):
        _, item = typing.get_args(hint)
        return {k: _coerce(item, v) for k, v in value.items()}
    return value


class History:
    """A runtime's release table: rows oldest first, the releases it models, and the newest (the default).

    ``rules_type``: the :class:`TypedRules` subclass that :meth:`at` fills (its fields must be the first row's
    rules); without it, one is made from the first row's names.
    """

    def __init__(self, runtime: str, changes: tuple[Change, ...], known: tuple[str, ...],
                 rules_type: type[TypedRules] | None = None):
        self.runtime = runtime
        self.changes = tuple(sorted(changes, key=lambda c: c.version))
        self.known = tuple(parse_version(k) for k in known)      # releases modelled, as major.minor[.patch]
        self._known_text = tuple(known)
        names = set(self.changes[0].sets)      # the first row defines every rule; later rows only change them
        for row in self.changes[1:]:
            extra = set(row.sets) - names
            assert not extra, f"{runtime} {row.since} sets {extra}, which the first row does not define"
        if rules_type is None:
            rules_type = dataclasses.make_dataclass(f"{runtime.capitalize()}Rules", [(n, Any) for n in sorted(names)],
                                                    bases=(TypedRules,), frozen=True)
        self.rules_type = rules_type
        declared = set(rules_type.rule_names())
        assert declared == names, f"{runtime}: {rules_type.__name__} declares {declared ^ names} differently"
        self._hints = typing.get_type_hints(rules_type)

    @property
    def latest(self) -> Version:
        """The newest release modelled (the default)."""
        return self.known[-1]

    def known_line(self) -> str:
        return ", ".join(self._known_text)

    def is_known(self, version: Version) -> bool:
        """Whether ``version`` is a release this table models (a patch of a listed minor, or a listed patch)."""
        for k, text in zip(self.known, self._known_text):
            if text.count(".") >= 2:
                if version == k:
                    return True
            elif (version.major, version.minor) == (k.major, k.minor):
                return True
        return False

    def check(self, text: str | Version | None, flag: str | None = None) -> Version:
        """The release ``text`` names, refused (one line listing the known ones) when not modelled here."""
        flag = flag or f"--{self.runtime}-version"
        if text is None:
            return self.latest
        version = parse_version(text)
        if version is None or not self.is_known(version):
            what = "a release number" if version is None else f"a {self.runtime} release modelled here"
            raise CourseInputError(f"{flag}={str(text)!r} is not {what}; use one of {self.known_line()}")
        return version

    def at(self, version: str | Version) -> Any:      # the runtime's TypedRules subclass
        """The rules of ``version``: every row up to it folded, oldest first (refused when not modelled)."""
        v = self.check(version)
        values: dict[str, Any] = {}
        origins: dict[str, Change] = {}
        for row in self.changes:
            if row.version > v:
                break
            for name, value in row.sets.items():
                values[name] = value
                origins[name] = row
        return self.rules_type(version=v, origins=origins,
                               **{k: _coerce(self._hints[k], val) for k, val in values.items()})

    def table(self) -> list[dict[str, Any]]:
        """The history as plain rows (for docs and ``--json``)."""
        return [{"since": c.since, "sets": dict(c.sets), "source": c.source, "checked_by": c.checked_by or None,
                 "why": c.why} for c in self.changes]


#: The rules of one release (the name the runtimes' type hints use).
Rules = TypedRules
