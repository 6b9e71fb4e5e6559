"""The one error type for bad input to course_lib.

Every refusal names the value that was wrong and what would be valid, so a
learner (or the CLI, which prints it as one line and exits 2) can fix it
without reading a traceback.

>>> from course_lib.errors import CourseInputError
>>> issubclass(CourseInputError, ValueError)
True
"""

from __future__ import annotations


class CourseInputError(ValueError):
    """Bad input: a value that cannot be a size, a dtype, a config, a count...

    The message is one line: the bad value, then what would be valid.
    """


def require(condition: bool, message: str) -> None:
    """Raise :class:`CourseInputError` with ``message`` unless ``condition``.

    >>> require(1 + 1 == 2, "arithmetic is broken")
    >>> require(False, "active_sequences=-1 is negative; use 0 or more")
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: active_sequences=-1 is negative; use 0 or more
    """
    if not condition:
        raise CourseInputError(message)


def check_count(name: str, value: object, minimum: int = 0) -> int:
    """Return ``value`` as an int if it is a whole number >= ``minimum``.

    Bools are refused: ``True`` is not a count of anything.

    >>> check_count("active_sequences", 8)
    8
    >>> check_count("num_layers", 0, minimum=1)
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: num_layers=0 is too small; use a whole number >= 1
    """
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise CourseInputError(
                f"{name}={value!r} is not a whole number; use a whole number >= {minimum}"
            )
    if value < minimum:
        raise CourseInputError(
            f"{name}={value} is too small; use a whole number >= {minimum}"
        )
    return int(value)
