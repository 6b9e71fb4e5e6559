"""The one error type the autograder raises for bad input (paths, options, instructor sources)."""


class AutograderError(ValueError):
    """Bad input to the autograder: a missing path, an unreadable option, a broken instructor source.

    Messages say what was needed, what was found, and which option or file to change.
    Problems with a learner's submission are never raised: they become a status in the results.
    """
