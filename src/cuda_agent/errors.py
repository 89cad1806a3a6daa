"""Errors a user can act on. Each message says what is wrong and what to do about it."""


class CudaAgentError(Exception):
    """Base class: an error whose message is meant for the user, printed without a traceback."""


class ConfigError(CudaAgentError, ValueError):
    """A judge setting out of its range (a negative tolerance, zero checks): ``setting`` names the
    field, so a front end can name its own flag for it."""

    def __init__(self, setting: str, message: str):
        super().__init__(f"{setting} {message}")
        self.setting = setting
        self.detail = message


class TaskFormatError(CudaAgentError):
    """A task file or dataset row does not follow the KernelBench format."""


class SolutionFormatError(CudaAgentError):
    """A candidate solution is missing a file, a class, or does not match its task."""


class BackendUnavailableError(CudaAgentError):
    """The requested execution backend cannot run on this machine."""


class ToolchainError(CudaAgentError):
    """A compiler or build tool the judge needs is missing or broken."""


class BenchmarkError(CudaAgentError):
    """A benchmark's inputs (a KernelBench checkout, a solutions directory, a run) are unusable."""


class SynthesisError(CudaAgentError):
    """A data-synthesis run cannot go on: bad options, an unusable output folder or seed catalogue."""


class ClusterError(CudaAgentError):
    """A pool of judge workers cannot start or go on: Ray missing, a cluster that does not answer,
    no GPUs where a CUDA run needs them."""


def import_extra(module: str, extra: str, needed_by: str, error: type[CudaAgentError] = CudaAgentError):
    """Import ``module`` of an optional extra, or raise ``error`` saying ``needed_by`` needs it
    and how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise error(f"{needed_by} needs {module.split('.')[0]}, which is not installed ({exc}): "
                    f"pip install 'cuda-agent[{extra}]'") from None
