"""demarkus: versioned markdown served over the Mark Protocol, for agents and people."""

__version__ = "0.0.1"
