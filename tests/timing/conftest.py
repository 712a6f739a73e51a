"""The dev-cluster fixture of the adapter tests, for the timing tests that talk to a cluster."""

from tests.adapter.conftest import env

__all__ = ["env"]
