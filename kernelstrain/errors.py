"""Domain errors the CLI turns into one clean line and an exit code."""


class UsageError(Exception):
    """Bad input or usage: exit 2."""


class DataError(UsageError):
    """A corrupt or unreadable input file: exit 2, naming file and line."""
