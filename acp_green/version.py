"""The package's version, in a module of its own: modules that report it import it from here,
not from the package, whose `__init__` names (for type checkers) the whole public API."""

__version__ = "0.1.0"
