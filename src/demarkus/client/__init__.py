"""Clients of a Mark authority."""

from .quic import Client, ClientPool

__all__ = ["Client", "ClientPool"]
