"""The GPU portal's command-line client (``gpuportal``)."""

__version__ = "0.1.0"
