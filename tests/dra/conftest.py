from tests.cli.conftest import kai_ray

__all__ = ["kai_ray"]
