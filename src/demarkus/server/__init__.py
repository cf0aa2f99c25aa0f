"""Network adapters in front of a `Service`."""
