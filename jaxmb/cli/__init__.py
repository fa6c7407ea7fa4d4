from .main import console, main

__all__ = ["main", "console"]
