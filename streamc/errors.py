"""Errors a user can cause. Everything else is a bug and may surface as an assertion."""


class StreamcError(Exception):
    """Base of every error streamc reports to a user."""


class FrontendError(StreamcError):
    """The model cannot be read or contains something streamc does not support."""


class UnsupportedOpError(FrontendError):
    """An operator the reference executor (and so streamc) cannot execute."""


class LoweringError(StreamcError):
    """A supported-looking region could not be turned into integer hardware."""


class FoldingError(StreamcError):
    """A folding is invalid or a throughput target cannot be met."""


class ConfigError(StreamcError):
    """The build configuration is invalid."""


class BuildError(StreamcError):
    """A build step (a tool run, a verification) failed."""


class BoardError(StreamcError):
    """A board (or its simulation) did not answer as the protocol says."""
